#!/usr/bin/env python3
"""Builds the `toolsdk` eval set from ToolSDK.ai's MCP registry (toolsdk-ai/awesome-mcp-registry, MIT).

The registry keeps one JSON file per MCP server package, `packages/CATEGORY/NAME.json`, and an
index, `indexes/packages-list.json`, keyed by package name: {category, path, validated, tools}.
Its script `scripts/test-mcp-clients.ts` installs each node package, starts it with mock
environment variables, calls `tools/list` and saves each tool's name and description (not its
inputSchema) under `tools`; packages that failed to start keep no tools. The set takes every
package with a non-empty tool list: at 7b25d5c70c873bd97851ed422fcadd971957ef8b, 708 servers and
6,344 tools.

usage:
  toolsdk_registry.py catalog GIT_DIR REV > toolsdk.catalog.jsonl
      one tool per line; server = the package file's name without `.json` (unique in the
      registry), description whitespace collapsed, inputSchema {"type": "object"} (not kept by
      the registry).
  toolsdk_registry.py picks GIT_DIR REV
      the tools a query is written for (TSV: server, category, display name, tool,
      description): the servers whose sha1(server) mod 100 < 40, and for each, among its tools
      with a description of at least 6 words, sorted by name, the one at sha1(server) mod
      their count.
  toolsdk_registry.py gold GIT_DIR REV WRITTEN.tsv > toolsdk.written.jsonl
      turns the written queries (TSV: server, tool, query) into query lines; a tool of another
      server with the same name and the same description (a copy of the package under another
      name) is labelled `alt`.
  toolsdk_registry.py split WRITTEN.jsonl OUT_DIR
      writes toolsdk.queries.jsonl (development part) and toolsdk.heldout.jsonl (the ~30% of
      queries whose sha1(id) mod 10 < 3, measured only with `eval --held-out`).
"""
import hashlib
import json
import subprocess
import sys


def git(git_dir, *args):
    run = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True)
    return run.stdout


def sha(text):
    return int(hashlib.sha1(text.encode()).hexdigest(), 16)


def servers(git_dir, rev):
    """[(server, category, display name, [(tool name, description)])], sorted by server."""
    index = json.loads(git(git_dir, "show", f"{rev}:indexes/packages-list.json"))
    out = {}
    for package, entry in index.items():
        tools = entry.get("tools") or {}
        if not tools:
            continue
        path = entry["path"]
        server = path.rsplit("/", 1)[-1].removesuffix(".json")
        assert server not in out, f"two packages named {server}"
        config = json.loads(git(git_dir, "show", f"{rev}:packages/{path}") or "{}")
        listed = [
            (t.get("name") or key, " ".join((t.get("description") or "").split()))
            for key, t in tools.items()
        ]
        out[server] = (entry["category"], config.get("name") or package, listed)
    return [(s, *out[s]) for s in sorted(out)]


def catalog(git_dir, rev):
    for server, _, _, tools in servers(git_dir, rev):
        for name, description in tools:
            line = {
                "server": server,
                "name": name,
                "description": description,
                "inputSchema": {"type": "object"},
            }
            print(json.dumps(line, ensure_ascii=False))


def picks(git_dir, rev):
    for server, category, title, tools in servers(git_dir, rev):
        if sha(server) % 100 >= 40:
            continue
        eligible = sorted((t for t in tools if len(t[1].split()) >= 6), key=lambda t: t[0])
        if not eligible:
            continue
        name, description = eligible[sha(server) % len(eligible)]
        print("\t".join([server, category, title, name, description]))


def gold(git_dir, rev, written):
    same = {}
    for server, _, _, tools in servers(git_dir, rev):
        for name, description in tools:
            same.setdefault((name, description), []).append(server)
    by_tool = {(s, n): same[(n, d)] for s, _, _, tools in servers(git_dir, rev) for n, d in tools}
    for line in open(written, encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        server, name, query = line.rstrip("\n").split("\t")
        item = {"server": server, "name": name}
        alt = [{"server": s, "name": name} for s in by_tool[(server, name)] if s != server]
        if alt:
            item["alt"] = alt
        print(json.dumps({"id": f"{server}/{name}", "query": query, "gold": [item]}, ensure_ascii=False))


def split(written, out_dir):
    dev = open(f"{out_dir}/toolsdk.queries.jsonl", "w", encoding="utf-8")
    held = open(f"{out_dir}/toolsdk.heldout.jsonl", "w", encoding="utf-8")
    for line in open(written, encoding="utf-8"):
        if line.strip():
            part = held if sha(json.loads(line)["id"]) % 10 < 3 else dev
            part.write(line)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"catalog": catalog, "picks": picks, "gold": gold, "split": split}[command](*args)
