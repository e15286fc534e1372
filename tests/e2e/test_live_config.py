"""Servers come and go: `meta-server add|remove|get|list` edit and read a commented config
(every other byte kept), and a running `serve` (stdio, and two HTTP replicas sharing a Valkey
store) follows the config file: added servers are searched and called, removed ones leave
search and their processes exit, a broken edit is not applied, tools/list stays the same bytes
(unless an alwaysLoad server comes or goes, which clients are told). Real servers only:
mcp-server-time and server-memory over stdio, server-everything over streamable HTTP."""
import asyncio
import json
import os
import signal
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters

from conftest import BIN, NPM, PEERS, meta_server_pid, processes, run_cli, text_of, wait_until
from test_gateway import Balancer, client_through, replicas, valkey  # noqa: F401 (valkey: a fixture)

TIME = [str(PEERS / "py" / "bin" / "mcp-server-time"), "--local-timezone", "UTC"]

# A config as a person writes it: comments, trailing commas, their own layout.
COMMENTED = """// meta-server's servers
{
  "metaServer": {
    "catalogDir": "catalogs", // beside this file
  },
  /* the servers */
  "mcpServers": {
  },
}
"""


def listing(cfg: Path) -> dict:
    return json.loads(run_cli(cfg, "list", "--json").stdout)


def test_add_list_get_remove_on_a_commented_config(tmp_path, everything_http):
    cfg = tmp_path / "config.json"
    cfg.write_text(COMMENTED)
    added = run_cli(cfg, "add", "time", "--", *TIME)
    assert 'added server "time" (stdio)' in added.stdout
    assert "2 tools" in added.stdout, added.stdout
    after_time = cfg.read_text()
    url = f"http://127.0.0.1:{everything_http}/mcp"
    added = run_cli(cfg, "add", "everything", url, "-H", "X-Team: docs")
    assert 'added server "everything" (http)' in added.stdout, added.stdout
    text = cfg.read_text()
    for kept in ("// meta-server's servers", '"catalogDir": "catalogs", // beside this file', "/* the servers */"):
        assert kept in text, text

    servers = {s["key"]: s for s in listing(cfg)["servers"]}
    assert set(servers) == {"time", "everything"}
    assert servers["time"]["transport"] == "stdio" and servers["time"]["state"] == "indexed"
    assert servers["time"]["tools"] == 2
    assert servers["everything"]["transport"] == "http" and servers["everything"]["state"] == "indexed"
    assert servers["everything"]["tools"] >= 10 and servers["everything"]["prompts"] >= 1
    assert servers["everything"]["target"] == url
    assert servers["everything"]["refreshedAt"] and servers["everything"]["revision"]

    got = run_cli(cfg, "get", "everything").stdout
    assert f"url:         {url}" in got and "headers:     X-Team" in got and "state:       indexed" in got, got
    assert json.loads(run_cli(cfg, "get", "time", "--json").stdout)["tools"] == 2

    table = run_cli(cfg, "list").stdout.splitlines()
    assert table[0].split() == ["server", "transport", "state", "tools", "refreshed", "revision", "quarantined"]
    assert table[1].split()[:4] == ["everything", "http", "indexed", str(servers["everything"]["tools"])]

    removed = run_cli(cfg, "remove", "everything")
    assert "deleted" in removed.stdout and "everything.json" in removed.stdout, removed.stdout
    assert cfg.read_text() == after_time, "removing gives back the file as it was, byte for byte"
    assert not (tmp_path / "catalogs" / "everything.json").exists()
    assert [s["key"] for s in listing(cfg)["servers"]] == ["time"]


def test_refusals_leave_the_config_alone(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(COMMENTED)
    run_cli(cfg, "add", "--no-index", "time", "--", *TIME)
    before = cfg.read_bytes()
    again = run_cli(cfg, "add", "time", "--", *TIME, check=False)
    assert again.returncode == 1 and "--force" in again.stderr, again.stderr
    bad = run_cli(cfg, "add", "a__b", "x", check=False)
    assert bad.returncode == 1 and '"__"' in bad.stderr, bad.stderr
    gone = run_cli(cfg, "remove", "nothing", check=False)
    assert gone.returncode == 1 and "configured: time" in gone.stderr, gone.stderr
    assert cfg.read_bytes() == before
    state = listing(cfg)["servers"][0]
    assert (state["key"], state["state"], state["tools"]) == ("time", "not-indexed", None)
    # A server that cannot start is added, said to fail, and listed as failing with the reason.
    failing = run_cli(cfg, "add", "broken", str(tmp_path / "no-such-server"), check=False)
    assert failing.returncode == 2 and "not indexed" in failing.stdout, failing.stdout
    broken = next(s for s in listing(cfg)["servers"] if s["key"] == "broken")
    assert broken["state"] == "failing" and "not found" in broken["reason"], broken


MEMORY_JS = str(NPM / "server-memory" / "dist" / "index.js")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def plain_config(tmp: Path, servers: dict, **meta) -> Path:
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps({"metaServer": {"catalogDir": "catalogs", **meta}, "mcpServers": servers}, indent=2))
    return cfg


