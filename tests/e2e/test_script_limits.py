"""Code Mode limits that hold (issue 32: H1, H2, M4, L17): the probe's repros run against the
real binary, over stdio through the official Python SDK and over HTTP with plain requests.

Each script that should stop gets its reply within about a second of its limit, and the
server's CPU goes quiet afterwards (the script really stopped, not just its reply). Memory is
measured in the bench (/tmp/bench-script.md); here only a loose guard on the peak."""
import asyncio
import http.client
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BIN, free_port, meta_client, meta_server_pid, run_cli, server_entries, text_of, write_config

pytestmark = pytest.mark.anyio

SCRIPT = "meta__run_script"
FLOODS = {
    "queueMicrotask": "const f = () => { queueMicrotask(f); queueMicrotask(f); }; f(); await new Promise(() => {});",
    "then": "const f = () => { Promise.resolve().then(f); Promise.resolve().then(f); }; f(); await new Promise(() => {});",
}
# A flood whose queue grows slowly (one job in a hundred queues two): it stays far from the
# memory limit for minutes, and an interrupt that ends one of its jobs does not end it.
STEADY = ("const f = () => { queueMicrotask(f); if (Math.random() < 0.01) queueMicrotask(f); }; f(); "
          "await new Promise(() => {});")
# A script that waits forever without using the CPU.
WAITS = "await new Promise(() => {});"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """The four reference servers, indexed once for this module."""
    tmp = tmp_path_factory.mktemp("script-limits")
    cfg = write_config(tmp, server_entries(tmp))
    run_cli(cfg, "index")
    return cfg


async def run_script(client, code: str, **args):
    return await client.call_tool("call_tool", {"name": SCRIPT, "arguments": {"code": code, **args}})


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def goes_quiet(pid: int, within: float = 10.0, window: float = 1.0) -> float:
    """Waits until the process uses under a fifth of a core over `window`; returns how long."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < 0.2 * window:
            return time.monotonic() - started
    raise AssertionError(f"the server still computes {within} s later")


async def still_works(client):
    r = await run_script(client, 'return (await tools.call("everything__echo", {message: "again"}));')
    assert not r.is_error, text_of(r)
    assert r.structured_content["result"] == "Echo: again"


async def test_microtask_floods_stop_at_the_time_limit(indexed):
    """H1: with timeout_ms 1000 these had no reply after 600 s and kept a core busy. (The queue
    doubles with each round: the memory limit may come first.)"""
    async with meta_client(indexed) as c:
        pid = meta_server_pid(indexed)
        for name, code in FLOODS.items():
            started = time.monotonic()
            r = await run_script(c, code, timeout_ms=1000)
            took = time.monotonic() - started
            error = r.structured_content["error"] if r.is_error else ""
            assert "time limit of 1000 ms" in error or "out of memory (limit 64 MiB)" in error, f"{name}: {text_of(r)}"
            assert took < 3.0, f"{name}: replied after {took:.1f} s"
            goes_quiet(pid)
        await still_works(c)


async def test_client_cancellation_stops_a_flood(indexed):
    """H1: the client's notifications/cancelled stops a script that never yields to the run."""
    async with meta_client(indexed) as c:
        pid = meta_server_pid(indexed)
        call = asyncio.create_task(run_script(c, STEADY, timeout_ms=120_000))
        await asyncio.sleep(1.5)  # the script is flooding by now
        before = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        assert cpu_seconds(pid) - before > 0.5, "the script floods"
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            pass
        assert goes_quiet(pid, within=5.0) < 5.0
        await still_works(c)


HEAVY = {
    "console.log of 20 MB": "const o = 'q'.repeat(20e6); for (;;) console.log(o);",
    "JSON.parse": "const t = JSON.stringify(Array.from({length: 1e5}, (_, i) => ({i, s: 'x' + i}))); "
                  "for (;;) { try { JSON.parse(t); } catch (e) {} }",
}


async def test_heavy_builtins_stop_near_the_time_limit(indexed):
    """M4: the console.log loop replied after 194 s against 1000 ms, a JSON.parse loop after 75 s."""
    async with meta_client(indexed) as c:
        pid = meta_server_pid(indexed)
        for name, code in HEAVY.items():
            started = time.monotonic()
            r = await run_script(c, code, timeout_ms=1000)
            took = time.monotonic() - started
            assert r.is_error and "time limit of 1000 ms" in r.structured_content["error"], f"{name}: {text_of(r)}"
            assert took < 3.0, f"{name}: replied after {took:.1f} s"
            goes_quiet(pid)
        await still_works(c)


