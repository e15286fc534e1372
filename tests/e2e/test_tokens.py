"""Named tokens of `serve --http` (`metaServer.http.tokens`), driven by the official Python SDK
over HTTP against the real reference servers: a token limited to one server neither finds nor
calls the others (search, details, call_tool, Code Mode), its denied tools are unknown to it,
tools/list is the same bytes for every token, META_SERVER_TOKEN still works unrestricted, and
metrics and the audit log carry the token's name, never its value."""
import http.client
import json

import httpx2
import pytest
from mcp import Client
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
