"""Catalogs stay fresh while serving, and the meta surface never changes: list_changed is
re-listed (debounced), stale fingerprints are re-listed on connect, and every upstream process
is stopped when meta-server exits."""
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (BIN, PEERS, children, meta_client, meta_server_pid, processes, run_cli, server_entries,
                      text_of, wait_until, write_config)

pytestmark = pytest.mark.anyio
FIXTURE = Path(__file__).with_name("fixtures") / "dynamic_server.py"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def catalog(tmp: Path, server: str) -> dict:
    return json.loads((tmp / "catalogs" / f"{server}.json").read_text())


async def eventually(check, what: str, limit: float = 30.0):
    deadline = time.monotonic() + limit
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def test_list_changed_updates_search_and_catalog_but_not_the_meta_surface(tmp_path):
    python = str(PEERS / "py" / "bin" / "python")
    time_server = server_entries(tmp_path)["time"]
    cfg = write_config(tmp_path, {"dynamic": {"command": python, "args": [str(FIXTURE)]}, "time": time_server})
    run_cli(cfg, "index")
    assert [t["name"] for t in catalog(tmp_path, "dynamic")["tools"]] == ["add_tool", "remove_tool"]

    async def others_kept(c):
        # Only the changed server is re-indexed (adding updates the index in place, removing
        # here rebuilds it): the other server's tools stay found either way.
        hits = (await c.call_tool("search_tools", {"query": "current time in a timezone"})).structured_content["hits"]
        assert hits[0]["name"] == "time__get_current_time", hits

    async with meta_client(cfg) as c:
        before = (await c.list_tools()).model_dump_json()
        r = await c.call_tool("call_tool", {"name": "dynamic__add_tool", "arguments": {"name": "zebra_feeder"}})
        assert text_of(r) == "added zebra_feeder"

        async def found():
            hits = (await c.call_tool("search_tools", {"query": "zebra feeder"})).structured_content["hits"]
            return hits and hits[0]["name"] == "dynamic__zebra_feeder"
        await eventually(found, "the new tool to become searchable")
        assert "zebra_feeder" in [t["name"] for t in catalog(tmp_path, "dynamic")["tools"]]
        await others_kept(c)
        r = await c.call_tool("call_tool", {"name": "dynamic__zebra_feeder", "arguments": {"x": 3}})
        assert text_of(r) == "zebra_feeder(3)"

        await c.call_tool("call_tool", {"name": "dynamic__remove_tool", "arguments": {"name": "zebra_feeder"}})

        async def gone():
            hits = (await c.call_tool("search_tools", {"query": "zebra feeder"})).structured_content["hits"]
            return all(h["name"] != "dynamic__zebra_feeder" for h in hits)
        await eventually(gone, "the removed tool to leave search")
        await others_kept(c)
        assert (await c.list_tools()).model_dump_json() == before, "tools/list is byte-stable"


async def test_everything_list_changed_burst_is_absorbed(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"]})
    run_cli(cfg, "index")
    first = catalog(tmp_path, "everything")
    async with meta_client(cfg) as c:
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})
        assert text_of(r) == "Echo: hi"

        async def relisted():
            return catalog(tmp_path, "everything")["fetchedAt"] != first["fetchedAt"] or None

        # server-everything sends list_changed right after initialize; after the quiet period
        # the catalog is re-listed once and still matches the final list.
        try:
            await eventually(relisted, "a re-list after the burst", limit=5)
        except AssertionError:
            pass  # fetchedAt has one-second resolution; an unchanged list is also fine
        after = catalog(tmp_path, "everything")
        assert after["toolsHash"] == first["toolsHash"]
        assert len(after["tools"]) == 17, "13, and 4 for a client with sampling, elicitation and roots"
        hits = (await c.call_tool("search_tools", {"query": "add two numbers"})).structured_content["hits"]
        assert hits[0]["name"] == "everything__get-sum"


async def test_stale_fingerprint_is_relisted_on_connect(tmp_path):
    # memory (2025-11-25) gives its list no ttlMs: it is fresh until its config changes. (time,
    # spoken to at 2026-07-28, says ttlMs 0: stale at once, re-listed at each connection.)
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"time": entries["time"], "memory": entries["memory"]})
    run_cli(cfg, "index")
    assert catalog(tmp_path, "time")["ttlMs"] == 0
    path = tmp_path / "catalogs" / "memory.json"
    good = catalog(tmp_path, "memory")["configFingerprint"]
    edited = catalog(tmp_path, "memory")
    edited["configFingerprint"] = "0" * 64
    path.write_text(json.dumps(edited))

    out = run_cli(cfg, "index", "--stale", "--json")
    assert sorted(o["server"] for o in json.loads(out.stdout)) == ["memory", "time"], "memory.json is not re-used"
    assert catalog(tmp_path, "memory")["configFingerprint"] == good
    out = run_cli(cfg, "index", "--stale", "--json")
    assert [o["server"] for o in json.loads(out.stdout)] == ["time"], "only the ttlMs 0 list is re-listed"

    path.write_text(json.dumps(edited))
    async with meta_client(cfg) as c:
        # Still searchable while stale...
        hits = (await c.call_tool("search_tools", {"query": "read the entire knowledge graph"})).structured_content["hits"]
        assert hits[0]["name"] == "memory__read_graph"
        # ...and re-listed once its server connects.
        await c.call_tool("call_tool", {"name": "memory__read_graph", "arguments": {}})

        async def fresh():
            return catalog(tmp_path, "memory")["configFingerprint"] == good
        await eventually(fresh, "the stale catalog to be re-listed")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "stdin"])
