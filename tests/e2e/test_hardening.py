"""What adversarial probes found (issues 18 and 32), through the official Python SDK, which checks
every structured result against the tool's declared outputSchema and raises when it breaks it."""
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from conftest import BIN, ROOT, meta_client, run_cli, text_of, write_config

pytestmark = pytest.mark.anyio

# Codex keeps about 10 KiB of a result, so its session's budget is 2,500 tokens (about 10 KB).
CODEX = Implementation(name="codex-mcp-client", version="1.0")
BUDGET_BYTES = 2_500 * 4


@pytest.fixture
def anyio_backend():
    return "asyncio"


def shipped(tmp: Path) -> Path:
    servers = {name: {"command": f"/nonexistent/{name}"} for name in ("everything", "filesystem", "memory", "time")}
    return write_config(tmp, servers, catalogDir=str(ROOT / "catalogs"))


def size(result) -> int:
    return len(text_of(result)) + len(json.dumps(result.structured_content or {}))


async def test_huge_arguments_get_results_that_fit_and_keep_their_schema(tmp_path):
    params = StdioServerParameters(command=str(BIN), args=["--config", str(shipped(tmp_path)), "serve"],
                                   env={**os.environ})
    async with Client(params, client_info=CODEX) as c:
        # The SDK raises if structuredContent is missing or breaks the outputSchema.
        r = await c.call_tool("search_tools", {"query": "current time in a timezone " * 800, "limit": 50,
                                               "detail": "full"})
        assert not r.is_error and size(r) < 4 * BUDGET_BYTES
        assert len(r.structured_content["query"]) < 300, "what is echoed is capped"

        r = await c.call_tool("get_tool_details", {"names": ["x" * 1_000_000, "time__get_current_time"]})
        assert not r.is_error and size(r) < 4 * BUDGET_BYTES
        assert r.structured_content["notFound"][0]["name"].endswith("(1000000 characters)")

        r = await c.call_tool("call_tool", {"name": "y" * 1_000_000, "arguments": {}})
        assert r.is_error and len(text_of(r)) < BUDGET_BYTES

        r = await c.call_tool("call_tool", {"name": "time__get_current_time",
                                            "arguments": {"timezone": ["z" * 1_300_000]}})
        assert r.is_error and "timezone" in text_of(r) and len(text_of(r)) < BUDGET_BYTES


async def test_resources_read_errors_cap_the_uri_they_repeat(tmp_path):
    params = StdioServerParameters(command=str(BIN), args=["--config", str(shipped(tmp_path)), "serve"],
                                   env={**os.environ})
    async with Client(params, client_info=CODEX) as c:
        # A stored-result id, a URI of no kind meta-server serves, and a skill name: 100 KB each.
        for uri in ("meta-server://results/r-" + "a" * 100_000, "x:" + "y" * 100_000, "skill://" + "s" * 100_000):
            with pytest.raises(MCPError) as refused:
                await c.read_resource(uri)
            message = refused.value.message
            assert len(message) < 1_000, f"{len(message)} characters: {message[:300]}"
            # The URI is echoed cut, saying its length, or (too long to match) only its length.
            assert " characters)" in message or " bytes long" in message, message


# Issue 32: what upstreams send. A hostile upstream (tests/e2e/fixtures/hostile_upstream.py)
# over stdio, legacy SSE and streamable HTTP, on loopback ports.
HOSTILE = Path(__file__).with_name("fixtures") / "hostile_upstream.py"


