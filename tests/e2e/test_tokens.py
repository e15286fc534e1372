"""Named tokens of `serve --http` (`metaServer.http.tokens`), driven by the official Python SDK
over HTTP against the real reference servers: a token limited to one server neither finds nor
calls the others (search, details, call_tool, Code Mode), its denied tools are unknown to it,
tools/list is the same bytes for every token, META_SERVER_TOKEN still works unrestricted, and
metrics and the audit log carry the token's name, never its value."""
import asyncio
import http.client
import json
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import children, processes, run_cli, server_entries, text_of, write_config
from test_http import http_server, sdk_client

pytestmark = pytest.mark.anyio

LIMITED = "limited-token-8c1d2e77"
OPS = "ops-token-41aa90f3"
UNNAMED = "unnamed-token-0b7c55e1"
STATIC = "demo://resource/static/document/architecture.md"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """everything (prompts and resources), filesystem, memory and time indexed; `fs-only` sees filesystem less its write tools,
    `ops` everything; META_SERVER_TOKEN is the third, unnamed token."""
    tmp = tmp_path_factory.mktemp("tokens")
    (tmp / "files").mkdir()
    entries = server_entries(tmp / "files")
    servers = {name: entries[name] for name in ("everything", "filesystem", "memory", "time")}
    cfg = write_config(tmp, servers, audit={"path": "audit.jsonl"}, http={"tokens": [
        {"name": "fs-only", "token": "${LIMITED_TOKEN}", "servers": ["filesystem"], "denyTools": ["filesystem__write_*"]},
        {"name": "ops", "token": "${OPS_TOKEN}"},
    ]})
    run_cli(cfg, "index")
    mp = pytest.MonkeyPatch()
    mp.setenv("LIMITED_TOKEN", LIMITED)
    mp.setenv("OPS_TOKEN", OPS)
    with http_server(cfg, token=UNNAMED) as (proc, url):
        yield proc, url, tmp
    mp.undo()


@pytest.fixture
def fresh(served):
    """A second `serve` of the same config, so that nothing the other tests called is running."""
    _, _, tmp = served
    with http_server(tmp / "config.json", token=UNNAMED) as (proc, url):
        yield proc, url


def get(url: str, path: str, token: str) -> tuple[int, str]:
    host = url.removeprefix("http://").split("/", 1)[0]
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    return response.status, response.read().decode()


async def call(c, name: str, arguments: dict | None = None):
    return await c.call_tool("call_tool", {"name": name, "arguments": arguments or {}})


async def test_tools_list_is_the_same_bytes_for_every_token(served):
    _, url, _ = served
    listed = []
    for token in (LIMITED, OPS, UNNAMED):
        async with sdk_client(url, token, []) as c:
            tools = (await c.list_tools()).tools
            listed.append(json.dumps([t.model_dump(mode="json") for t in tools], sort_keys=True))
    assert listed[0] == listed[1] == listed[2]
    assert get(url, "/metrics", "not-a-token")[0] == 401


