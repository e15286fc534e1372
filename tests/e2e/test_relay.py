"""Upstream requests for the client relayed end to end: server-everything's sampling,
elicitation and roots requests, and server-filesystem's roots, reach the official Python SDK
client (mode="legacy") whose call_tool caused them, and its answers come back in the result.
A client without the capability gets an error that says so. Roots reach a server only within
its configured `roots`, and only over stdio (one client); over HTTP a server gets its
configured roots."""
import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, types

import httpx2
from mcp.client.streamable_http import streamable_http_client

from conftest import BIN, NPM, meta_client, run_cli, text_of, write_config
from test_http import http_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """server-everything, and server-filesystem started with no directory: it takes the roots
    it is given or refuses every path. Both may be given roots within pytest's temporary
    directory, where each test's own directory is."""
    tmp = tmp_path_factory.mktemp("relay")
    base = str(tmp_path_factory.getbasetemp())
    cfg = write_config(tmp, {
        "everything": {"command": "node", "args": [str(NPM / "server-everything" / "dist" / "index.js"), "stdio"],
                       "roots": [base]},
        "filesystem": {"command": "node", "args": [str(NPM / "server-filesystem" / "dist" / "index.js")],
                       "roots": [base]},
    })
    run_cli(cfg, "index")
    return cfg


@asynccontextmanager
async def client_with(cfg: Path, **callbacks):
    params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"])
    async with Client(params, mode="legacy", **callbacks) as c:
        yield c


@asynccontextmanager
async def http_client_with(url: str, **callbacks):
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", **callbacks) as c:
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


async def test_a_client_without_the_capability_is_told_why(indexed, tmp_path_factory):
    async with meta_client(indexed, mode="legacy") as c:
        r = await call(c, "everything__trigger-sampling-request", {"prompt": "x"})
        assert r.is_error
        assert 'server "everything" asked the client for sampling, which this client does not offer' in text_of(r)
        r = await call(c, "everything__trigger-elicitation-request")
        assert r.is_error
        assert "which this client does not offer (it did not declare the elicitation capability)" in text_of(r)
        # A client that gives no roots leaves the server its configured ones.
        r = await call(c, "everything__get-roots-list")
        assert tmp_path_factory.getbasetemp().resolve().as_uri() in text_of(r), text_of(r)


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


async def test_over_http_a_request_goes_to_the_calling_client_or_is_refused(indexed):
    """Two sessions share one upstream connection. While B's call runs, A's sampling request
    cannot be told apart from B's and is refused; while A's call waits on A's answer, the one
    request asked anew is B's call's, and reaches B alone."""
    a_asked, a_release = asyncio.Event(), asyncio.Event()
    a_prompts, b_prompts = [], []
    b_running = asyncio.Event()

    async def a_sampling(context, params):
        a_prompts.append(params.messages[0].content.text)
        a_asked.set()
        await a_release.wait()
        return types.CreateMessageResult(role="assistant", model="a", content=types.TextContent(type="text", text="from A"))

    async def b_sampling(context, params):
        b_prompts.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", model="b", content=types.TextContent(type="text", text="from B"))

    async def b_progress(progress, total, message):
        b_running.set()

    with http_server(indexed) as (_, url):
        async with http_client_with(url, sampling_callback=a_sampling) as a, \
                http_client_with(url, sampling_callback=b_sampling) as b:
            # B's call is in flight and asks nothing: A's request could be either's, so refused.
            b_long = asyncio.create_task(b.call_tool("call_tool", {
                "name": "everything__trigger-long-running-operation",
                "arguments": {"duration": 10, "steps": 10}}, progress_callback=b_progress))
            await asyncio.wait_for(b_running.wait(), 60)
            r = await call(a, "everything__trigger-sampling-request", {"prompt": "for A"})
            assert r.is_error
            assert "while calls of several clients were in flight on it" in text_of(r), text_of(r)
            assert a_prompts == [] and b_prompts == [], "neither client is sent a request that may be the other's"
            assert not (await b_long).is_error
            # A's call waits on A's answer: the request asked anew is B's call's, and goes to B.
            a_call = asyncio.create_task(call(a, "everything__trigger-sampling-request", {"prompt": "for A"}))
            await asyncio.wait_for(a_asked.wait(), 60)
            r = await call(b, "everything__trigger-sampling-request", {"prompt": "for B"})
            assert not r.is_error and "from B" in text_of(r), text_of(r)
            assert [("for B" in t) for t in b_prompts] == [True], b_prompts
            assert [("for A" in t) for t in a_prompts] == [True], a_prompts
            a_release.set()
            r = await a_call
            assert not r.is_error and "from A" in text_of(r), text_of(r)


