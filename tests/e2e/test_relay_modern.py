"""Upstream requests for a 2026-07-28 client: the official Python SDK pinned to "2026-07-28"
takes no requests from a server, so server-everything's sampling, elicitation and roots
requests reach it as an InputRequiredResult of its own call_tool, which the SDK answers with
its callbacks and retries; the upstream call waits in meta-server meanwhile. Over stdio and
`serve --http`. A requestState meta-server does not hold is refused with the rule."""
import asyncio
import os
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import BIN, PEERS, run_cli, text_of, write_config
from test_http import http_server
from test_relay import indexed  # noqa: F401 (the same servers, indexed once per module)

pytestmark = pytest.mark.anyio

MODE = "2026-07-28"
TRANSPORTS = ["stdio", "http"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@asynccontextmanager
async def http_client(url: str, **callbacks):
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=MODE, **callbacks) as c:
            yield c


@asynccontextmanager
async def client(cfg: Path, transport: str, **callbacks):
    if transport == "stdio":
        params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"], env=dict(os.environ))
        async with Client(params, mode=MODE, **callbacks) as c:
            yield c
        return
    with http_server(cfg) as (_, url):
        async with http_client(url, **callbacks) as c:
            yield c


async def call(c, name: str, arguments: dict | None = None):
    return await c.call_tool("call_tool", {"name": name, "arguments": arguments or {}})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_sampling_reaches_the_calling_clients_callback(indexed, transport):
    asked = []

    async def sampling(context, params: types.CreateMessageRequestParams):
        asked.append(params)
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="forty-two"))

    async with client(indexed, transport, sampling_callback=sampling) as c:
        assert c.session.protocol_version == MODE
        r = await call(c, "everything__trigger-sampling-request", {"prompt": "the answer", "maxTokens": 7})
        assert not r.is_error, text_of(r)
        assert "forty-two" in text_of(r) and "test-model" in text_of(r)
    assert len(asked) == 1
    assert asked[0].max_tokens == 7 and "the answer" in asked[0].messages[0].content.text


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_elicitation_accepted_and_declined(indexed, transport):
    answers = [types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True}),
               types.ElicitResult(action="decline")]
    asked = []

    async def elicit(context, params):
        asked.append(params)
        assert "name" in params.requested_schema["properties"]
        return answers[len(asked) - 1]

    async with client(indexed, transport, elicitation_callback=elicit) as c:
        r = await call(c, "everything__trigger-elicitation-request")
        assert not r.is_error, text_of(r)
        assert "User provided the requested information" in text_of(r) and "Ada Lovelace" in text_of(r)
        r = await call(c, "everything__trigger-elicitation-request")
        assert not r.is_error, text_of(r)
        assert "declined" in text_of(r).lower() and "Ada Lovelace" not in text_of(r), text_of(r)
    assert len(asked) == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_roots_of_the_calling_client(indexed, transport, tmp_path, tmp_path_factory):
    """Over stdio the one client's roots (within the configured ones) reach the server; over
    HTTP, where clients share the connection, the server is given its configured roots."""
    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri(), name="work")])

    given = tmp_path.as_uri() if transport == "stdio" else tmp_path_factory.getbasetemp().resolve().as_uri()
    async with client(indexed, transport, list_roots_callback=roots) as c:
        for _ in range(100):
            r = await call(c, "everything__get-roots-list")
            assert not r.is_error, text_of(r)
            # server-everything asks for roots as it starts, in the first call's turn, and
            # takes the answer on its own time.
            if given in text_of(r):
                break
            await asyncio.sleep(0.05)
        assert given in text_of(r), text_of(r)
        if transport == "stdio":
            assert "work" in text_of(r), text_of(r)
        else:
            assert tmp_path.as_uri() not in text_of(r), text_of(r)


@pytest.mark.parametrize("transport", ["stdio"])
async def test_filesystem_without_directories_serves_the_clients_root(indexed, transport, tmp_path):
    """Over stdio only: over HTTP no client's roots are given (test_roots_of_the_calling_client)."""
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "note.txt").write_text("within the root")
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=inside.as_uri())])

    async with client(indexed, transport, list_roots_callback=roots) as c:
        for _ in range(100):
            r = await call(c, "filesystem__list_allowed_directories")
            assert not r.is_error, text_of(r)
            if str(inside) in text_of(r):
                break
            await asyncio.sleep(0.05)
        assert str(inside) in text_of(r), text_of(r)
        r = await call(c, "filesystem__read_text_file", {"path": str(inside / "note.txt")})
        assert not r.is_error and "within the root" in text_of(r), text_of(r)
        r = await call(c, "filesystem__read_text_file", {"path": str(outside)})
        assert r.is_error and "not yours" not in text_of(r)
        assert "outside allowed directories" in text_of(r) or "Access denied" in text_of(r), text_of(r)


