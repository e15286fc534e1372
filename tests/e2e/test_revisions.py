"""Both protocol revisions side by side: the official Python SDK pinned to 2026-07-28 (no
initialize, no session) and in mode="legacy" (a 2025-11-25 session), over stdio and over
`serve --http`, lists the same tools as the golden file, searches, and calls the real time
server through call_tool. The conformance suite's 2026-07-28 requirements run against HTTP."""
import json
import os
import re
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import BIN, PEERS, ROOT, text_of, write_config
from test_http import CONFORMANCE, NODE22, http_server, shipped_catalogs_config, unstartable_servers

pytestmark = pytest.mark.anyio

GOLDEN = ROOT / "tests" / "golden" / "tools_list.json"
MODES = ["2026-07-28", "legacy"]
TRANSPORTS = ["stdio", "http"]
# The suite's 2026-07-28 server scenarios meta-server passes, with the checks it may fail: those
# that call the suite's own fixture tools (test_missing_capability, test_logging_tool, ...).
SCENARIOS = {
    "server-stateless": {"sep-2575-server-rejects-undeclared-capability", "sep-2575-missing-capability-http-400",
                         "sep-2575-http-server-no-independent-requests-on-stream",
                         "sep-2575-server-no-log-without-loglevel"},
    "tools-list": set(),
    "caching": set(),
    "dns-rebinding-protection": set(),
    "sep-2164-resource-not-found": set(),
    "resources-list": set(),
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def time_config(tmp_path: Path) -> Path:
    """The shipped catalogs, with the real time server (the others cannot start)."""
    servers = {**unstartable_servers(),
               "time": {"command": str(PEERS / "py" / "bin" / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}
    return shipped_catalogs_config(tmp_path, servers)


@asynccontextmanager
async def client(cfg: Path, transport: str, mode: str):
    if transport == "stdio":
        env = {**os.environ, "META_SERVER_LOG": "meta_server=info"}
        async with Client(StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"], env=env),
                          mode=mode) as c:
            yield c
        return
    with http_server(cfg) as (_, url):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http_client:
            async with Client(streamable_http_client(url, http_client=http_client), mode=mode) as c:
                yield c


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_each_revision_lists_searches_and_calls_the_time_server(time_config, transport, mode):
    golden = json.loads(GOLDEN.read_text())["result"]["tools"]
    async with client(time_config, transport, mode) as c:
        assert c.session.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        tools = await c.list_tools()
        assert [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools] == golden
        if mode != "legacy":
            assert (tools.ttl_ms, tools.cache_scope) == (86_400_000, "public"), "fixed for the process's life"
        r = await c.call_tool("search_tools", {"query": "current time in a timezone", "limit": 3})
        assert not r.is_error and r.structured_content["hits"][0]["name"] == "time__get_current_time"
        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error, text_of(r)
        assert json.loads(text_of(r))["timezone"] == "UTC"
        # server-everything's own instructions come with its tools' details: once in a session,
        # every time without one.
        given = []
        for _ in range(2):
            r = await c.call_tool("get_tool_details", {"names": ["everything__echo"]})
            given.append("everything" in r.structured_content.get("serverInstructions", {}))
        assert given == ([True, False] if mode == "legacy" else [True, True])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_auto_mode_discovers_2026_07_28_with_the_overview(time_config, transport):
    async with client(time_config, transport, "auto") as c:
        assert c.session.protocol_version == "2026-07-28"
        assert c.session.discover_result is not None and c.session.initialize_result is None
        assert c.session.server_info.name == "meta-server"
        assert "- time" in c.session.instructions


def test_conformance_2026_07_28_server_scenarios(tmp_path):
    """The suite's `--requirements 2026-07-28` server run against `serve --http`: every scenario
    in SCENARIOS passes but for the checks listed with it."""
    out = tmp_path / "conformance"
    env = {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    with http_server(shipped_catalogs_config(tmp_path, unstartable_servers())) as (_, url):
        subprocess.run([str(CONFORMANCE), "server", "--url", url, "--requirements", "2026-07-28", "-o", str(out)],
                       capture_output=True, text=True, timeout=600, env=env)
    failed = {}
    for checks in out.glob("server-*/checks.json"):
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name.removeprefix("server-"))
        failed[scenario] = {c["id"] for c in json.loads(checks.read_text()) if c["status"] == "FAILURE"}
    for scenario, allowed in SCENARIOS.items():
        assert scenario in failed, f"{scenario} did not run"
        assert failed[scenario] <= allowed, f"{scenario}: {failed[scenario] - allowed}"
