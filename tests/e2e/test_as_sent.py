"""What real servers send reaches the client as they sent it (issue 39, "Real servers"): every
field of their tools, prompts, resources and templates, known or not, is kept in their
catalogs and shown (details, alwaysLoad tools in tools/list, prompts/resources/templates
passed through); results lose the upstream's protocol stamps.

The SDKs drop fields they do not know, so everything here is read as raw JSON-RPC: from each
server directly, and from meta-server over stdio and HTTP in both revisions. The servers:
server-everything, -filesystem, -memory (`execution` on every tool), chrome-devtools-mcp
(annotation keys of its own: `category`, `conditions`), mcp-server-time (2026-07-28 by
`server/discover`), and `fixtures/sdk_server.py` on the official Python SDK (a prompt argument's
`default` as mcp-server-kubernetes sends it, a tool's `_meta`)."""
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import (BIN, PEERS, children, meta_client, meta_server_pid, run_cli, server_entries, wait_until,
                      write_config)
from test_http import http_server, jsonrpc_of, post

FIXTURES = Path(__file__).with_name("fixtures")
CHROME_DEVTOOLS = PEERS / "npm" / "node_modules" / "chrome-devtools-mcp" / "build" / "src" / "bin" / "chrome-devtools-mcp.js"
MODERN = "2026-07-28"
CLIENT_INFO = {"name": "raw-test", "version": "1"}
# What meta-server declares to its upstreams (some servers list tools by it).
UPSTREAM_CAPABILITIES = {"roots": {"listChanged": True}, "sampling": {},
                         "elicitation": {"form": {}, "url": {}}}
KINDS = [("tools/list", "tools"), ("prompts/list", "prompts"), ("resources/list", "resources"),
         ("resources/templates/list", "resourceTemplates")]


def servers(tmp: Path) -> dict:
    entries = server_entries(tmp)
    entries["chrome-devtools"] = {"command": "node", "args": [str(CHROME_DEVTOOLS), "--headless", "--no-usage-statistics"],
                                  "env": {"CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1", "HOME": str(tmp)}}
    entries["sdk"] = {"command": sys.executable, "args": [str(FIXTURES / "sdk_server.py")]}
    return entries


class Raw:
    """A JSON-RPC client over stdio that keeps every byte of what it reads. `era` is `legacy`
    (initialize) or 2026-07-28 (server/discover, then `_meta` on every request). Requests of
    the server are answered: roots with none, anything else with -32601."""

    def __init__(self, command: list[str], era: str, capabilities: dict, env: dict | None = None,
                 stderr=subprocess.DEVNULL):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, env=env or os.environ)
        self.replies: queue.Queue = queue.Queue()
        self.next_id = 0
        self.meta = {}
        threading.Thread(target=self._read, daemon=True).start()
        if era == MODERN:
            self.meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
                         "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                         "io.modelcontextprotocol/clientCapabilities": capabilities}
            self.result("server/discover")
        else:
            self.result("initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                       "clientInfo": CLIENT_INFO})
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict):
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # closed: the reader still drains what the process says

    def _read(self):
        for line in self.proc.stdout:
            message = json.loads(line)
            if "method" in message and "id" in message:
                if message["method"] == "roots/list":
                    self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}})
                else:
                    self._send({"jsonrpc": "2.0", "id": message["id"],
                                "error": {"code": -32601, "message": "not offered"}})
            elif "id" in message:
                self.replies.put(message)

    def request(self, method: str, params: dict | None = None) -> dict:
        """The whole reply message."""
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                    "params": {**(params or {}), **({"_meta": self.meta} if self.meta else {})}})
        while True:
            reply = self.replies.get(timeout=120)
            if reply["id"] == self.next_id:
                return reply

    def result(self, method: str, params: dict | None = None) -> dict:
        reply = self.request(method, params)
        assert "result" in reply, f"{method}: {reply}"
        return reply["result"]

    def every(self, method: str, key: str) -> list:
        """A whole list, page after page."""
        items, cursor = [], None
        while True:
            page = self.result(method, {"cursor": cursor} if cursor else {})
            items += page[key]
            cursor = page.get("nextCursor")
            if not cursor:
                return items

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def sent_by(entry: dict, era: str) -> dict:
    """What the server of `entry` lists in `era`, every kind, straight from it."""
    raw = Raw([entry["command"], *entry.get("args", [])], era, UPSTREAM_CAPABILITIES,
              {**os.environ, **entry.get("env", {})})
    try:
        lists = {}
        for method, key in KINDS:
            reply = raw.request(method)
            # A kind the server does not offer: the catalog records none.
            lists[key] = raw.every(method, key) if "result" in reply else []
        return lists
    finally:
        raw.close()