async def test_a_client_without_the_capability_is_told_why(indexed):
    async with client(indexed, "stdio") as c:
        r = await call(c, "everything__trigger-sampling-request", {"prompt": "x"})
        assert r.is_error
        assert ('server "everything" asked the client for sampling, which this client does not offer '
                "(it did not declare the sampling capability)") in text_of(r), text_of(r)


async def test_a_script_nested_call_cannot_ask_the_client(indexed):
    async def sampling(context, params):
        raise AssertionError("a script's nested call never asks the client")

    code = """
    try { await tools.call("everything__trigger-sampling-request", {prompt: "p"}); return "no error"; }
    catch (e) { return e.message; }
    """
    async with client(indexed, "stdio", sampling_callback=sampling) as c:
        r = await call(c, "meta__run_script", {"code": code})
        assert not r.is_error, text_of(r)
        assert "a meta__run_script script cannot answer; call the tool directly with call_tool" in r.structured_content["result"]


async def test_a_request_state_is_good_only_in_the_process_that_made_it(indexed):
    """Driven by hand (allow_input_required): the state of a call waiting in one meta-server
    is refused by another, by the same process for another request, and works once where it
    was made."""
    arguments = {"name": "everything__trigger-sampling-request", "arguments": {"prompt": "who holds me"}}
    answer = types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="held"))

    async def sampling(context, params):
        raise AssertionError("this test answers by hand")

    with http_server(indexed) as (_, first), http_server(indexed) as (_, second):
        async with http_client(first, sampling_callback=sampling) as a, \
                http_client(second, sampling_callback=sampling) as b:
            asked = await a.session.call_tool("call_tool", arguments, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult), asked
            [(key, request)] = asked.input_requests.items()
            assert request.method == "sampling/createMessage" and "who holds me" in str(request.params)
            responses = {key: answer.model_dump(mode="json", by_alias=True, exclude_none=True)}
            with pytest.raises(MCPError) as refused:
                await b.session.call_tool("call_tool", arguments, input_responses=responses,
                                          request_state=asked.request_state, allow_input_required=True)
            assert "names no call waiting in this meta-server: it was made by another meta-server process" in str(refused.value)
            other = {"name": "everything__echo", "arguments": {"message": "x"}}
            with pytest.raises(MCPError) as refused:
                await a.session.call_tool("call_tool", other, input_responses=responses,
                                          request_state=asked.request_state, allow_input_required=True)
            assert "a retry must repeat the request that got it" in str(refused.value)
            r = await a.session.call_tool("call_tool", arguments, input_responses=responses,
                                          request_state=asked.request_state, allow_input_required=True)
            assert isinstance(r, types.CallToolResult) and not r.is_error and "held" in text_of(r), r
            with pytest.raises(MCPError) as refused:
                await a.session.call_tool("call_tool", arguments, input_responses=responses,
                                          request_state=asked.request_state, allow_input_required=True)
            assert "its call ended: it was answered, cancelled, or not retried within" in str(refused.value)


@pytest.fixture
def asking(tmp_path):
    """The in-repo 2026-07-28 fixture with its tool and prompt that answer with an
    InputRequiredResult (no real server does yet)."""
    fixture = Path(__file__).with_name("fixtures") / "modern_server.py"
    cfg = write_config(tmp_path, {"modern": {"command": str(PEERS / "py" / "bin" / "python"), "args": [str(fixture)],
                                             "env": {"MODERN_ASKS": "1"}}})
    run_cli(cfg, "index")
    return cfg


async def test_a_2026_07_28_upstreams_own_input_request_reaches_the_client(asking):
    """meta-server puts the upstream's question to its own 2026-07-28 client the same way, and
    retries the upstream with the answer and the upstream's requestState."""
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with client(asking, "stdio", elicitation_callback=elicit) as c:
        r = await call(c, "modern__ask_name")
        assert not r.is_error, text_of(r)
        assert "hello Grace; state asked-for-name" in text_of(r)
    assert [a.splitlines() for a in asked] == [['The MCP server "modern" asks (meta-server relays its request; '
                                                "this is not a question of meta-server's):", "> Your name?"]]


