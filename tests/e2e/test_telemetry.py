"""OpenTelemetry traces of `serve --http`: meta-server exports OTLP/HTTP (protobuf) to a receiver
this test runs (decoding `ExportTraceServiceRequest` with the opentelemetry-proto package), in
front of server-everything over streamable HTTP behind a recording proxy. One call_tool is one
trace (the request span and its children); the upstream's HTTP request carries the same trace id
in `traceparent` (header and `_meta`); a client's `traceparent` in `_meta` becomes the parent;
no argument value reaches a span; spans still in the batch at SIGTERM are exported."""
import http.client
import json
import os
import signal
import subprocess
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

from conftest import BIN, everything_over, free_port, run_cli, wait_until, write_config
from test_http import sdk_client

pytestmark = pytest.mark.anyio

SECRET_ARGUMENT = "argument-value-7f3e1c"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def attributes(span) -> dict:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value if v.HasField("string_value") else (
            v.int_value if v.HasField("int_value") else v.bool_value if v.HasField("bool_value") else v.double_value)
    return out


@contextmanager
def otlp_receiver():
    """An OTLP/HTTP receiver on a loopback port: yields (endpoint, spans), spans a list of
    dicts (trace, id, parent, name, kind, attributes) appended as exports arrive."""
    spans: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path == "/v1/traces", self.path
            assert self.headers["Content-Type"] == "application/x-protobuf"
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                service = {kv.key: kv.value.string_value for kv in resource.resource.attributes}["service.name"]
                for scope in resource.scope_spans:
                    for s in scope.spans:
                        spans.append({"trace": s.trace_id.hex(), "id": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                                      "name": s.name, "kind": s.kind, "service": service,
                                      "status": s.status.code, "attributes": attributes(s)})
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", spans
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def recording_proxy(target_port: int):
    """A streaming HTTP proxy to 127.0.0.1:`target_port` that records every POST (its headers,
    lower-cased, and its JSON body); yields (port, posts)."""
    posts: list[tuple[dict, dict]] = []

    class Proxy(BaseHTTPRequestHandler):
        def relay(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            if self.command == "POST":
                posts.append(({k.lower(): v for k, v in self.headers.items()}, json.loads(body)))
            upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                while chunk := response.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:
                pass
            finally:
                upstream.close()

        do_GET = do_POST = do_DELETE = relay

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], posts
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def traced_server(cfg: Path, endpoint: str | None):
    """`serve --http` exporting to `endpoint` through OTEL_EXPORTER_OTLP_ENDPOINT (`None`: as
    the config says); the process is stopped (SIGTERM) and waited for on exit, so its last
    spans are exported by then."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "META_SERVER_TOKEN"}
    env["META_SERVER_LOG"] = "meta_server=info"
    if endpoint:
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="gateway-under-test")
    log = cfg.with_name("serve.log")
    with log.open("w") as stderr:
        proc = subprocess.Popen([str(BIN), "--config", str(cfg), "serve", "--http", f"127.0.0.1:{port}"],
                                env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    try:
        wait_until(lambda: "serving MCP at" in log.read_text() or proc.poll() is not None, "meta-server to start")
        assert proc.poll() is None, f"meta-server did not start: {log.read_text()}"
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        print(log.read_text())


@pytest.fixture
def traced(tmp_path):
    """server-everything over streamable HTTP behind the recording proxy, indexed, and
    meta-server serving it over HTTP with traces going to the receiver."""
    with everything_over("streamableHttp") as everything, recording_proxy(everything) as (proxy, posts), \
            otlp_receiver() as (endpoint, spans):
        cfg = write_config(tmp_path, {"everything": {"type": "http", "url": f"http://127.0.0.1:{proxy}/mcp"}})
        run_cli(cfg, "index")
        posts.clear()
        yield cfg, endpoint, spans, posts


def tree(spans: list[dict], root: dict) -> list[dict]:
    """`root` and every span below it."""
    found, frontier = [root], [root["id"]]
    while frontier:
        children = [s for s in spans if s["parent"] in frontier]
        found += children
        frontier = [s["id"] for s in children]
    return found


async def test_one_call_is_one_trace_carried_to_the_http_upstream(traced):
    cfg, endpoint, spans, posts = traced
    with traced_server(cfg, endpoint) as (proc, url):
        async with sdk_client(url, None, []) as c:
            r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": SECRET_ARGUMENT}})
            assert not r.is_error, r
    # Stopped: every span was exported by now (the batch is flushed at shutdown).
    calls = [s for s in spans if s["name"] == "tools/call everything__echo" and s["kind"] == 2]
    assert len(calls) == 1, [s["name"] for s in spans]
    request = calls[0]
    a = request["attributes"]
    assert (a["mcp.method.name"], a["gen_ai.tool.name"]) == ("tools/call", "call_tool")
    assert (a["meta_server.server"], a["meta_server.tool"], a["meta_server.outcome"]) == \
        ("everything", "everything__echo", "ok")
    assert request["parent"] == "" and request["service"] == "gateway-under-test"
    below = tree(spans, request)
    names = {s["name"] for s in below}
    assert {"tool.call", "trust.check", "policy.check", "upstream.connect", "tools/call echo", "result.fit"} <= names, names
    assert {s["trace"] for s in below} == {request["trace"]}
    assert {s["id"] for s in spans if s["trace"] == request["trace"]} == {s["id"] for s in below}, "one trace"
    upstream = next(s for s in below if s["name"] == "tools/call echo")
    assert upstream["kind"] == 3 and upstream["attributes"]["meta_server.server"] == "everything"  # CLIENT
    # The upstream's HTTP request carries the trace: header and _meta, the client span as parent.
    sent = [(h, b) for h, b in posts if b.get("method") == "tools/call"]
    assert len(sent) == 1, posts
    headers, body = sent[0]
    expected = f"00-{request['trace']}-{upstream['id']}-01"
    assert headers["traceparent"] == expected
    assert body["params"]["_meta"]["traceparent"] == expected
    # No argument value is exported.
    assert SECRET_ARGUMENT not in json.dumps(spans)


async def test_a_client_traceparent_in_meta_becomes_the_parent(traced):
    cfg, endpoint, spans, posts = traced
    with traced_server(cfg, endpoint) as (proc, url):
        async with sdk_client(url, None, []) as c:
            r = await c.call_tool("search_tools", {"query": "echo a message"},
                                  meta={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"})
            assert not r.is_error
            r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hi"}},
                                  meta={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"})
            assert not r.is_error
        # Exported in its batch while serving, before any shutdown.
        wait_until(lambda: any(s["name"] == "search" for s in spans), "the search span to be exported")
    search = next(s for s in spans if s["name"] == "tools/call search_tools")
    assert (search["trace"], search["parent"]) == (CLIENT_TRACE, CLIENT_SPAN)
    found = next(s for s in tree(spans, search) if s["name"] == "search")
    assert found["attributes"]["meta_server.search.mode"] in ("bm25", "hybrid")
    assert found["attributes"]["meta_server.search.hits"] > 0
    call = next(s for s in spans if s["name"] == "tools/call everything__echo")
    assert (call["trace"], call["parent"]) == (CLIENT_TRACE, CLIENT_SPAN)
    headers, _ = next((h, b) for h, b in posts if b.get("method") == "tools/call")
    assert headers["traceparent"].split("-")[1] == CLIENT_TRACE


async def test_the_config_block_exports_and_a_failed_call_says_so(traced):
    cfg, endpoint, spans, posts = traced
    config = json.loads(cfg.read_text())
    config["metaServer"]["telemetry"] = {"endpoint": endpoint, "serviceName": "from-config"}
    cfg.write_text(json.dumps(config))
    with traced_server(cfg, None) as (proc, url):
        async with sdk_client(url, None, []) as c:
            r = await c.call_tool("call_tool", {"name": "everything__no_such_tool", "arguments": {}})
            assert r.is_error
    call = next(s for s in spans if s["name"] == "tools/call everything__no_such_tool")
    assert call["attributes"]["meta_server.outcome"] == "error"
    assert call["attributes"]["error.type"] == "tool_error"
    assert call["status"] == 2  # STATUS_CODE_ERROR
    assert call["service"] == "from-config"


def test_a_bad_telemetry_block_stops_serve_naming_the_key(tmp_path):
    bad = write_config(tmp_path, {}, telemetry={"sampleRatio": 3})
    proc = run_cli(bad, "serve", "--http", "127.0.0.1:0", check=False)
    assert proc.returncode != 0 and "metaServer.telemetry.sampleRatio" in proc.stderr, proc.stderr
