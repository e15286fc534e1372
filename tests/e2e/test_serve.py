"""search -> details -> call through meta-server, driven by the official Python SDK in its default
mode="auto" (which probes server/discover first and goes on in 2026-07-28), against real upstream
servers."""
import asyncio
import json
import os
import signal
import subprocess
import time

import pytest
from mcp import Client, StdioServerParameters

from conftest import (BIN, children, descendants_of_config, meta_client, meta_server_pid, run_cli, server_entries,
                      text_of, wait_until, write_config)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_search_details_and_calls_through_four_real_servers(indexed, tmp_path):
    started = time.monotonic()
    async with meta_client(indexed) as c:
        # The discover probe was answered: the SDK speaks 2026-07-28, without a session.
        assert c.session.protocol_version == "2026-07-28"
        assert time.monotonic() - started < 9, "the server/discover probe stalled"
        overview = c.session.instructions
        for server in ("everything", "filesystem", "memory", "time"):
            assert f"- {server}" in overview

        tools = await c.list_tools()
        assert [t.name for t in tools.tools] == ["search_tools", "get_tool_details", "call_tool"]
        me = meta_server_pid(indexed)
        assert children(me) == [], "nothing starts before the first call"

        r = await c.call_tool("search_tools", {"query": "echo back a message", "limit": 3})
        assert not r.is_error
        hits = r.structured_content["hits"]
        assert r.structured_content["confident"] is True
        assert hits[0]["name"] == "everything__echo"
        assert hits[0]["signature"] == "(message*: string)"
        assert "everything__echo(message*: string)" in text_of(r)
        assert children(me) == [], "searching starts nothing"

        r = await c.call_tool("get_tool_details", {"names": ["everything__echo", "time__get_current_time"]})
        details = {t["name"]: t for t in r.structured_content["tools"]}
        assert details["everything__echo"]["inputSchema"]["required"] == ["message"]
        assert details["time__get_current_time"]["server"] == "time"
        assert r.structured_content["notFound"] == []
        assert children(me) == [], "details come from the catalog"

        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})
        assert not r.is_error, text_of(r)
        assert text_of(r) == "Echo: hi"
        assert len(children(me)) == 1, "one upstream after the first call"

        r = await c.call_tool("call_tool", {"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}})
        assert not r.is_error and "5" in text_of(r)
        assert len(children(me)) == 1, "the same connection serves the next call"

        r = await c.call_tool("call_tool", {"name": "filesystem__read_text_file",
                                            "arguments": {"path": str(tmp_path / "notes.txt")}})
        assert not r.is_error, text_of(r)
        assert "hello from the filesystem server" in text_of(r)
        # filesystem declares an outputSchema; its structuredContent is passed through as sent
        assert r.structured_content == {"content": "hello from the filesystem server\n"}

        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error, text_of(r)
        assert json.loads(text_of(r))["timezone"] == "UTC"
        assert len(children(me)) == 3
    wait_until(lambda: descendants_of_config(tmp_path) == [], "all processes to exit after the client closed")


async def test_bad_calls_get_errors_the_model_can_act_on(indexed):
    async with meta_client(indexed) as c:
        me = meta_server_pid(indexed)
        r = await c.call_tool("call_tool", {"name": "everything__get-sum", "arguments": {"a": "two"}})
        assert r.is_error
        msg = text_of(r)
        assert "/a" in msg and "number" in msg and '"b" is a required property' in msg
        assert children(me) == [], "invalid arguments never reach the upstream"

        r = await c.call_tool("call_tool", {"name": "everything__ecko", "arguments": {}})
        assert r.is_error and "everything__echo" in text_of(r) and "search_tools" in text_of(r)

        r = await c.call_tool("call_tool", {"name": "get_current_time", "arguments": {}})
        assert r.is_error and "time__get_current_time" in text_of(r)

        r = await c.call_tool("get_tool_details", {"names": ["memory__read_grap"]})
        assert r.structured_content["tools"] == []
        assert r.structured_content["notFound"][0]["suggestions"][0] == "memory__read_graph"

        r = await c.call_tool("search_tools", {"query": "x", "server": "nope"})
        assert r.is_error and "everything" in text_of(r)

        r = await c.call_tool("search_tools", {"query": "zzqx florp"})
        assert r.structured_content["confident"] is False and r.structured_content["hits"] == []
        assert "server" in r.structured_content["hint"]

        # An upstream that reports a tool error comes back as the upstream's error result
        r = await c.call_tool("call_tool", {"name": "filesystem__read_text_file", "arguments": {"path": "/etc/passwd"}})
        assert r.is_error and "denied" in text_of(r).lower()


async def test_concurrent_first_calls_share_one_connection(indexed):
    async with meta_client(indexed) as c:
        me = meta_server_pid(indexed)
        calls = [c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": f"m{i}"}}) for i in range(6)]
        results = await asyncio.gather(*calls)
        assert [text_of(r) for r in results] == [f"Echo: m{i}" for i in range(6)]
        assert len(children(me)) == 1


async def test_idle_upstream_is_stopped_and_restarted_on_demand(tmp_path):
    cfg = write_config(tmp_path, {k: v for k, v in server_entries(tmp_path).items() if k == "everything"},
                       idleTimeoutSecs=1)
    run_cli(cfg, "index")
    async with meta_client(cfg) as c:
        me = meta_server_pid(cfg)
        assert children(me) == []
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "a"}})
        assert text_of(r) == "Echo: a"
        assert len(children(me)) == 1
        wait_until(lambda: children(me) == [], "the idle upstream to stop")
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "b"}})
        assert text_of(r) == "Echo: b"
        assert len(children(me)) == 1