def test_exit_stops_every_upstream_and_its_children(tmp_path, how):
    marker = str(random.randint(10_000_000, 99_999_999))
    entries = server_entries(tmp_path)
    everything = entries["everything"]
    # A server that starts a child of its own: the whole process group must go.
    wrapped = {"command": "sh", "args": ["-c", f"sleep {marker} & exec node {' '.join(everything['args'])}"]}
    cfg = write_config(tmp_path, {"wrapped": wrapped, "time": entries["time"]})
    run_cli(cfg, "index")
    proc = subprocess.Popen([str(BIN), "--config", str(cfg), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)

    def send(msg):
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for i, (name, args) in enumerate([("wrapped__echo", {"message": "x"}), ("time__get_current_time", {"timezone": "UTC"})]):
        reply = send({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                      "params": {"name": "call_tool", "arguments": {"name": name, "arguments": args}}})
        assert not reply["result"].get("isError"), reply
    sleepers = lambda: [p for p, (_, cmd) in processes().items() if cmd == f"sleep {marker}"]
    assert len(sleepers()) == 1 and len(children(proc.pid)) == 2
    upstreams = children(proc.pid)

    if how == "stdin":
        proc.stdin.close()
    else:
        proc.send_signal(getattr(signal, how))
    assert proc.wait(timeout=30) == 0
    alive = lambda: [p for p in upstreams + sleepers() if p in processes()]
    wait_until(lambda: alive() == [], "upstreams and their children to exit")


async def test_always_load_servers_are_connected_and_listed_directly(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"time": {**entries["time"], "alwaysLoad": True}, "memory": entries["memory"]})
    async with meta_client(cfg) as c:
        me = meta_server_pid(cfg)
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["search_tools", "get_tool_details", "call_tool", "time__convert_time", "time__get_current_time"]
        commands = [processes()[p][1] for p in children(me)]
        assert any("mcp-server-time" in cmd for cmd in commands), f"alwaysLoad server connected at start-up: {commands}"
        r = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not r.is_error and json.loads(text_of(r))["timezone"] == "UTC"
        r = await c.call_tool("time__get_current_time", {"timezone": 5})
        assert r.is_error and "timezone" in text_of(r), "direct calls are validated too"
        again = [t.name for t in (await c.list_tools()).tools]
        assert again == names
        # The other server was indexed in the background without a catalog and without changing tools/list.
        await eventually(lambda: _has_catalog(tmp_path, "memory"), "memory to be indexed")
        assert [t.name for t in (await c.list_tools()).tools] == names


async def test_always_load_names_over_64_characters_are_shortened_and_called(tmp_path):
    long = "time-server-kept-by-the-platform-engineering-team-tokyo"
    cfg = write_config(tmp_path, {long: {**server_entries(tmp_path)["time"], "alwaysLoad": True}})
    async with meta_client(cfg) as c:
        listed = (await c.list_tools()).tools[3:]
        qualified = [t.meta["meta-server/qualifiedName"] for t in listed]
        assert qualified == [f"{long}__convert_time", f"{long}__get_current_time"]
        assert [len(t.name) for t in listed] == [64, 64] and listed[0].name != listed[1].name
        r = await c.call_tool(listed[1].name, {"timezone": "UTC"})
        assert not r.is_error and json.loads(text_of(r))["timezone"] == "UTC"
        r = await c.call_tool("call_tool", {"name": qualified[1], "arguments": {"timezone": "UTC"}})
        assert not r.is_error, "the qualified name works through call_tool"


async def _has_catalog(tmp: Path, server: str) -> bool:
    return (tmp / "catalogs" / f"{server}.json").exists()


async def test_corrupt_catalog_is_skipped_and_reindexed_newer_format_is_kept(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"time": entries["time"], "memory": entries["memory"]})
    run_cli(cfg, "index")
    (tmp_path / "catalogs" / "time.json").write_text('{"format": 1, "server": "time", "tools": [{"na')
    newer = {"format": 9, "server": "memory", "tools": [], "fromTheFuture": True}
    (tmp_path / "catalogs" / "memory.json").write_text(json.dumps(newer))
    search = run_cli(cfg, "search", "current time")
    assert "is not a valid catalog" in search.stderr and "format 9" in search.stderr
    async with meta_client(cfg) as c:
        async def reindexed():
            hits = (await c.call_tool("search_tools", {"query": "current time"})).structured_content["hits"]
            return hits and hits[0]["name"] == "time__get_current_time"
        await eventually(reindexed, "the corrupt catalog to be indexed again")
    assert catalog(tmp_path, "time")["tools"][0]["name"] == "get_current_time"
    assert json.loads((tmp_path / "catalogs" / "memory.json").read_text()) == newer, "a newer catalog is never overwritten"