class MetaHttp:
    """Raw JSON-RPC to `meta-server serve --http` in either revision."""

    def __init__(self, url: str, era: str):
        self.url, self.era, self.next_id = url, era, 0
        self.headers = {"MCP-Protocol-Version": MODERN if era == MODERN else "2025-11-25"}
        if era != MODERN:
            status, headers, text = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}})
            assert status == 200, text
            self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
            post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers)

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        params = dict(params or {})
        headers = dict(self.headers)
        if self.era == MODERN:
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                               "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                               "io.modelcontextprotocol/clientCapabilities": {}}
            headers["Mcp-Method"] = method
            if "name" in params:
                headers["Mcp-Name"] = params["name"]
        status, _, text = post(self.url, {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params},
                               headers)
        assert status == 200, text
        return jsonrpc_of(text)

    def result(self, method: str, params: dict | None = None) -> dict:
        reply = self.request(method, params)
        assert "result" in reply, f"{method}: {reply}"
        return reply["result"]

    def close(self):
        pass


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, dict]:
    """The servers indexed by meta-server, and what each lists when asked directly."""
    tmp = tmp_path_factory.mktemp("as-sent")
    (tmp / "notes.txt").write_text("a note\n")
    entries = servers(tmp)
    cfg = write_config(tmp, {**entries, "chrome-devtools": {**entries["chrome-devtools"], "alwaysLoad": True},
                             "sdk": {**entries["sdk"], "alwaysLoad": True}})
    run_cli(cfg, "index")
    sent = {}
    for name, entry in entries.items():
        catalog = json.loads((tmp / "catalogs" / f"{name}.json").read_text())
        era = MODERN if catalog["protocolVersion"] == MODERN else "legacy"
        sent[name] = sent_by(entry, era)
    return cfg, sent


def test_each_catalog_holds_every_field_its_server_sent(indexed):
    cfg, sent = indexed
    assert any("execution" in t for t in sent["everything"]["tools"]), "the shape this test is about"
    assert any("category" in t["annotations"] for t in sent["chrome-devtools"]["tools"])
    for name, lists in sent.items():
        catalog = json.loads((cfg.parent / "catalogs" / f"{name}.json").read_text())
        for _, key in KINDS:
            assert catalog[key] == lists[key], f"{name} {key}"


def meta_stdio(cfg: Path, era: str) -> Raw:
    return Raw([str(BIN), "--config", str(cfg), "serve"], era, {})


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("era", ["legacy", MODERN])
def test_clients_get_every_field_of_listed_tools_prompts_and_resources(indexed, transport, era):
    cfg, sent = indexed
    if transport == "stdio":
        _lists_through(meta_stdio(cfg, era), sent)
        return
    with http_server(cfg) as (_, url):
        _lists_through(MetaHttp(url, era), sent)


def _lists_through(client, sent: dict):
    try:
        tools = {t["name"]: t for t in client.result("tools/list")["tools"]}
        for server in ("chrome-devtools", "sdk"):
            for tool in sent[server]["tools"]:
                qualified = f"{server}__{tool['name']}"
                assert tools[qualified] == {**tool, "name": qualified}, qualified
        assert tools["sdk__lookup"]["_meta"] == {"com.example/ui": {"panel": "lookup", "width": 320}}
        prompts = {p["name"]: p for p in client.result("prompts/list")["prompts"]}
        for server in ("everything", "sdk"):
            for prompt in sent[server]["prompts"]:
                qualified = f"{server}__{prompt['name']}"
                assert prompts[qualified] == {**prompt, "name": qualified}, qualified
        assert prompts["sdk__k8s-diagnose"]["arguments"][1] == {"name": "namespace", "required": False, "default": "all"}
        resources = {r["uri"]: r for r in client.result("resources/list")["resources"]}
        for server in ("everything", "sdk"):
            for resource in sent[server]["resources"]:
                assert resources[resource["uri"]] == resource
        templates = {t["uriTemplate"]: t for t in client.result("resources/templates/list")["resourceTemplates"]}
        for template in sent["everything"]["resourceTemplates"]:
            assert templates[template["uriTemplate"]] == template
    finally:
        client.close()


