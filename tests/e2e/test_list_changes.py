"""Clients are told when the upstream prompts or resources they list change: server-everything's
gzip-file-as-resource registers a session resource and sends resources/list_changed;
meta-server re-lists it, and a 2025-11-25 session gets notifications/resources/list_changed
while a 2026-07-28 client gets it on its subscriptions/listen stream. Both then list the new
resource. The official Python SDK, over stdio and `serve --http`."""
import asyncio
import os
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourcesListChanged

from conftest import BIN, NPM, run_cli, text_of, write_config
from test_http import http_server

pytestmark = pytest.mark.anyio

TRANSPORTS = ["stdio", "http"]
GZIP = {"name": "note.txt.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=", "outputType": "resourceLink"}
URI = "demo://resource/session/note.txt.gz"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def indexed(tmp_path):
    cfg = write_config(tmp_path, {
        "everything": {"command": "node", "args": [str(NPM / "server-everything" / "dist" / "index.js"), "stdio"]},
    })
    run_cli(cfg, "index")
    return cfg


@asynccontextmanager
async def client(cfg: Path, transport: str, mode: str, **options):
    if transport == "stdio":
        params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"], env=dict(os.environ))
        async with Client(params, mode=mode, **options) as c:
            yield c
        return
    with http_server(cfg) as (_, url):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode, **options) as c:
                yield c


async def uris(c) -> list[str]:
    return [r.uri for r in (await c.list_resources()).resources]


async def make_resource(c):
    r = await c.call_tool("call_tool", {"name": "everything__gzip-file-as-resource", "arguments": GZIP})
    assert not r.is_error, text_of(r)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2025_11_25_session_is_told_the_resources_changed(indexed, transport):
    told = asyncio.Event()
    seen = []

    async def on_message(message):
        method = getattr(message, "method", None)
        seen.append(method)
        if method == "notifications/resources/list_changed":
            told.set()

    async with client(indexed, transport, "legacy", message_handler=on_message) as c:
        init = c.session.initialize_result
        assert init.capabilities.resources.list_changed and init.capabilities.prompts.list_changed
        # Declared: tools/list changes when a config change adds or removes an alwaysLoad server.
        assert init.capabilities.tools.list_changed
        assert URI not in await uris(c)
        await make_resource(c)
        await asyncio.wait_for(told.wait(), 60)
        assert URI in await uris(c)
    assert "notifications/tools/list_changed" not in seen


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_07_28_client_hears_it_on_its_listen_stream(indexed, transport):
    async with client(indexed, transport, "2026-07-28") as c:
        async with c.listen(tools_list_changed=True, resources_list_changed=True) as sub:
            assert sub.honored.resources_list_changed and sub.honored.tools_list_changed, sub.honored
            assert URI not in await uris(c)
            await make_resource(c)
            event = await asyncio.wait_for(sub.__anext__(), 60)
            assert isinstance(event, ResourcesListChanged), event
        assert URI in await uris(c)


def a_static_resource(cfg: Path) -> str:
    import json
    catalog = json.loads((cfg.parent / "catalogs" / "everything.json").read_text())
    return next(r["uri"] for r in catalog["resources"] if "static" in r["uri"])


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2025_11_25_session_hears_updates_of_a_resource_it_subscribed_to(indexed, transport):
    """server-everything's toggle-subscriber-updates sends resources/updated for the URIs its
    client subscribed to; meta-server subscribed for this session and passes them on."""
    uri = a_static_resource(indexed)
    updated = asyncio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/resources/updated" and message.params.uri == uri:
            updated.set()

    async with client(indexed, transport, "legacy", message_handler=on_message) as c:
        await c.subscribe_resource(uri)
        r = await c.call_tool("call_tool", {"name": "everything__toggle-subscriber-updates", "arguments": {}})
        assert not r.is_error, text_of(r)
        await asyncio.wait_for(updated.wait(), 60)
        await c.unsubscribe_resource(uri)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_07_28_client_hears_updates_on_its_listen_stream(indexed, transport):
    from mcp.shared.subscriptions import ResourceUpdated
    uri = a_static_resource(indexed)
    async with client(indexed, transport, "2026-07-28") as c:
        async with c.listen(resource_subscriptions=[uri, "nowhere://listed"]) as sub:
            assert sub.honored.resource_subscriptions == [uri], sub.honored
            r = await c.call_tool("call_tool", {"name": "everything__toggle-subscriber-updates", "arguments": {}})
            assert not r.is_error, text_of(r)
            event = await asyncio.wait_for(sub.__anext__(), 60)
            assert isinstance(event, ResourceUpdated) and event.uri == uri, event


@pytest.fixture
def modern(tmp_path):
    """The 2026-07-28-only fixture, whose prompt list changes on demand (on its listen stream)."""
    python = str(Path(__file__).parents[2] / ".peers" / "py" / "bin" / "python")
    fixture = str(Path(__file__).with_name("fixtures") / "modern_server.py")
    cfg = write_config(tmp_path, {"modern": {"command": python, "args": [fixture], "env": {"MODERN_CHANGES": "1"}}})
    run_cli(cfg, "index")
    return cfg


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_2026_07_28_upstream_s_prompt_list_change_reaches_clients_of_both_revisions(modern, mode):
    """A 2026-07-28 server says its prompts changed only on a subscriptions/listen stream, which
    meta-server holds open for it; both kinds of clients are told and list the new prompt. (The
    first prompt added may also be found by the re-listing of the server's stale catalog on
    connect; the second only by what the server said.)"""
    told = asyncio.Queue()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/prompts/list_changed":
            told.put_nowait(message)

    async def add(c, name):
        r = await c.call_tool("call_tool", {"name": "modern__add_prompt", "arguments": {"name": name}})
        assert text_of(r) == f"added {name}", text_of(r)

    async def prompts(c):
        return [p.name for p in (await c.list_prompts()).prompts]

    options = {"message_handler": on_message} if mode == "legacy" else {}
    async with client(modern, "stdio", mode, **options) as c:
        assert await prompts(c) == []
        await add(c, "haiku")
        for _ in range(600):
            if await prompts(c) == ["modern__haiku"]:
                break
            await asyncio.sleep(0.1)
        while not told.empty():
            told.get_nowait()
        if mode == "legacy":
            await add(c, "limerick")
            await asyncio.wait_for(told.get(), 60)
        else:
            from mcp.shared.subscriptions import PromptsListChanged
            async with c.listen(prompts_list_changed=True) as sub:
                await add(c, "limerick")
                event = await asyncio.wait_for(sub.__anext__(), 60)
                assert isinstance(event, PromptsListChanged), event
        assert await prompts(c) == ["modern__haiku", "modern__limerick"]