async def cli(cfg: Path, *args: str, check: bool = True):
    """`meta-server <args>` from another process, without blocking the client's event loop."""
    return await asyncio.to_thread(run_cli, cfg, *args, check=check)


async def eventually(check, what: str, limit: float = 60.0):
    deadline = time.monotonic() + limit
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def hit_names(c, query: str) -> list[str]:
    r = await c.call_tool("search_tools", {"query": query, "limit": 10})
    return [h["name"] for h in r.structured_content["hits"]]


@asynccontextmanager
async def stdio_serve(cfg: Path, log: Path, **options):
    env = {**os.environ, "META_SERVER_LOG": "meta_server=info"}
    params = StdioServerParameters(command="sh", args=["-c", f'exec "{BIN}" --config "{cfg}" serve 2>"{log}"'], env=env)
    async with Client(params, mode="legacy", **options) as c:
        yield c


def upstream_pids(needle: str, parent: int) -> list[int]:
    return [pid for pid, (ppid, cmd) in processes().items() if ppid == parent and needle in cmd]


@pytest.mark.anyio
async def test_a_running_stdio_serve_follows_add_remove_and_a_broken_edit(tmp_path, everything_http):
    cfg = plain_config(tmp_path, {"time": {"command": TIME[0], "args": TIME[1:]}})
    log = tmp_path / "serve.log"
    told = []

    async def on_message(message):
        method = getattr(message, "method", None)
        if method in ("notifications/prompts/list_changed", "notifications/resources/list_changed"):
            told.append(method)

    async with stdio_serve(cfg, log, message_handler=on_message) as c:
        before = (await c.list_tools()).model_dump_json()
        assert not any(p.name.startswith("everything__") for p in (await c.list_prompts()).prompts)
        serving = meta_server_pid(cfg)

        # An HTTP server added from another shell: found, then called.
        url = f"http://127.0.0.1:{everything_http}/mcp"
        await cli(cfg, "add", "everything", url)
        added = time.monotonic()
        await eventually(lambda: _has(c, "echo back the message", "everything__echo"), "the added server in search")
        print(f"\nadded HTTP server searchable {time.monotonic() - added:.2f}s after `add` returned")
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "live config"}})
        assert not r.is_error and "live config" in text_of(r), text_of(r)
        # Its prompts and resources are passed through, and the client was told the lists changed.
        await eventually(lambda: _told_both(told), "prompts and resources list_changed after the add")
        assert any(p.name.startswith("everything__") for p in (await c.list_prompts()).prompts)
        assert (await c.list_resources()).resources, "server-everything's resources"

        # A stdio server added without indexing: serve lists it in the background.
        await cli(cfg, "add", "--no-index", "memory", "-e", f"MEMORY_FILE_PATH={tmp_path / 'memory.jsonl'}",
                  "--", "node", MEMORY_JS)
        added = time.monotonic()
        await eventually(lambda: _has(c, "create entities in the knowledge graph", "memory__create_entities"),
                         "the server serve indexed itself")
        print(f"stdio server (not indexed by add) searchable {time.monotonic() - added:.2f}s after `add` returned")
        r = await c.call_tool("call_tool", {"name": "memory__read_graph", "arguments": {}})
        assert not r.is_error, text_of(r)
        memory = wait_until(lambda: upstream_pids(MEMORY_JS, serving), "server-memory to run under meta-server")

        # Removed: gone from search, details and calls, and its process exits.
        await cli(cfg, "remove", "memory")
        await eventually(lambda: _lacks(c, "create entities in the knowledge graph", "memory__"), "memory to leave search")
        wait_until(lambda: not any(pid in processes() for pid in memory), "server-memory to exit")
        r = await c.call_tool("call_tool", {"name": "memory__read_graph", "arguments": {}})
        assert r.is_error, text_of(r)
        r = await c.call_tool("get_tool_details", {"names": ["memory__read_graph"]})
        assert "memory__read_graph" not in json.dumps(r.structured_content.get("tools", [])), r.structured_content

        # A broken edit is not applied: the log names the key, the old config keeps serving.
        good = cfg.read_text()
        for broken, key in [(good.replace('"catalogDir": "catalogs"', '"catalogDir": "catalogs", "timeoutSecs": "soon"'),
                             "metaServer.timeoutSecs"),
                            (good.replace(url, "ftp://nowhere"), 'mcpServers."everything".url'),
                            (good[:-3], "line ")]:
            mark = len(log.read_text())
            cfg.write_text(broken)
            wait_until(lambda: "config not applied" in log.read_text()[mark:], "the broken edit to be refused")
            said = log.read_text()[mark:]
            assert key in said and "the running config stays" in said, said
            r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "still here"}})
            assert "still here" in text_of(r), text_of(r)
        cfg.write_text(good)
        # SIGHUP reads the file at once (and a signal that is not the end of serving).
        mark = len(log.read_text())
        os.kill(serving, signal.SIGHUP)
        wait_until(lambda: "SIGHUP: reading the config again" in log.read_text()[mark:], "SIGHUP to be heard")
        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error, text_of(r)

        # The removed HTTP server's prompts and resources go too, and the client is told again.
        told.clear()
        await cli(cfg, "remove", "everything")
        await eventually(lambda: _told_both(told), "prompts and resources list_changed after the remove")
        assert not any(p.name.startswith("everything__") for p in (await c.list_prompts()).prompts)
        assert not (await c.list_resources()).resources
        assert (await c.list_tools()).model_dump_json() == before, "tools/list is the same bytes throughout"