def test_details_show_every_field_of_a_tool(indexed):
    cfg, sent = indexed
    client = meta_stdio(cfg, "legacy")
    try:
        for server, tool in [("everything", "echo"), ("chrome-devtools", "evaluate_script"), ("sdk", "lookup")]:
            name = f"{server}__{tool}"
            details = client.result("tools/call", {"name": "get_tool_details", "arguments": {"names": [name]}})
            shown = details["structuredContent"]["tools"][0]
            original = next(t for t in sent[server]["tools"] if t["name"] == tool)
            assert {k: v for k, v in shown.items() if k in original and k != "name"} == \
                {k: v for k, v in original.items() if k != "name"}, name
        assert shown["_meta"] == {"com.example/ui": {"panel": "lookup", "width": 320}}
    finally:
        client.close()


STAMP = "io.modelcontextprotocol/serverInfo"


@pytest.mark.parametrize("era", ["legacy", MODERN])
def test_results_come_without_the_upstreams_stamp(indexed, era):
    cfg, _ = indexed
    for name in ("time", "sdk"):
        catalog = json.loads((cfg.parent / "catalogs" / f"{name}.json").read_text())
        assert catalog["protocolVersion"] == MODERN, f"{name} stamps its results in this revision"
    direct = Raw([sys.executable, str(FIXTURES / "sdk_server.py")], MODERN, {})
    try:
        assert STAMP in direct.result("prompts/get", {"name": "k8s-diagnose", "arguments": {"keyword": "web"}})["_meta"]
    finally:
        direct.close()
    client = meta_stdio(cfg, era)
    try:
        results = {
            "call_tool": client.result("tools/call", {"name": "call_tool", "arguments": {
                "name": "time__get_current_time", "arguments": {"timezone": "UTC"}}}),
            "own name": client.result("tools/call", {"name": "sdk__lookup", "arguments": {"key": "k"}}),
            "prompts/get": client.result("prompts/get", {"name": "sdk__k8s-diagnose", "arguments": {"keyword": "web"}}),
            "resources/read": client.result("resources/read", {"uri": "note://readme"}),
            "completion/complete": client.result("completion/complete", {
                "ref": {"type": "ref/prompt", "name": "sdk__k8s-diagnose"},
                "argument": {"name": "namespace", "value": "k"}}),
        }
        assert "kube-system" in results["completion/complete"]["completion"]["values"]
        assert results["own name"]["structuredContent"] == {"result": "k: found"}
        for what, result in results.items():
            assert STAMP not in result.get("_meta", {}), f"{what}: {result}"
    finally:
        client.close()


@pytest.mark.parametrize("era", ["legacy", MODERN])
def test_a_tool_called_by_its_own_name_answers_with_its_servers_own_error(indexed, era):
    """The fixture's `refuse` answers tools/call with a JSON-RPC error carrying data: a client
    that called the (alwaysLoad) tool by its name gets that error; through call_tool, the model
    reads it in an error result."""
    cfg, _ = indexed
    client = meta_stdio(cfg, era)
    try:
        reply = client.request("tools/call", {"name": "sdk__refuse", "arguments": {"reason": "too many"}})
        assert reply.get("error") == {"code": -32000, "message": "quota exceeded",
                                      "data": {"reason": "too many", "retryAfterSeconds": 30}}, reply
        result = client.result("tools/call", {"name": "call_tool", "arguments": {
            "name": "sdk__refuse", "arguments": {"reason": "too many"}}})
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert "quota exceeded" in text and "-32000" in text and '"retryAfterSeconds":30' in text, text
    finally:
        client.close()