async def test_a_2026_07_28_upstreams_round_reaches_the_client_as_the_server_asked_it(asking):
    """Driven by hand: the client gets the upstream's round under the server's own keys, with
    meta-server's own requestState (new each round) standing for the server's, which goes back
    to the server with the retry; answers in a first request reach the server too."""
    arguments = {"name": "modern__ask_name", "arguments": {}}
    grace = {"name": {"action": "accept", "content": {"name": "Grace"}}}
    async with client(asking, "stdio") as c:
        asked = await c.session.call_tool("call_tool", arguments, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult), asked
        assert list(asked.input_requests) == ["name"], "the server's own key"
        assert asked.request_state and asked.request_state != "asked-for-name", "meta-server's own"
        again = await c.session.call_tool("call_tool", arguments, request_state=asked.request_state,
                                          allow_input_required=True)
        assert isinstance(again, types.InputRequiredResult) and list(again.input_requests) == ["name"]
        assert again.request_state != asked.request_state, "each round has its own state"
        with pytest.raises(MCPError) as spent:
            await c.session.call_tool("call_tool", arguments, input_responses=grace,
                                      request_state=asked.request_state, allow_input_required=True)
        assert "names no call waiting" in str(spent.value)
        r = await c.session.call_tool("call_tool", arguments, input_responses=grace,
                                      request_state=again.request_state, allow_input_required=True)
        assert isinstance(r, types.CallToolResult), r
        assert "hello Grace; state asked-for-name" in text_of(r), "the server's state came back to it"
        early = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        r = await c.session.call_tool("call_tool", arguments, input_responses=early, allow_input_required=True)
        assert isinstance(r, types.CallToolResult) and "hello Ada; state None" in text_of(r), r


@pytest.mark.parametrize("mode", [MODE, "legacy"])
async def test_a_prompt_that_asks_reaches_the_client_of_either_revision(asking, mode):
    """prompts/get takes the same path as a tool call: an InputRequiredResult for a 2026-07-28
    client, a request on the session for a 2025-11-25 one."""
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Alan"})

    params = StdioServerParameters(command=str(BIN), args=["--config", str(asking), "serve"], env=dict(os.environ))
    async with Client(params, mode=mode, elicitation_callback=elicit) as c:
        r = await c.get_prompt("modern__greeting")
        assert "Write a warm greeting for Alan." in r.messages[0].content.text, r
    assert [a.splitlines()[-1] for a in asked] == ["> Whom to greet?"], asked


async def test_upstream_log_messages_reach_a_client_that_named_a_log_level(indexed, tmp_path):
    """A 2026-07-28 request names its log level in `_meta`; server-everything logs (at info)
    that it got the roots it asked this client for, and that message reaches the client."""
    logged = asyncio.Event()
    messages = []

    async def log(params: types.LoggingMessageNotificationParams):
        messages.append(params)
        if "Roots updated" in str(params.data):
            logged.set()

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri())])

    async with client(indexed, "stdio", list_roots_callback=roots, logging_callback=log, log_level="info") as c:
        r = await call(c, "everything__get-roots-list")
        assert not r.is_error, text_of(r)
        await asyncio.wait_for(logged.wait(), 30)
    said = [m for m in messages if "Roots updated" in str(m.data)]
    assert said[0].level == "info" and said[0].logger == "everything/everything-server"


async def test_no_upstream_log_messages_without_a_log_level(indexed, tmp_path):
    messages = []

    async def log(params: types.LoggingMessageNotificationParams):
        messages.append(params)

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri())])

    async with client(indexed, "stdio", list_roots_callback=roots, logging_callback=log) as c:
        for _ in range(100):
            r = await call(c, "everything__get-roots-list")
            if tmp_path.as_uri() in text_of(r):
                break
            await asyncio.sleep(0.05)
        assert tmp_path.as_uri() in text_of(r), text_of(r)
    assert messages == []


async def test_a_parked_call_does_not_block_another_clients_requests(indexed):
    """Issue 38 L2: A's call waits, parked, for A's answer to an elicitation; meanwhile B's
    call of the same server asks B for sampling, and is answered: a call parked on its client
    is not the one asking anew."""
    a_asked, a_release = asyncio.Event(), asyncio.Event()

    async def a_elicit(context, params):
        a_asked.set()
        await a_release.wait()
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def b_sampling(context, params):
        return types.CreateMessageResult(role="assistant", model="b", content=types.TextContent(type="text", text="from B"))

    with http_server(indexed) as (_, url):
        async with http_client(url, elicitation_callback=a_elicit) as a, \
                http_client(url, sampling_callback=b_sampling) as b:
            a_call = asyncio.create_task(call(a, "everything__trigger-elicitation-request"))
            await asyncio.wait_for(a_asked.wait(), 60)
            r = await call(b, "everything__trigger-sampling-request", {"prompt": "for B"})
            assert not r.is_error and "from B" in text_of(r), text_of(r)
            a_release.set()
            r = await a_call
            assert not r.is_error and "Ada Lovelace" in text_of(r), text_of(r)