async def test_upstream_log_messages_reach_the_client_at_its_level(indexed, tmp_path):
    logged = asyncio.Event()
    messages = []

    async def log(params: types.LoggingMessageNotificationParams):
        messages.append(params)
        if "Roots updated" in str(params.data):
            logged.set()

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri())])

    async with client_with(indexed, list_roots_callback=roots, logging_callback=log) as c:
        await c.set_logging_level("info")
        # server-everything logs (at info) that it got the roots it asked this client for.
        r = await call(c, "everything__get-roots-list")
        assert not r.is_error, text_of(r)
        await asyncio.wait_for(logged.wait(), 30)
    said = [m for m in messages if "Roots updated" in str(m.data)]
    assert said[0].level == "info" and said[0].logger == "everything/everything-server"
    assert "1 root(s) received from client" in said[0].data


async def test_a_server_started_for_no_client_takes_the_roots_of_the_first_client_to_call(tmp_path):
    """An alwaysLoad filesystem is started with meta-server, before any client could give
    roots (its request for them is refused); the first client's call makes it ask again, and
    the answer is that client's roots."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("started early")
    cfg = write_config(tmp_path, {
        "filesystem": {"command": "node", "args": [str(NPM / "server-filesystem" / "dist" / "index.js")],
                       "alwaysLoad": True, "roots": [str(tmp_path)]},
    })
    asked = []

    async def roots(context):
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=root.as_uri())])

    async with client_with(cfg, list_roots_callback=roots) as c:
        assert "filesystem__read_text_file" in [t.name for t in (await c.list_tools()).tools]
        await until_allowed(c, root)
        r = await call(c, "filesystem__read_text_file", {"path": str(root / "a.txt")})
        assert not r.is_error and "started early" in text_of(r), text_of(r)
    assert asked, "the server asked this client for its roots"


def filesystem_with(tmp_path: Path, *dirs: Path, **entry) -> Path:
    """A config of server-filesystem alone, started with `dirs`."""
    args = [str(NPM / "server-filesystem" / "dist" / "index.js"), *map(str, dirs)]
    return write_config(tmp_path, {"filesystem": {"command": "node", "args": args, **entry}})


def allowed_of(result) -> list[str]:
    return [line.strip() for line in text_of(result).splitlines()[1:] if line.strip()]


async def until_allowed_is(c, expected: list[Path]):
    """Reads filesystem's directories until they are `expected`, which it applies on its own
    time after it was given them."""
    want = [str(p.resolve()) for p in expected]
    for _ in range(100):
        r = await call(c, "filesystem__list_allowed_directories")
        if allowed_of(r) == want:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"filesystem allows {allowed_of(r)}, not {want}")


async def test_a_server_without_roots_keeps_its_directories_whatever_the_client_says(tmp_path):
    """Issue 38 H2 over stdio: filesystem started with one directory and no `roots` key is
    told there are no roots, so a client answering file:/// leaves it its directory."""
    (tmp_path / "files").mkdir()
    (tmp_path / "secret.txt").write_text("the secret")

    async def everything(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///")])

    async with client_with(filesystem_with(tmp_path, tmp_path / "files"), list_roots_callback=everything) as c:
        await until_allowed_is(c, [tmp_path / "files"])
        await c.session.send_roots_list_changed()
        for _ in range(20):
            r = await call(c, "filesystem__list_allowed_directories")
            assert allowed_of(r) == [str((tmp_path / "files").resolve())], text_of(r)
            await asyncio.sleep(0.05)
        r = await call(c, "filesystem__read_text_file", {"path": str(tmp_path / "secret.txt")})
        assert r.is_error and "the secret" not in text_of(r), text_of(r)


async def test_a_clients_roots_reach_a_server_only_within_its_configured_roots(tmp_path):
    """A server with `roots` is given the client's roots within them: a root inside as it is,
    the whole disk as the configured directory, one outside (or a link out) not at all. When
    the client's roots change, the server is given the new ones, or its configured ones."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    (allowed / "out").symlink_to(outside)
    current = ["file:///"]

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in current])

    cfg = filesystem_with(tmp_path, roots=[str(allowed)])
    async with client_with(cfg, list_roots_callback=roots) as c:
        await until_allowed_is(c, [allowed])
        for given, expected in (([(allowed / "sub").as_uri()], [allowed / "sub"]),
                                ([outside.as_uri(), (allowed / "out").as_uri()], [allowed]),
                                ([(allowed / "sub").as_uri(), outside.as_uri()], [allowed / "sub"]),
                                ([], [allowed])):
            current[:] = given
            await c.session.send_roots_list_changed()
            await until_allowed_is(c, expected)
        r = await call(c, "filesystem__read_text_file", {"path": str(outside / "secret.txt")})
        assert r.is_error and "not yours" not in text_of(r), text_of(r)


async def test_over_http_a_server_is_given_its_configured_roots_never_a_clients(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    asked = []

    async def roots(context):
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri())])

    with http_server(filesystem_with(tmp_path, roots=[str(allowed)])) as (_, url):
        async with http_client_with(url, list_roots_callback=roots) as c:
            await until_allowed_is(c, [allowed])
            await c.session.send_roots_list_changed()
            for _ in range(20):
                r = await call(c, "filesystem__list_allowed_directories")
                assert allowed_of(r) == [str(allowed.resolve())], text_of(r)
                await asyncio.sleep(0.05)
    assert asked == []
