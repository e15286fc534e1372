#!/usr/bin/env python3
"""Converts the Azure MCP Server's tool-selection test data into eval files.

Input: eng/tools/ToolDescriptionEvaluator/{tools.json,prompts.json} of microsoft/mcp (MIT) at
commit 2c930f6f591f94a1b52a2fecc26fe0f076ce38fa. tools.json is the server's own tool list
(`azmcp tools list`): command, description and options; prompts.json maps each tool to the
prompts its authors expect to select it.

Output (stdout is unused): azure.catalog.jsonl and azure.queries.jsonl in OUT_DIR.
One MCP tool per command: name = the command with spaces as `_` (`storage_account_list`), as
the server names its tools; inputSchema = the options (`--resource-group` -> `resource-group`).
Prompts whose tool is not in tools.json are dropped (one: redis_create).

usage: azure_mcp.py TOOLS_JSON PROMPTS_JSON OUT_DIR
"""
import json
import sys

tools_path, prompts_path, out = sys.argv[1:]
tools = json.load(open(tools_path, encoding="utf-8"))["results"]
prompts = json.load(open(prompts_path, encoding="utf-8"))
names = set()
with open(f"{out}/azure.catalog.jsonl", "w", encoding="utf-8") as f:
    for t in sorted(tools, key=lambda t: t["command"]):
        name = t["command"].replace(" ", "_")
        names.add(name)
        props, required = {}, []
        for o in t.get("option") or []:
            key = o["name"].lstrip("-")
            props[key] = {"type": o.get("type") or "string", "description": o.get("description") or ""}
            if o.get("required"):
                required.append(key)
        schema = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        line = {"server": "azure", "name": name, "description": " ".join(t["description"].split()), "inputSchema": schema}
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
n = 0
with open(f"{out}/azure.queries.jsonl", "w", encoding="utf-8") as f:
    for tool, texts in prompts.items():
        if tool not in names:
            continue
        for text in texts:
            n += 1
            f.write(json.dumps({"id": f"azure-{n}", "query": text, "gold": [{"server": "azure", "name": tool}]}, ensure_ascii=False) + "\n")
