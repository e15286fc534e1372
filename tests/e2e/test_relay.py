"""Upstream requests for the client relayed end to end: server-everything's sampling,
elicitation and roots requests, and server-filesystem's roots, reach the official Python SDK
client (mode="legacy") whose call_tool caused them, and its answers come back in the result.
A client without the capability gets an error that says so."""
import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, types

from conftest import BIN, NPM, meta_client, run_cli, text_of, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """server-everything, and server-filesystem started with no directory: it takes the
    client's roots or refuses every path."""
    tmp = tmp_path_factory.mktemp("relay")
    cfg = write_config(tmp, {
        "everything": {"command": "node", "args": [str(NPM / "server-everything" / "dist" / "index.js"), "stdio"]},
        "filesystem": {"command": "node", "args": [str(NPM / "server-filesystem" / "dist" / "index.js")]},
    })
    run_cli(cfg, "index")
    return cfg


@asynccontextmanager
async def client_with(cfg: Path, **callbacks):
    params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"])
    async with Client(params, mode="legacy", **callbacks) as c:
        yield c


async def call(c, name: str, arguments: dict | None = None):
    return await c.call_tool("call_tool", {"name": name, "arguments": arguments or {}})


def test_the_tools_that_need_client_capabilities_are_indexed(indexed):
    catalog = json.loads((indexed.parent / "catalogs" / "everything.json").read_text())
    names = {t["name"] for t in catalog["tools"]}
    assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= names


async def test_sampling_reaches_the_calling_client(indexed):
    asked = []

    async def sampling(context, params: types.CreateMessageRequestParams):
        asked.append(params)
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="forty-two"))

    async with client_with(indexed, sampling_callback=sampling) as c:
        r = await call(c, "everything__trigger-sampling-request", {"prompt": "the answer", "maxTokens": 7})
        assert not r.is_error, text_of(r)
        assert "forty-two" in text_of(r) and "test-model" in text_of(r)
    assert len(asked) == 1
    assert asked[0].max_tokens == 7 and "the answer" in asked[0].messages[0].content.text


async def test_elicitation_reaches_the_calling_client(indexed):
    async def elicit(context, params):
        assert "name" in params.requested_schema["properties"]
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async with client_with(indexed, elicitation_callback=elicit) as c:
        r = await call(c, "everything__trigger-elicitation-request")
        assert not r.is_error, text_of(r)
        assert "User provided the requested information" in text_of(r)
        assert "Ada Lovelace" in text_of(r)


async def test_roots_of_the_calling_client(indexed, tmp_path):
    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri(), name="work")])

    async with client_with(indexed, list_roots_callback=roots) as c:
        r = await call(c, "everything__get-roots-list")
        assert not r.is_error, text_of(r)
        assert tmp_path.as_uri() in text_of(r) and "work" in text_of(r)


async def test_a_client_without_the_capability_is_told_why(indexed):
    async with meta_client(indexed, mode="legacy") as c:
        r = await call(c, "everything__trigger-sampling-request", {"prompt": "x"})
        assert r.is_error
        assert 'server "everything" asked the client for sampling, which this client does not offer' in text_of(r)
        r = await call(c, "everything__trigger-elicitation-request")
        assert r.is_error
        assert "which this client does not offer (it did not declare the elicitation capability)" in text_of(r)


async def until_allowed(c, directory: Path):
    """The first call starts filesystem, which asks for roots at once; meta-server answers
    with the client's before it sends the call, but the server applies them on its own time
    (a few file-system calls), so its directories are read until they show the root."""
    for _ in range(100):
        r = await call(c, "filesystem__list_allowed_directories")
        assert not r.is_error, text_of(r)
        if str(directory) in text_of(r):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"filesystem never allowed {directory}: {text_of(r)}")


async def test_filesystem_without_directories_serves_the_clients_roots(indexed, tmp_path):
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "note.txt").write_text("within the root")
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=inside.as_uri())])

    async with client_with(indexed, list_roots_callback=roots) as c:
        await until_allowed(c, inside)
        r = await call(c, "filesystem__read_text_file", {"path": str(inside / "note.txt")})
        assert not r.is_error, text_of(r)
        assert "within the root" in text_of(r)
        r = await call(c, "filesystem__read_text_file", {"path": str(outside)})
        assert r.is_error and "not yours" not in text_of(r)
        assert "outside allowed directories" in text_of(r) or "Access denied" in text_of(r), text_of(r)


async def test_a_script_nested_call_cannot_ask_the_client(indexed):
    asked = []

    async def sampling(context, params):
        asked.append(params)
        return types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="x"))

    code = """
    try { await tools.call("everything__trigger-sampling-request", {prompt: "p"}); return "no error"; }
    catch (e) { return e.message; }
    """
    async with client_with(indexed, sampling_callback=sampling) as c:
        r = await call(c, "meta__run_script", {"code": code})
        assert not r.is_error, text_of(r)
        message = r.structured_content["result"]
        assert "a meta__run_script script cannot answer; call the tool directly with call_tool" in message
        # The same tool called directly reaches the client.
        r = await call(c, "everything__trigger-sampling-request", {"prompt": "p"})
        assert not r.is_error, text_of(r)
    assert len(asked) == 1, "only the direct call asked the client"


async def test_changed_roots_reach_the_server_the_client_started(indexed, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    current = [first]
    asked = asyncio.Event()
    calls = []

    async def roots(context):
        calls.append(current[0])
        asked.set()
        return types.ListRootsResult(roots=[types.Root(uri=current[0].as_uri())])

    async with client_with(indexed, list_roots_callback=roots) as c:
        r = await call(c, "everything__get-roots-list")
        assert first.as_uri() in text_of(r), text_of(r)
        asked.clear()
        current[0] = second
        await c.session.send_roots_list_changed()
        # The server asks again, through meta-server, and is given this client's new roots.
        await asyncio.wait_for(asked.wait(), 30)
        assert calls[-1] == second
        for _ in range(100):
            r = await call(c, "everything__get-roots-list")
            if second.as_uri() in text_of(r):
                break
            await asyncio.sleep(0.05)
        assert second.as_uri() in text_of(r) and first.as_uri() not in text_of(r), text_of(r)
