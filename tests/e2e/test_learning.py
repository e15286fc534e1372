"""Search that learns from use, through a real `meta-server serve` driven by the official Python
SDK over the reference servers: a search followed by a successful call is kept and moves later
searches (after a restart too), with learning off nothing moves; a script's search and call
teach like the client's, a details read half as much; a changed tool, or a server that leaves
the config (at a restart or while serving), loses what it learned; a token limited to one server teaches nothing for the
others; replicas sharing a Valkey store learn from each other and forget together. BM25 only
(META_SERVER_EMBEDDINGS=off) so the rankings do not depend on model assets."""
import asyncio
import json
from pathlib import Path

import pytest

from conftest import PEERS, meta_client, run_cli, server_entries, wait_until, write_config
from test_gateway import AUTH, Balancer, client_through, replicas, valkey  # noqa: F401 (fixture)
from test_http import http_server, sdk_client

pytestmark = pytest.mark.anyio

ON = {"META_SERVER_LEARNING": "on", "META_SERVER_EMBEDDINGS": "off"}
ASKED = "parrot my words back to me"
LATER = "parrot my words"
FIXTURE = Path(__file__).with_name("fixtures") / "mutable_server.py"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def learning_on(monkeypatch):
    for key, value in ON.items():
        monkeypatch.setenv(key, value)


def evidence(catalogs) -> dict:
    path = catalogs / ".learned" / "evidence.json"
    return json.loads(path.read_text())["tools"] if path.exists() else {}


async def hits(client, query: str) -> list[str]:
    r = await client.call_tool("search_tools", {"query": query, "limit": 10})
    return [h["name"] for h in r.structured_content["hits"]]


async def test_a_search_then_a_call_moves_later_searches_and_a_restart_keeps_it(tmp_path, monkeypatch):
    cfg = write_config(tmp_path, server_entries(tmp_path))
    run_cli(cfg, "index")
    async with meta_client(cfg) as c:
        before = await hits(c, LATER)
        assert "everything__echo" in await hits(c, ASKED)
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})
        assert not r.is_error
    assert before[:1] != ["everything__echo"], before
    kept = evidence(tmp_path / "catalogs")
    assert [q["text"] for q in kept["everything__echo"]["queries"]] == [ASKED]
    async with meta_client(cfg) as c:
        assert (await hits(c, LATER))[0] == "everything__echo"
    listed = json.loads(run_cli(cfg, "learned", "list", "--json").stdout)
    assert listed[0]["tool"] == "everything__echo" and listed[0]["queries"][0]["query"] == ASKED

    # Learning off in the config: the same rankings as before anything was learned.
    monkeypatch.delenv("META_SERVER_LEARNING")
    off = write_config(tmp_path, server_entries(tmp_path), learning=False)
    async with meta_client(off) as c:
        assert await hits(c, LATER) == before
    run_cli(cfg, "learned", "forget")
    assert evidence(tmp_path / "catalogs") == {}


async def test_a_changed_tool_loses_what_it_learned(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "gadget", "description": "Operates the gadget"}]))
    mutable = {"command": str(PEERS / "py" / "bin" / "python"), "args": [str(FIXTURE)],
               "env": {"MUTABLE_TOOLS": str(tools)}}
    cfg = write_config(tmp_path, {"mutable": mutable}, trust="off")
    run_cli(cfg, "index")
    catalogs = tmp_path / "catalogs"
    async with meta_client(cfg) as c:
        assert "mutable__gadget" in await hits(c, "operate the xyzzy gadget")
        r = await c.call_tool("call_tool", {"name": "mutable__gadget", "arguments": {"text": "go"}})
        assert not r.is_error
        wait_until(lambda: "mutable__gadget" in evidence(catalogs), "the call to be kept")
        tools.write_text(json.dumps([{"name": "gadget", "description": "Operates the gadget, carefully"}]))
        r = await c.call_tool("call_tool", {"name": "mutable__reload", "arguments": {}})
        assert not r.is_error
        wait_until(lambda: "mutable__gadget" not in evidence(catalogs), "the changed tool to lose it")
        assert "mutable__gadget" not in await hits(c, "xyzzy")


async def test_a_token_limited_to_one_server_teaches_nothing_for_the_others(tmp_path, monkeypatch):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"], "time": entries["time"]},
                       http={"tokens": [{"name": "time-only", "token": "${TIME_TOKEN}", "servers": ["time"]}]})
    run_cli(cfg, "index")
    monkeypatch.setenv("TIME_TOKEN", "time-only-token-5d1e")
    with http_server(cfg, token="all-token-9f2a") as (_, url):
        async with sdk_client(url, "time-only-token-5d1e", []) as c:
            assert not any(h.startswith("everything__") for h in await hits(c, "echo back my message"))
            r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "x"}})
            assert r.is_error
            assert "time__get_current_time" in await hits(c, "current time in a timezone")
            r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
            assert not r.is_error
        wait_until(lambda: evidence(tmp_path / "catalogs"), "the call to be kept")
    assert list(evidence(tmp_path / "catalogs")) == ["time__get_current_time"]