async def test_host_side_memory_and_lookups_are_bounded(indexed):
    """H2: 3,000 searches of a 1 MB query reached 3.0 GB; 300 calls with 8 MB arguments reached
    4.6 GB and replied at 43 s against a 15 s limit."""
    async with meta_client(indexed) as c:
        pid = meta_server_pid(indexed)
        started = time.monotonic()
        r = await run_script(c, "const q = 'read '.repeat(209716); for (let i = 0; i < 3000; i++) tools.search(q); "
                                "await new Promise(() => {});", timeout_ms=15_000)
        assert r.is_error, text_of(r)
        error = r.structured_content["error"]
        assert "out of memory on the host side (limit 32 MiB" in error, error
        assert time.monotonic() - started < 5.0
        # Small queries meet the lookup limit instead; a caught error does not lift it.
        r = await run_script(c, "for (let i = 0; ; i++) { try { await tools.describe('nope__' + i); } catch (e) {} }",
                             timeout_ms=15_000)
        assert r.is_error, text_of(r)
        error = r.structured_content["error"]
        assert "more than 100 tools.search and tools.describe requests" in error, error

        started = time.monotonic()
        r = await run_script(c, "const big = 'x'.repeat(8e6); for (let i = 0; i < 300; i++) "
                                "tools.call('everything__echo', {message: big}); await new Promise(() => {});",
                             timeout_ms=15_000, max_calls=1000)
        assert r.is_error, text_of(r)
        error = r.structured_content["error"]
        assert "out of memory on the host side (limit 32 MiB" in error, error
        assert time.monotonic() - started < 5.0, "stopped at the budget, not at the time limit"
        # A loose guard: the probe saw 3-4.6 GB; the bench records the real peak.
        assert peak_rss_mb(pid) < 1024, f"peak RSS {peak_rss_mb(pid):.0f} MB"
        await still_works(c)


async def test_scripts_running_at_once_are_capped(indexed):
    """H2: 60 scripts of 52 MB each at once reached 3.2 GB. Four run at once in a process; a
    fifth waits two seconds for a slot, then is refused with a message saying so."""
    async with meta_client(indexed) as c:
        code = "const keep = 'x'.repeat(52e6); await new Promise(() => {});"
        results = await asyncio.gather(*(run_script(c, code, timeout_ms=6000) for _ in range(6)))
        errors = [r.structured_content["error"] for r in results]
        busy = [e for e in errors if "scripts are already running in this server" in e]
        timed_out = [e for e in errors if "time limit of 6000 ms" in e]
        assert len(busy) == 2 and len(timed_out) == 4, errors
        await still_works(c)


async def test_call_records_keep_capped_tool_names(indexed):
    """L17: a 64 KB tool name was kept whole in the call record and pushed the result over the
    hard limit."""
    async with meta_client(indexed) as c:
        r = await run_script(c, "for (let i = 0; i < 5; i++) { try { await tools.call('x'.repeat(65536) + i, {}); } "
                                "catch (e) {} } return 'done';")
        assert not r.is_error, text_of(r)[:500]
        out = r.structured_content
        assert out["result"] == "done"
        names = [call["name"] for call in out["calls"]]
        assert len(names) == 5 and all(len(n) < 300 for n in names), [len(n) for n in names]
        assert names[0].startswith("x" * 200) and names[0].endswith("… (65537 characters)")
        assert len(text_of(r)) < 10_000


# Over HTTP, with plain requests: a session whose end must stop its script, and the cap of
# scripts per principal.

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def request(port: int, method: str, body: dict | None, headers: dict | None = None, timeout: float = 30.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, "/mcp", body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                          **(headers or {})})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, text


def open_session(port: int) -> dict:
    status, h, text = request(port, "POST", INIT)
    assert status == 200, text
    headers = {"Mcp-Session-Id": h["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    status, _, _ = request(port, "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    assert status == 202
    return headers


def script_call(port: int, headers: dict, code: str, timeout_ms: int, id: int = 2) -> str:
    body = {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"name": SCRIPT, "arguments": {"code": code,
                                                                                       "timeout_ms": timeout_ms}}}}
    try:
        return request(port, "POST", body, headers, timeout=timeout_ms / 1000 + 30)[2]
    except (OSError, http.client.HTTPException) as e:
        return f"connection ended: {e}"


def http_meta_server(cfg: Path):
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if k != "META_SERVER_TOKEN"}, "META_SERVER_LOG": "meta_server=info"}
    proc = subprocess.Popen([str(BIN), "--config", str(cfg), "serve", "--http", f"127.0.0.1:{port}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "serving MCP at" in line, line
    # Keep reading stderr so the server never blocks on a full pipe.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, port


def test_session_end_stops_a_running_script(indexed):
    """H1: an HTTP DELETE of the session did not stop a flooding script."""
    proc, port = http_meta_server(indexed)
    try:
        headers = open_session(port)
        caller = threading.Thread(target=script_call, args=(port, headers, STEADY, 120_000), daemon=True)
        caller.start()
        time.sleep(1.5)
        before = cpu_seconds(proc.pid)
        time.sleep(1.0)
        assert cpu_seconds(proc.pid) - before > 0.5, "the script floods"
        status, _, text = request(port, "DELETE", None, headers)
        assert status in (200, 202, 204), (status, text)
        # rmcp lets a closed session's handlers finish for up to 5 s, then cancels them.
        assert goes_quiet(proc.pid, within=10.0) < 10.0
        caller.join(timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)


def test_scripts_of_one_principal_are_capped_over_http(indexed):
    """H2: over HTTP one principal (here the anonymous one) runs at most 3 scripts at once,
    leaving a slot of the process's 4 for others."""
    proc, port = http_meta_server(indexed)
    try:
        sessions = [open_session(port) for _ in range(4)]
        results = [None] * 4

        def call(i):
            results[i] = script_call(port, sessions[i], WAITS, 5000, id=10 + i)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        refused = [r for r in results if "of your scripts are already running" in r]
        timed_out = [r for r in results if "time limit of 5000 ms" in r]
        assert len(refused) == 1 and len(timed_out) == 3, results
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
