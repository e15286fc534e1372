#!/usr/bin/env python3
"""Builds the `docker-mcp` eval set from Docker's MCP registry (docker/mcp-registry, MIT).

The registry keeps one folder per server, `servers/NAME/`, with `server.yaml` (category, title,
source project) and, for many, `tools.json`: the server's MCP tool list (name, description,
inputSchema) as its authors submitted it. Servers come and go, so the catalog takes every
`tools.json` the history up to REV ever held, each at its newest version that is a non-empty
list. The set was made with REV `--all` (every branch and pull request of the 2026-12-04
snapshot): 242 servers, 4,949 tools.

usage:
  docker_mcp_registry.py catalog GIT_DIR REV > docker-mcp.catalog.jsonl
      one tool per line plus its server (the folder name), description whitespace collapsed.
  docker_mcp_registry.py picks GIT_DIR REV
      per server, the tool a query was written for (TSV: server, category, title, tool,
      description): among its tools with a description of at least 6 words, sorted by name,
      the one at sha1(server) mod their count.
  docker_mcp_registry.py split WRITTEN.jsonl OUT_DIR
      writes docker-mcp.queries.jsonl (development part) and docker-mcp.heldout.jsonl (the
      ~30% of queries whose sha1(id) mod 10 < 3, measured only with `eval --held-out`).
"""
import hashlib
import json
import re
import subprocess
import sys


def git(git_dir, *args):
    run = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True)
    return run.stdout


def servers(git_dir, rev):
    """{server: (tools, server.yaml text)} at the newest version with tools."""
    log = git(git_dir, "log", rev, "--format=C %H", "--name-only", "--", "servers/*/tools.json")
    commits, current = {}, None
    for line in log.splitlines():
        if line.startswith("C "):
            current = line[2:]
        elif line.endswith("/tools.json"):
            commits.setdefault(line, []).append(current)
    out = {}
    for path, newest_first in sorted(commits.items()):
        name = path.split("/")[1]
        for commit in newest_first:
            text = git(git_dir, "show", f"{commit}:{path}")
            if not text:
                continue  # deleted by this commit: look at an older one
            try:
                tools = json.loads(text)
            except ValueError:
                break
            tools = [t for t in tools if isinstance(t, dict) and t.get("name")] if isinstance(tools, list) else []
            if tools:
                out[name] = (tools, git(git_dir, "show", f"{commit}:servers/{name}/server.yaml"))
            break
    return out


def catalog(git_dir, rev):
    for name, (tools, _) in sorted(servers(git_dir, rev).items()):
        for t in tools:
            line = {
                "server": name,
                "name": t["name"],
                "description": " ".join((t.get("description") or "").split()),
                "inputSchema": t.get("inputSchema") or {"type": "object"},
            }
            print(json.dumps(line, ensure_ascii=False))


def picks(git_dir, rev):
    for name, (tools, yaml) in sorted(servers(git_dir, rev).items()):
        eligible = sorted(
            (t for t in tools if len((t.get("description") or "").split()) >= 6),
            key=lambda t: t["name"],
        )
        if not eligible:
            continue
        tool = eligible[int(hashlib.sha1(name.encode()).hexdigest(), 16) % len(eligible)]
        category = re.search(r"category:\s*(\S+)", yaml)
        title = re.search(r"title:\s*(.+)", yaml)
        print("\t".join([
            name,
            category.group(1) if category else "?",
            title.group(1).strip() if title else name,
            tool["name"],
            " ".join(tool["description"].split()),
        ]))


def split(written, out_dir):
    dev = open(f"{out_dir}/docker-mcp.queries.jsonl", "w", encoding="utf-8")
    held = open(f"{out_dir}/docker-mcp.heldout.jsonl", "w", encoding="utf-8")
    for line in open(written, encoding="utf-8"):
        if line.strip():
            query_id = json.loads(line)["id"]
            part = held if int(hashlib.sha1(query_id.encode()).hexdigest(), 16) % 10 < 3 else dev
            part.write(line)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"catalog": catalog, "picks": picks, "split": split}[command](*args)