async def test_a_limited_token_neither_finds_nor_calls_other_servers(served):
    proc, url, tmp = served
    async with sdk_client(url, LIMITED, []) as c:
        r = await c.call_tool("search_tools", {"query": "current time in a timezone", "limit": 20})
        servers = {h["server"] for h in r.structured_content["hits"]}
        assert servers and servers <= {"filesystem", "meta"}, servers
        r = await c.call_tool("search_tools", {"query": "write a file", "limit": 20})
        names = [h["name"] for h in r.structured_content["hits"]]
        assert "filesystem__read_text_file" in names or "filesystem__edit_file" in names, names
        assert not any(n.startswith("filesystem__write_") for n in names), names
        r = await c.call_tool("search_tools", {"query": "time", "server": "time"})
        assert r.is_error and 'unknown server "time"' in text_of(r), text_of(r)
        r = await c.call_tool("get_tool_details", {"names": ["time__get_current_time", "filesystem__read_text_file"]})
        assert [t["name"] for t in r.structured_content["tools"]] == ["filesystem__read_text_file"]
        assert [n["name"] for n in r.structured_content["notFound"]] == ["time__get_current_time"]
        for name, args in (("time__get_current_time", {"timezone": "UTC"}), ("memory__read_graph", {}),
                           ("filesystem__write_file", {"path": str(tmp / "files" / "x"), "content": "x"})):
            r = await call(c, name, args)
            assert r.is_error and f'unknown tool "{name}"' in text_of(r), text_of(r)
            suggested = text_of(r).split("Did you mean")[1:]
            assert not any(other in "".join(suggested) for other in ("time__", "memory__", "filesystem__write_")), text_of(r)
        assert not (tmp / "files" / "x").exists()
        r = await call(c, "filesystem__list_allowed_directories")
        assert not r.is_error and str(tmp / "files") in text_of(r)
        code = """
        const out = {};
        try { await tools.call("time__get_current_time", {timezone: "UTC"}); out.call = "called"; } catch (e) { out.call = e.message; }
        try { await tools.describe("memory__read_graph"); out.describe = "described"; } catch (e) { out.describe = e.message; }
        out.found = (await tools.search("current time in a timezone")).hits.map((h) => h.server);
        return out;"""
        r = await call(c, "meta__run_script", {"code": code})
        assert not r.is_error, text_of(r)
        out = r.structured_content["result"]
        assert 'unknown tool "time__get_current_time"' in out["call"] and "unknown tool" in out["describe"], out
        assert set(out["found"]) <= {"filesystem", "meta"}, out
    started = " ".join(processes()[p][1] for p in children(proc.pid))
    assert not any(other in started for other in ("server-memory", "mcp-server-time", "server-everything")), started


async def test_a_limited_token_sees_no_prompts_or_resources_of_other_servers(served):
    _, url, _ = served
    async with sdk_client(url, OPS, []) as c:
        assert "everything__args-prompt" in [p.name for p in (await c.list_prompts()).prompts]
        assert STATIC in [str(r.uri) for r in (await c.list_resources()).resources]
    async with sdk_client(url, LIMITED, []) as c:
        assert (await c.list_prompts()).prompts == []
        assert not any(str(r.uri).startswith("demo://") for r in (await c.list_resources()).resources)
        assert not any(t.uri_template.startswith("demo://") for t in (await c.list_resource_templates()).resource_templates)
        with pytest.raises(MCPError, match="unknown prompt"):
            await c.get_prompt("everything__args-prompt", {"city": "Paris"})
        with pytest.raises(MCPError, match="unknown resource"):
            await c.read_resource(STATIC)


async def test_unrestricted_tokens_call_everything_and_names_are_recorded_never_values(served):
    _, url, tmp = served
    for token in (OPS, UNNAMED):
        async with sdk_client(url, token, []) as c:
            r = await call(c, "time__get_current_time", {"timezone": "UTC"})
            assert not r.is_error and json.loads(text_of(r))["timezone"] == "UTC"
    async with sdk_client(url, LIMITED, []) as c:
        assert (await call(c, "memory__read_graph")).is_error
    status, metrics = get(url, "/metrics", OPS)
    assert status == 200
    assert 'server="time",outcome="ok",principal="ops"' in metrics, metrics
    assert 'principal="token-' in metrics
    lines = [json.loads(line) for line in (tmp / "audit.jsonl").read_text().splitlines()]
    by = {(l["principal"], l["tool"], l["outcome"]) for l in lines if l["kind"] == "tool"}
    assert ("ops", "get_current_time", "ok") in by and ("fs-only", "read_graph", "denied") in by, by
    assert all(l["session"] and l["session"].startswith("s-") for l in lines)
    for secret in (LIMITED, OPS, UNNAMED):
        assert secret not in metrics and secret not in (tmp / "audit.jsonl").read_text()