@contextmanager
def hostile_http(*args: str):
    """The hostile upstream over HTTP; yields its base URL."""
    proc = subprocess.Popen([sys.executable, str(HOSTILE), "http", *args], stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def hostile_stdio(**extra) -> dict:
    return {"command": sys.executable, "args": [str(HOSTILE), "stdio"], **extra}


def requests_seen(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_redirects_to_another_origin_are_refused_and_nothing_reaches_it(tmp_path):
    seen = tmp_path / "elsewhere.log"
    headers = {"X-Api-Key": "key-for-the-configured-server", "Authorization": "Bearer token-for-it"}
    with hostile_http("--log", str(seen)) as elsewhere, hostile_http("--redirect-to", elsewhere) as moved, \
            hostile_http() as own:
        cfg = write_config(tmp_path, {
            # A 307 to the streamable-HTTP POST, a 302 to the SSE stream's GET.
            "post": {"type": "http", "url": f"{moved}/r307/mcp", "headers": headers},
            "stream": {"type": "sse", "url": f"{moved}/r302/sse", "headers": headers},
            "fine": hostile_stdio(),
            # Redirects on the server's own origin are followed.
            "same307": {"type": "http", "url": f"{own}/r307/mcp", "headers": headers},
            "same302": {"type": "sse", "url": f"{own}/r302/sse", "headers": headers},
        })
        async with meta_client(cfg) as c:
            for server in ("same307", "same302"):
                r = await c.call_tool("call_tool", {"name": f"{server}__echo", "arguments": {"text": "followed"}})
                assert text_of(r) == "followed", text_of(r)
            for server in ("post", "stream"):
                r = await c.call_tool("call_tool", {"name": f"{server}__echo", "arguments": {"text": "hi"}})
                said = text_of(r)
                assert r.is_error, said
                assert f'server "{server}" redirected a request from {moved} to {elsewhere}' in said, said
                assert 'set its "url" in the config' in said, said
            r = await c.call_tool("call_tool", {"name": "fine__echo", "arguments": {"text": "still here"}})
            assert text_of(r) == "still here"
    assert requests_seen(seen) == [], "nothing, neither headers nor the initialize body, reached the other origin"


async def test_a_message_over_the_limit_drops_that_connection_only(tmp_path):
    with hostile_http() as base:
        cfg = write_config(tmp_path, {
            "pipe": hostile_stdio(maxMessageMb=1),
            "stream": {"type": "sse", "url": f"{base}/sse"},
            "post": {"type": "http", "url": f"{base}/mcp?sse=1", "maxMessageMb": 2},
            "body": {"type": "http", "url": f"{base}/mcp"},
        }, maxMessageMb=1, timeoutSecs=120)
        async with meta_client(cfg) as c:
            for server, limit in (("pipe", 1), ("stream", 1), ("post", 2), ("body", 1)):
                with anyio.fail_after(60):
                    r = await c.call_tool("call_tool", {"name": f"{server}__huge", "arguments": {"mb": 5}})
                said = text_of(r)
                assert r.is_error, said[:300]
                assert f'server "{server}" sent a message larger than {limit} MiB' in said, said[:300]
                assert "maxMessageMb" in said and len(said) < BUDGET_BYTES, said[:300]
                # The server answers again (reconnected), under the limit.
                r = await c.call_tool("call_tool", {"name": f"{server}__huge", "arguments": {"mb": 0}})
                assert not r.is_error, text_of(r)[:300]
                r = await c.call_tool("call_tool", {"name": f"{server}__echo", "arguments": {"text": "back"}})
                assert text_of(r) == "back"


async def test_an_error_made_of_what_a_server_sent_stays_small(tmp_path):
    with hostile_http() as base:
        # A 10 MB `endpoint` event, off the server's origin.
        cfg = write_config(tmp_path, {"big": {"type": "sse", "url": f"{base}/sse?endpoint_mb=10"}})
        async with meta_client(cfg) as c:
            r = await c.call_tool("call_tool", {"name": "big__echo", "arguments": {"text": "hi"}})
            said = text_of(r)
            assert r.is_error and "is not a URL on the server's origin" in said, said[:300]
            assert len(said) < BUDGET_BYTES, len(said)


async def test_lone_surrogates_in_replies_arrive_as_replacement_characters_at_once(tmp_path):
    with hostile_http() as base:
        cfg = write_config(tmp_path, {
            "pipe": hostile_stdio(),
            "stream": {"type": "sse", "url": f"{base}/sse"},
            "post": {"type": "http", "url": f"{base}/mcp?sse=1"},
            "body": {"type": "http", "url": f"{base}/mcp"},
        }, timeoutSecs=300)
        async with meta_client(cfg) as c:
            for server in ("pipe", "stream", "post", "body"):
                # Waiting for timeoutSecs would fail here.
                with anyio.fail_after(30):
                    r = await c.call_tool("call_tool", {"name": f"{server}__surrogate", "arguments": {}})
                assert not r.is_error and text_of(r) == "a\ufffdb", (server, text_of(r))


# Issue 38: resource routing. Two upstreams of tests/e2e/fixtures/claiming_server.py that list
# what they are told to, and record each URI they are asked to read.
CLAIMING = Path(__file__).with_name("fixtures") / "claiming_server.py"


def claiming(tmp: Path, name: str, resources: list, templates: list) -> dict:
    env = {"CLAIM_NAME": name, "CLAIM_RESOURCES": json.dumps(resources),
           "CLAIM_TEMPLATES": json.dumps(templates), "CLAIM_LOG": str(tmp / f"{name}.reads")}
    return {"command": sys.executable, "args": [str(CLAIMING)], "env": env}


async def test_resource_uris_go_to_the_first_server_in_the_file_that_claims_them(tmp_path):
    """zeta comes first in the file (alpha first by name). alpha lists zeta's URI, a URI within
    zeta's template, and a catch-all template; and templates within meta-server's own URIs."""
    servers = {
        "zeta": claiming(tmp_path, "zeta", ["shared://doc"], ["notes://{+path}"]),
        "alpha": claiming(tmp_path, "alpha", ["shared://doc", "notes://private/key", "alpha://mine"],
                          ["{+uri}", "https://{host}/{+path}", "skill://{name}",
                           "meta-server://results/{resourceId}", "alpha://items/{id}"]),
    }
    cfg = write_config(tmp_path, servers)
    run_cli(cfg, "index")
    async with meta_client(cfg) as c:
        listed = [str(r.uri) for r in (await c.list_resources()).resources]
        assert listed == ["shared://doc", "alpha://mine"], listed
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        assert templates == ["meta-server://results/{resourceId}", "notes://{+path}", "alpha://items/{id}"], templates
        for uri, server in (("shared://doc", "zeta"), ("notes://private/key", "zeta"),
                            ("alpha://mine", "alpha"), ("alpha://items/7", "alpha")):
            r = await c.read_resource(uri)
            assert r.contents[0].text == f"{server} read {uri}", (uri, r.contents[0].text)
        for unlisted in ("file:///home/user/.ssh/id_rsa", "https://bank.example/login?token=s3cret",
                         "skill://anything"):
            with pytest.raises(MCPError):
                await c.read_resource(unlisted)
    alpha_reads = (tmp_path / "alpha.reads").read_text().splitlines()
    assert alpha_reads == ["alpha://mine", "alpha://items/7"], alpha_reads


def test_the_2026_07_28_path_answers_removed_methods_with_method_not_found(tmp_path):
    """Issue 38 L12: `initialize` and `logging/setLevel` are not methods of 2026-07-28; a
    request naming that revision in its `_meta` gets -32601 for them, over HTTP as over stdio
    (tests/it/hardening.rs). A 2025-11-25 session still has both."""
    from test_http import (DISCOVER, http_server, initialize, jsonrpc_of, post, shipped_catalogs_config,
                           unstartable_servers)
    meta = DISCOVER["params"]["_meta"]
    init = {"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    with http_server(shipped_catalogs_config(tmp_path, unstartable_servers())) as (_, url):
        for method, params in (("initialize", init), ("logging/setLevel", {"level": "info"})):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
            _, _, text = post(url, body, {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method})
            error = jsonrpc_of(text)["error"]
            assert error["code"] == -32601, text
            assert f"{method} is not a method of MCP 2026-07-28" in error["message"], text
        sid = initialize(url)
        _, _, text = post(url, {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}},
                          {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        assert jsonrpc_of(text)["result"] == {}, text
