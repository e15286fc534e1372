"""Standing in for the whole config: legacy SSE upstreams (server-everything's real `sse` mode),
a remote server that needs a login, entries meta-server cannot serve, and `meta-server call`."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import meta_client, run_cli, server_entries, text_of, write_config

pytestmark = pytest.mark.anyio


async def test_legacy_sse_upstream_is_indexed_searched_and_called(tmp_path, everything_sse):
    cfg = write_config(tmp_path, {"old": {"type": "sse", "url": f"http://127.0.0.1:{everything_sse}/sse"}})
    out = run_cli(cfg, "index", "--json")
    [row] = json.loads(out.stdout)
    assert row["ok"] and row["tools"] >= 10, row
    out = run_cli(cfg, "auth", "status", "--json")
    assert [(r["server"], r["state"]) for r in json.loads(out.stdout)] == [("old", "no-login-needed")]
    async with meta_client(cfg) as c:
        r = await c.call_tool("search_tools", {"query": "add two numbers"})
        assert r.structured_content["hits"][0]["name"] == "old__get-sum"
        r = await c.call_tool("call_tool", {"name": "old__echo", "arguments": {"message": "over sse"}})
        assert text_of(r) == "Echo: over sse"
        # A result far over the budget is cut, kept, and readable back, over SSE too.
        r = await c.call_tool("call_tool", {"name": "old__echo", "arguments": {"message": "x" * 200_000}})
        assert "TRUNCATION NOTICE" in text_of(r)


class NeedsLogin(BaseHTTPRequestHandler):
    """A remote MCP server as it looks to a client that never logged in: every request gets
    401 with an OAuth challenge."""

    def do_POST(self):
        self.send_response(401)
        port = self.server.server_address[1]
        self.send_header("WWW-Authenticate",
                         f'Bearer resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture
def needs_login():
    server = ThreadingHTTPServer(("127.0.0.1", 0), NeedsLogin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


async def test_a_server_that_needs_login_stays_searchable_and_says_how(tmp_path, needs_login):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {
        "locked": {"type": "http", "url": f"http://127.0.0.1:{needs_login}/mcp"},
        "time": entries["time"],
    }, timeoutSecs=10)
    catalogs = tmp_path / "catalogs"
    catalogs.mkdir()
    (catalogs / "locked.json").write_text(json.dumps({"format": 1, "server": "locked", "tools": [
        {"name": "create_page", "description": "Create a page in the workspace", "inputSchema": {"type": "object"}}]}))
    # `index` skips it with the hint, indexes the rest, and says "partial" by its exit code.
    out = run_cli(cfg, "index", "--json", check=False)
    assert out.returncode == 2, out.stderr
    rows = {row["server"]: row for row in json.loads(out.stdout)}
    assert rows["time"]["ok"]
    assert "meta-server auth login locked" in rows["locked"]["error"]
    assert json.loads((catalogs / "locked.json").read_text())["tools"], "its catalog is kept"
    async with meta_client(cfg) as c:
        r = await c.call_tool("search_tools", {"query": "create a page"})
        assert r.structured_content["hits"][0]["name"] == "locked__create_page"
        r = await c.call_tool("call_tool", {"name": "locked__create_page", "arguments": {}})
        assert r.is_error and "meta-server auth login locked" in text_of(r)
        assert "offered" not in text_of(r), "this client takes no URL elicitation"
        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error, text_of(r)
    out = run_cli(cfg, "auth", "status", "--json")
    assert [(row["server"], row["state"]) for row in json.loads(out.stdout)] == [("locked", "needs-login")]


async def test_entries_meta_server_cannot_serve_are_reported_and_the_rest_works(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {
        "time": entries["time"],
        "socket": {"type": "websocket", "url": "ws://127.0.0.1:1/ws"},
        "gone": {"command": "no-such-command-for-meta-server-tests"},
    })
    run_cli(cfg, "index", "--server", "time")
    async with meta_client(cfg) as c:
        instructions = c.session.instructions
        assert "socket (not available" in instructions and "websocket" in instructions
        r = await c.call_tool("search_tools", {"query": "current time"})
        unavailable = {u["server"]: u["reason"] for u in r.structured_content["unavailable"]}
        assert "websocket" in unavailable["socket"]
        assert "was not found" in unavailable["gone"]
        assert r.structured_content["hits"][0]["name"] == "time__get_current_time"
        r = await c.call_tool("call_tool", {"name": "gone__anything", "arguments": {}})
        assert r.is_error and "no-such-command-for-meta-server-tests" in text_of(r)
        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error, text_of(r)


def test_call_runs_one_tool_from_the_shell(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"]})
    out = run_cli(cfg, "call", "everything__get-sum", '{"a": 2, "b": 40}')
    assert "42" in out.stdout, out
    out = run_cli(cfg, "call", "everything__echo", '{"message": "hi"}', "--json")
    assert json.loads(out.stdout)["content"][0]["text"] == "Echo: hi"
    out = run_cli(cfg, "call", "everything__get-sum", '{"a": "two"}', check=False)
    assert out.returncode == 1 and "input schema" in out.stdout, out
    out = run_cli(cfg, "call", "everything__get-sum", "[1]", check=False)
    assert out.returncode == 1 and "must be a JSON object" in out.stderr, out