async def test_prompts_and_reads_are_audited_with_the_principal_and_no_argument_values(served):
    """Issue 38, L8: prompts/get and resources/read had no audit line. One each now, in both
    revisions, with the token's name, the server, the prompt or URI and the outcome."""
    _, url, tmp = served
    log = tmp / "audit.jsonl"
    before = len(log.read_text().splitlines())
    for mode in ("legacy", "2026-07-28"):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {OPS}"},
                                      timeout=httpx2.Timeout(30.0, read=120.0)) as http_client:
            async with Client(streamable_http_client(url, http_client=http_client), mode=mode) as c:
                prompt = await c.get_prompt("everything__args-prompt", {"city": "Secret-City-7"})
                assert "Secret-City-7" in json.dumps(prompt.model_dump(mode="json"))
                assert (await c.read_resource(STATIC)).contents
    async with sdk_client(url, LIMITED, []) as c:
        with pytest.raises(MCPError, match="unknown prompt"):
            await c.get_prompt("everything__args-prompt", {"city": "Secret-City-7"})
        with pytest.raises(MCPError, match="unknown resource"):
            await c.read_resource(STATIC)
    lines = [json.loads(line) for line in log.read_text().splitlines()[before:]]
    got = [(l["kind"], l["principal"], l["server"], l.get("prompt", l.get("uri")), l["outcome"]) for l in lines]
    ok = [("prompt", "ops", "everything", "everything__args-prompt", "ok"), ("resource", "ops", "everything", STATIC, "ok")]
    assert got == ok + ok + [("prompt", "fs-only", None, "everything__args-prompt", "error"),
                             ("resource", "fs-only", None, STATIC, "error")], got
    assert all(l["resultBytes"] > 0 for l in lines[:4]) and all(l["durationMs"] >= 0 for l in lines)
    assert lines[0]["session"].startswith("s-") and lines[2]["session"] is None, "2026-07-28: no session"
    assert "Secret-City-7" not in log.read_text(), "no argument values by default"


@asynccontextmanager
async def client_with(url: str, token: str, **callbacks):
    """A 2025-11-25 session of the official Python SDK with `token` and the given callbacks."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30.0, read=120.0)) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client), mode="legacy", **callbacks) as c:
            yield c


def allowed(result) -> list[str]:
    """The directories server-filesystem's list_allowed_directories names."""
    return [line.strip() for line in text_of(result).splitlines()[1:] if line.strip()]


async def test_a_clients_roots_never_widen_a_servers_sandbox_nor_reach_the_next_client(tmp_path):
    """Issue 38 H2: a token limited to filesystem, writes denied, answers roots with file:///.
    server-filesystem replaces its directories with the roots it is given; over HTTP its
    connection is shared, so it is given no client's roots: it keeps the directory the config
    started it with, for this client and the next."""
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "mine.txt").write_text("inside the sandbox")
    (tmp_path / "secret.txt").write_text("outside the sandbox")
    servers = {"filesystem": server_entries(tmp_path / "files")["filesystem"]}
    cfg = write_config(tmp_path, servers, http={"tokens": [
        {"name": "fs-only", "token": "${LIMITED_TOKEN}", "servers": ["filesystem"], "denyTools": ["filesystem__write_*"]},
        {"name": "ops", "token": "${OPS_TOKEN}"},
    ]})
    run_cli(cfg, "index")
    asked = []

    async def everything_is_mine(context):
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri="file:///", name="all")])

    sandbox = [str((tmp_path / "files").resolve())]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIMITED_TOKEN", LIMITED)
        mp.setenv("OPS_TOKEN", OPS)
        with http_server(cfg, token=UNNAMED) as (_, url):
            async with client_with(url, LIMITED, list_roots_callback=everything_is_mine) as c:
                # This client's call starts filesystem, which asks for roots at once.
                r = await call(c, "filesystem__read_text_file", {"path": str(tmp_path / "files" / "mine.txt")})
                assert text_of(r) == "inside the sandbox", text_of(r)
                await c.session.send_roots_list_changed()
                for _ in range(20):
                    r = await call(c, "filesystem__list_allowed_directories")
                    assert allowed(r) == sandbox, text_of(r)
                    await asyncio.sleep(0.05)
                r = await call(c, "filesystem__read_text_file", {"path": str(tmp_path / "secret.txt")})
                assert r.is_error and "outside the sandbox" not in text_of(r), text_of(r)
            async with client_with(url, OPS) as c:
                r = await call(c, "filesystem__list_allowed_directories")
                assert allowed(r) == sandbox, text_of(r)
                r = await call(c, "filesystem__read_text_file", {"path": str(tmp_path / "secret.txt")})
                assert r.is_error and "outside the sandbox" not in text_of(r), text_of(r)
    assert asked == [], "no client is asked for roots over a shared connection"