def test_a_real_servers_error_for_a_tool_it_no_longer_has_reaches_the_client(tmp_path):
    """mcp-server-time answers a call of a tool it does not have with -32602. Its catalog names
    one more tool than it has now (as after an upgrade that dropped it; no freshness limit, so
    it is not listed again, and pinning off so the extra tool is not held)."""
    entry = {**server_entries(tmp_path)["time"], "alwaysLoad": True}
    cfg = write_config(tmp_path, {"time": entry}, trust="off")
    run_cli(cfg, "index")
    path = tmp_path / "catalogs" / "time.json"
    catalog = json.loads(path.read_text())
    catalog.pop("ttlMs", None)
    catalog["tools"].append({"name": "get_moon_phase", "description": "The moon's phase",
                             "inputSchema": {"type": "object"}})
    path.write_text(json.dumps(catalog))
    client = meta_stdio(cfg, "legacy")
    try:
        reply = client.request("tools/call", {"name": "time__get_moon_phase", "arguments": {}})
        assert reply.get("error") == {"code": -32602, "message": "Unknown tool: get_moon_phase"}, reply
    finally:
        client.close()


def test_what_upstreams_do_on_every_connection_is_said_once_in_words(tmp_path):
    """server-filesystem and server-everything ask for roots on every connection; without a
    `roots` key they are told there are none, which is no error to log. The fixture's
    resources/list fails on every listing. Over two connections each (idle stop between), the
    failure is said once, in words, and no error reaches the log in Rust's debug form."""
    entries = servers(tmp_path)
    failing = {**entries["sdk"], "env": {"SDK_FIXTURE_FAIL_RESOURCES": "1"}}
    cfg = write_config(tmp_path, {name: {**entry, "idleTimeoutSecs": 1} for name, entry in
                                  [("everything", entries["everything"]), ("filesystem", entries["filesystem"]),
                                   ("sdk", failing)]})
    env = {k: v for k, v in os.environ.items() if k != "META_SERVER_LOG"}
    log = tmp_path / "stderr.log"
    calls = [("everything__echo", {"message": "hi"}), ("filesystem__list_allowed_directories", {}),
             ("sdk__lookup", {"key": "k"})]
    with log.open("w") as stderr:
        client = Raw([str(BIN), "--config", str(cfg), "-v", "serve"], "legacy", {}, env, stderr)
        try:
            for round in range(2):
                for name, arguments in calls:
                    result = client.result("tools/call", {"name": "call_tool",
                                                          "arguments": {"name": name, "arguments": arguments}})
                    assert result.get("isError") is not True, result
                pid = meta_server_pid(cfg)
                wait_until(lambda: not children(pid), f"the upstreams to stop when idle (round {round})", limit=60)
        finally:
            client.close()
    text = log.read_text()
    assert "ErrorData" not in text and "ErrorCode(" not in text, text
    warned = [line for line in text.splitlines() if "WARN" in line and "roots" in line]
    assert not warned, warned
    failed = [line for line in text.splitlines() if "resources/list" in line and "WARN" in line]
    assert len(failed) == 1, text
    assert 'server "sdk"' in failed[0] and "the resource index is unavailable" in failed[0], failed


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_an_upstream_is_asked_for_progress_only_when_the_client_asked(tmp_path):
    """What meta-server sends server-everything, recorded on its way in: no request but the
    call whose client wants progress carries a progress token, and that call's progress
    reaches the client."""
    sent = tmp_path / "sent.jsonl"
    everything = server_entries(tmp_path)["everything"]
    command = " ".join([everything["command"], *everything["args"]])
    cfg = write_config(tmp_path, {"everything": {"command": "sh", "args": ["-c", f"tee -a '{sent}' | exec {command}"]}})
    progress = []

    async def on_progress(done, total, message):
        progress.append(done)
    async with meta_client(cfg, mode="legacy") as c:
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}})
        assert not r.is_error
        r = await c.call_tool("call_tool", {"name": "everything__trigger-long-running-operation",
                                            "arguments": {"duration": 1, "steps": 2}},
                              progress_callback=on_progress)
        assert not r.is_error
    assert progress, "the call that asked for progress got it"
    requests = [json.loads(line) for line in sent.read_text().splitlines() if line.strip()]
    requests = [m for m in requests if "method" in m and "id" in m]
    assert len(requests) > 3, requests
    for request in requests:
        meta = (request.get("params") or {}).get("_meta", {})
        wanted = request["method"] == "tools/call" and request["params"]["name"] == "trigger-long-running-operation"
        assert ("progressToken" in meta) == wanted, request
        assert not any(key.startswith("meta-server/") for key in meta), request