async def test_slow_call_times_out_and_server_stays_usable(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": {**entries["everything"], "timeoutSecs": 1}})
    run_cli(cfg, "index")
    async with meta_client(cfg) as c:
        r = await c.call_tool("call_tool", {"name": "everything__trigger-long-running-operation",
                                            "arguments": {"duration": 30, "steps": 3}})
        assert r.is_error and "timeoutSecs" in text_of(r)
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "still here"}})
        assert text_of(r) == "Echo: still here"


async def test_crashed_upstream_gives_error_then_reconnects(indexed):
    async with meta_client(indexed) as c:
        me = meta_server_pid(indexed)
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "a"}})
        assert text_of(r) == "Echo: a"
        [child] = children(me)
        os.kill(child, signal.SIGKILL)
        wait_until(lambda: child not in children(me), "the killed upstream to be reaped")
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "b"}})
        assert r.is_error and "next call starts it again" in text_of(r)
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "c"}})
        assert text_of(r) == "Echo: c"
        assert len(children(me)) == 1 and children(me)[0] != child


async def test_servers_without_catalog_are_indexed_in_the_background(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"time": entries["time"], "memory": entries["memory"]})
    assert not (tmp_path / "catalogs").exists()
    async with meta_client(cfg) as c:
        me = meta_server_pid(cfg)

        async def search():
            return (await c.call_tool("search_tools", {"query": "current time in a timezone"})).structured_content

        first = await search()
        # Either still indexing (and saying which servers), or already done.
        assert set(first.get("indexing", [])) <= {"time", "memory"}
        deadline = time.monotonic() + 60
        while True:
            result = await search()
            if not result.get("indexing") and result["hits"]:
                break
            assert time.monotonic() < deadline, f"background indexing did not finish: {result}"
            await asyncio.sleep(0.2)
        assert result["hits"][0]["name"] == "time__get_current_time"
        assert (tmp_path / "catalogs" / "time.json").exists() and (tmp_path / "catalogs" / "memory.json").exists()
        wait_until(lambda: children(me) == [], "indexing connections to be closed")
        r = await c.call_tool("call_tool", {"name": "memory__read_graph", "arguments": {}})
        assert not r.is_error, text_of(r)