async def _told_both(told: list) -> bool:
    return {"notifications/prompts/list_changed", "notifications/resources/list_changed"} <= set(told)


async def _has(c, query: str, name: str) -> bool:
    return name in await hit_names(c, query)


async def _lacks(c, query: str, prefix: str) -> bool:
    return not any(n.startswith(prefix) for n in await hit_names(c, query))


@pytest.mark.anyio
async def test_an_always_load_server_that_comes_and_goes_changes_tools_list_and_says_so(tmp_path):
    cfg = plain_config(tmp_path, {"time": {"command": TIME[0], "args": TIME[1:]}})
    told = []

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            told.append(time.monotonic())

    async with stdio_serve(cfg, tmp_path / "serve.log", message_handler=on_message) as c:
        assert c.session.initialize_result.capabilities.tools.list_changed
        before = (await c.list_tools()).tools
        assert [t.name for t in before] == ["search_tools", "get_tool_details", "call_tool"]
        entry = json.loads(cfg.read_text())
        entry["mcpServers"]["time"]["alwaysLoad"] = True
        cfg.write_text(json.dumps(entry, indent=2))
        await eventually(lambda: _told(told, 1), "tools/list_changed after alwaysLoad was set")
        tools = (await c.list_tools()).tools
        assert [t.model_dump_json() for t in tools[:3]] == [t.model_dump_json() for t in before], "meta-tools unchanged"
        assert {t.name for t in tools[3:]} == {"time__get_current_time", "time__convert_time"}
        r = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not r.is_error, text_of(r)
        del entry["mcpServers"]["time"]["alwaysLoad"]
        cfg.write_text(json.dumps(entry, indent=2))
        await eventually(lambda: _told(told, 2), "tools/list_changed after alwaysLoad was taken away")
        assert [t.model_dump_json() for t in (await c.list_tools()).tools] == [t.model_dump_json() for t in before]


async def _told(told: list, count: int) -> bool:
    return len(told) >= count


@pytest.mark.anyio
async def test_two_http_replicas_on_one_store_follow_the_same_config(tmp_path, valkey, everything_http):
    cfg = plain_config(tmp_path, {"time": {"command": TIME[0], "args": TIME[1:]}})
    with replicas(tmp_path, cfg, 2, valkey.url) as (a, b):
        balancer = Balancer([a.port, b.port])
        async with client_through(balancer) as c:
            before = {(await c.list_tools()).model_dump_json() for _ in range(2)}
            assert len(before) == 1

            async def both_find(query: str, name: str) -> bool:
                return all([name in await hit_names(c, query) for _ in range(2)])

            await cli(cfg, "add", "--no-index", "everything", f"http://127.0.0.1:{everything_http}/mcp")
            added = time.monotonic()
            await eventually(lambda: both_find("echo back the message", "everything__echo"), "both replicas to find it")
            print(f"\nadded server searchable on both replicas {time.monotonic() - added:.2f}s after `add` returned")
            for _ in range(2):
                r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "on both"}})
                assert "on both" in text_of(r), text_of(r)
            taken = sum("catalog taken from the shared store" in r.log.read_text() for r in (a, b))
            assert taken >= 1, "one replica listed it, the other took its catalog from the store"

            await cli(cfg, "remove", "everything")

            async def both_lack() -> bool:
                return all([await _lacks(c, "echo back the message", "everything__") for _ in range(2)])
            await eventually(both_lack, "both replicas to drop it")
            after = {(await c.list_tools()).model_dump_json() for _ in range(2)}
            assert after == before, "tools/list is the same bytes on both replicas throughout"