async def test_replicas_learn_from_each_other_and_forget_together(tmp_path, valkey):  # noqa: F811
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"], "time": entries["time"]})
    run_cli(cfg, "index")
    with replicas(tmp_path, cfg, 2, valkey.url) as (a, b):
        async def indexed(client):
            # Each replica lists the servers (or takes their catalogs from the store) at start.
            for _ in range(120):
                if "everything__echo" in await hits(client, ASKED):
                    return
                await asyncio.sleep(0.5)
            raise AssertionError("the replica never indexed everything")
        async with client_through(Balancer([b.port])) as on_b:
            await indexed(on_b)
            before = await hits(on_b, LATER)
            assert before[:1] != ["everything__echo"], before
        async with client_through(Balancer([a.port])) as on_a:
            await indexed(on_a)
            r = await on_a.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})
            assert not r.is_error
        wait_until(lambda: valkey.command("HKEYS", "meta-server:l:e") == ["everything__echo"], "A to share it")
        async with client_through(Balancer([b.port])) as on_b:
            async def first_on_b():
                return (await hits(on_b, LATER))[:1] == ["everything__echo"]
            for _ in range(60):
                if await first_on_b():
                    break
                await asyncio.sleep(0.5)
            assert await first_on_b(), "B follows what A learned"
            env = {"META_SERVER_STORE_URL": valkey.url}
            out = run_cli(cfg, "learned", "list", "--json", env=env)
            assert json.loads(out.stdout)[0]["tool"] == "everything__echo"
            run_cli(cfg, "learned", "forget", "everything", env=env)
            assert valkey.command("HKEYS", "meta-server:l:e") == []
            for _ in range(60):
                if not await first_on_b():
                    break
                await asyncio.sleep(0.5)
            assert await hits(on_b, LATER) == before, "B forgets with the store"


async def test_a_script_s_search_and_call_teach_and_a_details_read_teaches_half(tmp_path):
    cfg = write_config(tmp_path, server_entries(tmp_path))
    run_cli(cfg, "index")
    code = (f'const found = await tools.search("{ASKED}");'
            ' if (!found.hits.some((h) => h.name === "everything__echo")) throw new Error("not shown");'
            ' return await tools.call("everything__echo", {message: "hi"});')
    async with meta_client(cfg) as c:
        r = await c.call_tool("call_tool", {"name": "meta__run_script", "arguments": {"code": code}})
        assert not r.is_error, r.content
        assert "time__get_current_time" in await hits(c, "current time in a timezone")
        r = await c.call_tool("get_tool_details", {"names": ["time__get_current_time"]})
        assert not r.is_error
    kept = evidence(tmp_path / "catalogs")
    weight = lambda tool: [[b["w"] for b in q["by"]] for q in kept[tool]["queries"]]  # noqa: E731
    assert weight("everything__echo") == [[1.0]], kept
    assert weight("time__get_current_time") == [[0.5]], kept


async def test_a_server_that_leaves_the_config_loses_what_it_learned(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"], "time": entries["time"]})
    run_cli(cfg, "index")
    catalogs = tmp_path / "catalogs"
    async with meta_client(cfg) as c:
        assert "everything__echo" in await hits(c, ASKED)
        assert not (await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})).is_error
        assert "time__get_current_time" in await hits(c, "current time in a timezone")
        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error
    assert sorted(evidence(catalogs)) == ["everything__echo", "time__get_current_time"]
    without = write_config(tmp_path, {"time": entries["time"]})
    async with meta_client(without) as c:
        await hits(c, "current time")
        wait_until(lambda: list(evidence(catalogs)) == ["time__get_current_time"], "everything's evidence to go")


async def test_a_server_removed_while_serving_loses_what_it_learned(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"], "time": entries["time"]})
    run_cli(cfg, "index")
    catalogs = tmp_path / "catalogs"
    async with meta_client(cfg) as c:
        assert "everything__echo" in await hits(c, ASKED)
        assert not (await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})).is_error
        wait_until(lambda: "everything__echo" in evidence(catalogs), "the call to be kept")
        run_cli(cfg, "remove", "everything")
        wait_until(lambda: "everything__echo" not in evidence(catalogs), "the removed server's evidence to go")
