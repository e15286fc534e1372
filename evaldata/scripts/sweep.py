#!/usr/bin/env python3
"""The `sweep` set's catalog: the tool lists of 31 real MCP servers as they list them.

usage: sweep.py config NPM_DIR PY_DIR DATA_DIR > config.json
         NPM_DIR: `npm install` of the NPM packages below; PY_DIR: one venv per PyPI package,
         PY_DIR/py-NAME (Python 3.11); DATA_DIR: scratch (a git repository in DATA_DIR/repo).
         Then `meta-server --config config.json index --catalog-dir CATALOGS`.
       sweep.py catalog CATALOGS > sweep.catalog.jsonl
         One line per tool: server, name, title and description as listed, and of the
         inputSchema only what search reads (top-level properties' type, description, default;
         required).
"""
import json
import sys
from pathlib import Path

# config name -> (package and version, its command, args, env); no server is reached: the keys are dummies.
NPM = {
    "everything": ("@modelcontextprotocol/server-everything@2026.8.31", "mcp-server-everything", ["stdio"], {}),
    "filesystem": ("@modelcontextprotocol/server-filesystem@2026.8.31", "mcp-server-filesystem", ["{data}"], {}),
    "memory": ("@modelcontextprotocol/server-memory@2026.8.31", "mcp-server-memory", [], {"MEMORY_FILE_PATH": "{data}/memory.jsonl"}),
    "sequential-thinking": ("@modelcontextprotocol/server-sequential-thinking@2026.8.31", "mcp-server-sequential-thinking", [], {}),
    "playwright": ("@playwright/mcp@0.0.83", "playwright-mcp", ["--headless"], {}),
    "desktop-commander": ("@wonderwhy-er/desktop-commander@0.2.52", "desktop-commander", [], {}),
    "context7": ("@upstash/context7-mcp@4.1.1", "context7-mcp", [], {}),
    "chrome-devtools": ("chrome-devtools-mcp@1.11.0", "chrome-devtools-mcp", [], {}),
    # needs Node 22 (node:sqlite)
    "dbhub": ("@bytebase/dbhub@1.4.0", "dbhub", ["--transport", "stdio", "--demo"], {}),
    "mongodb": ("mongodb-mcp-server@3.0.4", "mongodb-mcp-server", [], {}),
    "kubernetes": ("mcp-server-kubernetes@4.1.7", "mcp-server-kubernetes", [], {}),
    "github": ("@modelcontextprotocol/server-github@2025.4.8", "mcp-server-github", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"}),
    "notion": ("@notionhq/notion-mcp-server@2.5.2", "notion-mcp-server", [], {"NOTION_TOKEN": "x"}),
    "tavily": ("tavily-mcp@0.2.22", "tavily-mcp", [], {"TAVILY_API_KEY": "x"}),
    "firecrawl": ("firecrawl-mcp@3.26.0", "firecrawl-mcp", [], {"FIRECRAWL_API_KEY": "fc-x"}),
    "slack": ("@modelcontextprotocol/server-slack@2025.4.25", "mcp-server-slack", [], {"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_TEAM_ID": "T0"}),
    "puppeteer": ("@modelcontextprotocol/server-puppeteer@2025.5.12", "mcp-server-puppeteer", [], {}),
    "exa": ("exa-mcp-server@3.4.1", "exa-mcp-server", [], {"EXA_API_KEY": "x"}),
    "sentry": ("@sentry/mcp-server@0.39.0", "sentry-mcp", ["--access-token", "x"], {}),
    "brave-search": ("@modelcontextprotocol/server-brave-search@0.6.2", "mcp-server-brave-search", [], {"BRAVE_API_KEY": "x"}),
}
PYPI = {
    "time": ("mcp-server-time==2026.10.19", "mcp-server-time", ["--local-timezone", "UTC"], {}),
    "git": ("mcp-server-git==2026.10.19", "mcp-server-git", ["-r", "{data}/repo"], {}),
    "fetch": ("mcp-server-fetch==2026.10.24", "mcp-server-fetch", [], {}),
    "grafana": ("mcp-grafana==2.1.1", "mcp-grafana", [], {"GRAFANA_URL": "http://127.0.0.1:9"}),
    "duckdb": ("mcp-server-motherduck==1.1.0", "mcp-server-motherduck", ["--db-path", ":memory:", "--read-write"], {}),
    "markitdown": ("markitdown-mcp==0.0.1a8", "markitdown-mcp", [], {}),
    "wikipedia": ("wikipedia-mcp==2.0.1", "wikipedia-mcp", [], {}),
    "arxiv": ("arxiv-mcp-server==0.8.2", "arxiv-mcp-server", ["--storage-path", "{data}/arxiv"], {}),
    "calculator": ("mcp-server-calculator==0.2.1", "mcp-server-calculator", [], {}),
    "aws-docs": ("awslabs-aws-documentation-mcp-server==1.2.3", "awslabs.aws-documentation-mcp-server", [], {}),
    "neo4j": ("mcp-neo4j-cypher==0.6.0", "mcp-neo4j-cypher", [], {"NEO4J_URI": "bolt://127.0.0.1:9", "NEO4J_USERNAME": "x", "NEO4J_PASSWORD": "x"}),
}


def config(npm, py, data):
    fill = lambda s: s.replace("{data}", data)
    servers = {}
    for name, (_, exe, args, env) in NPM.items():
        servers[name] = {"command": "node", "args": [f"{npm}/node_modules/.bin/{exe}", *map(fill, args)]}
        servers[name]["env"] = {k: fill(v) for k, v in env.items()}
    for name, (package, exe, args, env) in PYPI.items():
        venv = f"{py}/py-{package.split('==')[0]}"
        servers[name] = {"command": f"{venv}/bin/{exe}", "args": [*map(fill, args)]}
        servers[name]["env"] = {k: fill(v) for k, v in env.items()}
    for server in servers.values():
        server["timeoutSecs"] = 120
    return {"mcpServers": servers}


def slim(schema):
    """What search reads of a schema: top-level properties' type, description and default."""
    out = {"type": "object"}
    props = {}
    for name, p in (schema.get("properties") or {}).items():
        p = p if isinstance(p, dict) else {}
        props[name] = {k: p[k] for k in ("type", "description", "default") if k in p}
    if props:
        out["properties"] = props
    if schema.get("required"):
        out["required"] = schema["required"]
    return out


def catalog(catalogs):
    for path in sorted(Path(catalogs).glob("*.json")):
        c = json.loads(path.read_text())
        for t in c["tools"]:
            line = {"server": c["server"], "name": t["name"]}
            for k in ("title", "description"):
                if t.get(k):
                    line[k] = t[k]
            line["inputSchema"] = slim(t.get("inputSchema") or {})
            print(json.dumps(line, ensure_ascii=False, separators=(",", ":")))


if __name__ == "__main__":
    if sys.argv[1:2] == ["config"] and len(sys.argv) == 5:
        print(json.dumps(config(*sys.argv[2:]), indent=1))
    elif sys.argv[1:2] == ["catalog"] and len(sys.argv) == 3:
        catalog(sys.argv[2])
    else:
        sys.exit(__doc__)
