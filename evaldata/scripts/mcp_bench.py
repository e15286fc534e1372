#!/usr/bin/env python3
"""Converts MCP-Bench's tasks into eval files: task sentences over 28 real MCP servers.

Inputs:
- TASKS_DIR: tasks/mcpbench_tasks_{single,multi_2server,multi_3server}_runner_format.json of
  Accenture/mcp-bench (Apache-2.0) at commit 09e5233 (see evaldata/README.md);
- TOOLS_JSON: {server display name: {"tools": [MCP tool objects]}}, the tools of the 28
  servers vendored in that repository (how each list was made: evaldata/README.md).

Output in OUT_DIR: mcp-bench.catalog.jsonl (one tool per line plus its server id) and
mcp-bench.queries.jsonl: per task, its `fuzzy_description` (the task retold as a user would
ask it, without tool names) as the query; the gold tools are the task's servers' tools that its
`dependency_analysis` or `task_description` names, either as `Server:tool` or, for names that
look like identifiers (with `_`, `-` or a capital inside), as the bare name. Tasks naming no tool
are dropped.

Only servers that come with a licence of their own are kept (UNLICENSED lists the nine vendored
without one, whose tool texts we may not redistribute), and so only tasks whose servers are all
kept.

usage: mcp_bench.py TASKS_DIR TOOLS_JSON OUT_DIR
"""
import json
import re
import sys

tasks_dir, tools_path, out = sys.argv[1:]
# Vendored in MCP-Bench without a licence file of their own (evaldata/README.md).
UNLICENSED = {
    "Call for Papers", "Car Price Evaluator", "FruityVice", "Game Trends", "Medical Calculator",
    "Movie Recommender", "OKX Exchange", "OSINT Intelligence", "Weather Data",
}
servers = {
    display: tools
    for display, tools in json.load(open(tools_path, encoding="utf-8")).items()
    if display not in UNLICENSED
}


def server_id(display):
    return re.sub(r"[^a-z0-9]+", "-", display.lower()).strip("-")


with open(f"{out}/mcp-bench.catalog.jsonl", "w", encoding="utf-8") as f:
    for display in sorted(servers):
        for tool in servers[display]["tools"]:
            f.write(json.dumps({"server": server_id(display), **tool}, ensure_ascii=False) + "\n")


def identifier_like(name):
    return bool(re.search(r"[_-]|[a-z][A-Z]", name))


n = dropped = 0
with open(f"{out}/mcp-bench.queries.jsonl", "w", encoding="utf-8") as f:
    for kind in ["single", "multi_2server", "multi_3server"]:
        data = json.load(open(f"{tasks_dir}/mcpbench_tasks_{kind}_runner_format.json", encoding="utf-8"))
        for group in data["server_tasks"]:
            names = group["server_name"].split("+")
            if UNLICENSED.intersection(names):
                dropped += len(group["tasks"])
                continue
            for task in group["tasks"]:
                text = task.get("dependency_analysis", "") + "\n" + task.get("task_description", "")
                gold = []
                for display in names:
                    for tool in servers.get(display, {}).get("tools", []):
                        t = re.escape(tool["name"])
                        qualified = re.search(rf"{re.escape(display)}\s*:\s*{t}\b", text)
                        bare = identifier_like(tool["name"]) and re.search(rf"(?<![\w-]){t}(?![\w-])", text)
                        if qualified or bare:
                            gold.append({"server": server_id(display), "name": tool["name"]})
                if not gold:
                    dropped += 1
                    continue
                n += 1
                query = " ".join(task["fuzzy_description"].split())
                f.write(json.dumps({"id": task["task_id"], "query": query, "gold": gold}, ensure_ascii=False) + "\n")
print(f"{n} tasks kept, {dropped} dropped (an unlicensed server, or naming no tool)", file=sys.stderr)
