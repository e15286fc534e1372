"""meta-server as a client of upstreams of either revision: a server that speaks only
2026-07-28 (tests/e2e/fixtures/modern_server.py, the official Python SDK's 2026-07-28 loop) is
indexed, searched and called over stdio and streamable HTTP, with its revision in its catalog;
a 2025-11-25 server (server-everything) is probed with `server/discover` on its first connection
only, and connected with plain `initialize` from then on. The conformance suite's 2026-07-28
client scenarios (headers, request metadata, request state, auth) run against meta-server."""
import json
import os
import re
import subprocess
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters

from conftest import BIN, PEERS, everything_over, free_port, meta_client, run_cli, text_of, wait_until, write_config

from test_auth import ADAPTER, CONFORMANCE, NODE22
from test_http import EXPECTED_FAILURES

pytestmark = pytest.mark.anyio

PYTHON = str(PEERS / "py" / "bin" / "python")
FIXTURE = str(Path(__file__).with_name("fixtures") / "modern_server.py")
DEBUG = {"META_SERVER_LOG": "meta_server=debug"}


def catalog(tmp: Path, server: str) -> dict:
    return json.loads((tmp / "catalogs" / f"{server}.json").read_text())


@contextmanager
def modern_http():
    """The 2026-07-28-only fixture over streamable HTTP; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([PYTHON, FIXTURE, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        import socket
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    try:
        wait_until(listening, "the 2026-07-28 fixture to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def modern_entry(transport: str):
    if transport == "stdio":
        yield {"command": PYTHON, "args": [FIXTURE]}
    else:
        with modern_http() as url:
            yield {"type": "http", "url": url}


async def test_the_fixture_refuses_initialize():
    """The premise: the fixture cannot be reached with `initialize`, over stdio or HTTP."""
    try:
        async with Client(StdioServerParameters(command=PYTHON, args=[FIXTURE]), mode="legacy"):
            refused = None
    except Exception as e:  # the SDK raises it inside an exception group
        refused = "".join(traceback.format_exception(e))
    assert refused and "the initialize handshake is not accepted" in refused
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    with modern_http() as url:
        r = httpx2.post(url, json=initialize, headers={"accept": "application/json, text/event-stream"})
    assert r.status_code == 400 and r.json()["error"]["data"]["supported"] == ["2026-07-28"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_07_28_only_server_is_indexed_searched_and_called(tmp_path, transport):
    with modern_entry(transport) as entry:
        cfg = write_config(tmp_path, {"weather": entry})
        run_cli(cfg, "index")
        written = catalog(tmp_path, "weather")
        assert written["protocolVersion"] == "2026-07-28"
        assert written["serverInfo"]["name"] == "modern-only-fixture"
        assert [t["name"] for t in written["tools"]] == ["forecast"]
        async with meta_client(cfg, mode="legacy") as c:
            r = await c.call_tool("search_tools", {"query": "weather forecast for a city"})
            assert r.structured_content["hits"][0]["name"] == "weather__forecast"
            r = await c.call_tool("call_tool", {"name": "weather__forecast", "arguments": {"city": "Oslo"}})
            assert not r.is_error, text_of(r)
            assert text_of(r) == "tomorrow in Oslo: sunny, 21 C"
        assert catalog(tmp_path, "weather")["protocolVersion"] == "2026-07-28"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_2025_11_25_server_is_probed_once_then_initialized(tmp_path, transport):
    @contextmanager
    def everything():
        if transport == "stdio":
            entry = {"command": "node", "args": [str(PEERS / "npm" / "node_modules" / "@modelcontextprotocol" /
                                                 "server-everything" / "dist" / "index.js"), "stdio"]}
            yield entry
        else:
            with everything_over("streamableHttp") as port:
                yield {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}

    with everything() as entry:
        cfg = write_config(tmp_path, {"everything": entry})
        first = run_cli(cfg, "index", env=DEBUG)
        assert "start=Probe" in first.stderr, first.stderr[-3000:]
        assert catalog(tmp_path, "everything")["protocolVersion"] == "2025-11-25"
        again = run_cli(cfg, "call", "everything__echo", json.dumps({"message": "hi"}), env=DEBUG)
        assert "Echo: hi" in again.stdout
        assert "start=Initialize" in again.stderr and "start=Probe" not in again.stderr, again.stderr[-3000:]
        relisted = run_cli(cfg, "index", env=DEBUG)
        assert "start=Initialize" in relisted.stderr and "start=Probe" not in relisted.stderr


def test_conformance_2026_07_28_client_scenarios(tmp_path):
    """The suite's `--requirements 2026-07-28` client run, meta-server driven by
    tests/conformance/client: every scored scenario passes (those expected to fail would be
    listed in conformance-expected-failures.yml under `client`, with the reason)."""
    env = {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "META_SERVER_BIN": str(BIN), "META_SERVER_PYTHON": sys.executable}
    listed = subprocess.run([str(CONFORMANCE), "list", "--client", "--requirements", "2026-07-28"],
                            capture_output=True, text=True, timeout=60, env=env).stdout
    scored = re.findall(r"^  - (\S+)$", listed.split("Client scenarios")[1].split("Run and reported")[0], re.M)
    assert len(scored) == 32, listed
    proc = subprocess.run(
        # Scenarios run side by side, each starting a few debug meta-server processes: a busy
        # machine needs more than the suite's 30 s per scenario.
        [str(CONFORMANCE), "client", "--command", str(ADAPTER), "--requirements", "2026-07-28",
         "--timeout", "180000", "--expected-failures", str(EXPECTED_FAILURES), "-o", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    passed = set(re.findall(r"^✓ (\S+):", out, re.M))
    assert proc.returncode == 0 and passed >= set(scored), \
        f"not passed: {sorted(set(scored) - passed)}\n{out[-6000:]}"