async def test_legacy_mode_client_works_too(indexed):
    async with meta_client(indexed, mode="legacy") as c:
        r = await c.call_tool("search_tools", {"query": "knowledge graph entities", "limit": 3})
        assert all(h["server"] == "memory" for h in r.structured_content["hits"])


async def test_streamable_http_upstream_with_expanded_url_and_headers(tmp_path, everything_http):
    servers = {"everything-http": {"type": "http", "url": "http://127.0.0.1:${EV_PORT}/mcp",
                                   "headers": {"X-Client-Token": "Bearer ${EV_TOKEN}"}}}
    cfg = write_config(tmp_path, servers)
    env = {"EV_PORT": str(everything_http), "EV_TOKEN": "not-a-real-secret-123"}
    run_cli(cfg, "index", env=env)
    catalog = (tmp_path / "catalogs" / "everything-http.json").read_text()
    assert "not-a-real-secret-123" not in catalog
    async with meta_client(cfg, env=env) as c:
        r = await c.call_tool("search_tools", {"query": "echo", "limit": 1})
        assert r.structured_content["hits"][0]["name"] == "everything-http__echo"
        r = await c.call_tool("call_tool", {"name": "everything-http__echo", "arguments": {"message": "over http"}})
        assert not r.is_error, text_of(r)
        assert text_of(r) == "Echo: over http"
    # Without the variable the launch fails with an error naming it, not a crash.
    proc = run_cli(cfg, "index", check=False, env={"EV_PORT": str(everything_http), "EV_TOKEN": ""})
    assert proc.returncode == 0, "an empty variable is still set"
    env_without = {k: v for k, v in os.environ.items() if k not in ("EV_PORT", "EV_TOKEN")}
    proc = subprocess.run([str(BIN), "--config", str(cfg), "index"], capture_output=True, text=True, env=env_without)
    assert proc.returncode == 2 and "EV_PORT" in proc.stdout


async def test_secrets_never_reach_files_logs_or_errors(tmp_path, everything_http):
    secret = "sk-live-" + "7f3a9c2e" * 4
    entries = server_entries(tmp_path)
    servers = {
        "time": {**entries["time"], "env": {"API_TOKEN": "${TEST_SECRET}"}},
        "remote": {"type": "http", "url": f"http://127.0.0.1:{everything_http}/mcp",
                   "headers": {"Authorization": "Bearer ${TEST_SECRET}"}},
        "broken": {"command": "/nonexistent/server", "env": {"TOKEN": "${TEST_SECRET}"}},
    }
    cfg = write_config(tmp_path, servers)
    env = {"TEST_SECRET": secret, "META_SERVER_LOG": "trace"}
    index = run_cli(cfg, "index", check=False, env=env)
    serve_log = tmp_path / "serve-stderr.log"
    params = StdioServerParameters(command="sh", args=["-c", f'exec "{BIN}" --config "{cfg}" serve 2>"{serve_log}"'],
                                   env={**os.environ, **env})
    async with Client(params) as c:
        for name, args in [("time__get_current_time", {"timezone": "UTC"}), ("remote__echo", {"message": "hi"}),
                           ("remote__get-env", {}), ("time__get_current_time", {"timezone": 3})]:
            r = await c.call_tool("call_tool", {"name": name, "arguments": args})
            if name != "remote__get-env":
                assert secret not in text_of(r)
    log = subprocess.run([str(BIN), "--config", str(cfg), "-vv", "search", "time"], capture_output=True, text=True,
                         env={**os.environ, **env})
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "config.json"]
    assert any(p.suffix == ".json" for p in written) and serve_log.stat().st_size > 1000, "trace logs were written"
    for path in written:
        assert secret not in path.read_text(errors="replace"), f"secret leaked into {path}"
    for output in (index.stdout, index.stderr, log.stdout, log.stderr):
        assert secret not in output