@asynccontextmanager
async def modern_client(url: str, token: str):
    """The official Python SDK speaking 2026-07-28 with `token`."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30.0, read=120.0)) as http_client:
        async with Client(streamable_http_client(url, http_client=http_client), mode="2026-07-28") as c:
            yield c


async def test_a_limited_token_cannot_subscribe_to_a_hidden_servers_resources(fresh):
    """Issue 38 M2: fs-only subscribes to a resource of everything, hidden from it, by
    resources/subscribe (refused as a resource no server lists) and by a subscriptions/listen
    stream (whose acknowledgement does not accept it); everything is not started."""
    proc, url = fresh
    async with sdk_client(url, LIMITED, []) as c:
        with pytest.raises(MCPError, match="no server lists"):
            await c.subscribe_resource(STATIC)
    started = " ".join(processes()[p][1] for p in children(proc.pid))
    assert "server-everything" not in started, started


async def test_a_limited_tokens_listen_stream_takes_no_hidden_resources(fresh):
    proc, url = fresh
    async with modern_client(url, LIMITED) as c:
        async with c.listen(resource_subscriptions=[STATIC], resources_list_changed=True) as sub:
            assert not sub.honored.resource_subscriptions, sub.honored
            assert sub.honored.resources_list_changed, sub.honored
    started = " ".join(processes()[p][1] for p in children(proc.pid))
    assert "server-everything" not in started, started


async def test_lists_that_differ_between_tokens_are_private_to_caches(served):
    """Issue 38 L1: with a limited token configured, the upstream prompts, resources and
    templates differ per token: a 2026-07-28 client is told they are private."""
    _, url, _ = served
    for token in (LIMITED, OPS):
        async with modern_client(url, token) as c:
            for listing in (await c.list_prompts(), await c.list_resources(), await c.list_resource_templates()):
                assert listing.cache_scope == "private", listing
            assert (await c.list_tools()).cache_scope == "public", "tools/list is the same for every token"


async def test_a_limited_tokens_skill_and_metrics_stay_within_its_servers(tmp_path):
    """Issue 38 L3: a skill declaring a server hidden from the token neither starts nor names
    it; the token's /metrics shows its servers and its own calls only, an unlimited token's
    everything."""
    skill = tmp_path / "skills" / "notes-helper"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes-helper\ndescription: Keep release notes in files and a"
                                    " knowledge graph.\nmcp-servers: [memory, filesystem]\n---\nWrite the notes.\n")
    (tmp_path / "files").mkdir()
    entries = server_entries(tmp_path / "files")
    cfg = write_config(tmp_path, {"filesystem": entries["filesystem"], "memory": entries["memory"]},
                       skillsDirs=[str(tmp_path / "skills")], http={"tokens": [
                           {"name": "fs-only", "token": "${LIMITED_TOKEN}", "servers": ["filesystem"]},
                           {"name": "ops", "token": "${OPS_TOKEN}"}]})
    run_cli(cfg, "index")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIMITED_TOKEN", LIMITED)
        mp.setenv("OPS_TOKEN", OPS)
        with http_server(cfg, token=UNNAMED) as (proc, url):
            async with sdk_client(url, OPS, []) as c:
                assert not (await call(c, "memory__read_graph")).is_error
            async with sdk_client(url, LIMITED, []) as c:
                r = await call(c, "skill__notes-helper")
                assert not r.is_error, text_of(r)
                assert r.structured_content["servers"] == ["filesystem"], r.structured_content
                assert "memory" not in json.dumps(r.structured_content["missingServers"]), r.structured_content
                assert "Starting its servers now: filesystem." in text_of(r), text_of(r)
                r = await c.call_tool("get_tool_details", {"names": ["skill__notes-helper"]})
                assert r.structured_content["tools"][0]["servers"] == ["filesystem"], r.structured_content
                assert not (await call(c, "filesystem__list_allowed_directories")).is_error
            status, limited = get(url, "/metrics", LIMITED)
            assert status == 200
            assert 'server="filesystem",outcome="ok",principal="fs-only"' in limited, limited
            assert 'principal="ops"' not in limited and 'server="memory"' not in limited, limited
            _, everything = get(url, "/metrics", OPS)
            assert 'principal="ops"' in everything and 'server="memory"' in everything, everything
            assert 'principal="fs-only"' in everything, everything
