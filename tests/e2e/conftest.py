"""End-to-end tests: the official MCP Python SDK drives `meta-server serve` over stdio, with real
upstream servers installed by scripts/install-peers. No mocks."""
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("META_SERVER_PEERS", ROOT / ".peers"))
# Pictures tests take (the console's views), kept after the run and listed at its end.
SCREENSHOTS = ROOT / "target" / "e2e-screenshots"
_taken: list[Path] = []


def taken(picture: Path) -> None:
    """Lists `picture` in the run's summary."""
    _taken.append(picture)


def pytest_terminal_summary(terminalreporter):
    if _taken:
        terminalreporter.write_sep("-", "screenshots")
        for picture in _taken:
            terminalreporter.write_line(f"{picture} ({picture.stat().st_size:,} bytes)")


BIN = Path(os.environ.get("META_SERVER_BIN", ROOT / "target" / "debug" / "meta-server"))
NPM = PEERS / "npm" / "node_modules" / "@modelcontextprotocol"
# Search does not learn from use in the tests that do not test it: one test's calls must not
# move its later searches' rankings. test_learning.py turns it on.
os.environ.setdefault("META_SERVER_LEARNING", "off")


@pytest.fixture
def anyio_backend():
    """The async tests (marked anyio) run on asyncio."""
    return "asyncio"


def pytest_configure(config):
    needed = (BIN, NPM, PEERS / "py" / "bin" / "mcp-server-time", PEERS / "tools" / "node_modules" / ".bin" / "conformance",
              Path("/usr/bin/chromium"))
    missing = [p for p in needed if not p.exists()]
    if missing:
        pytest.exit(f"missing {', '.join(map(str, missing))}: run scripts/install-peers and cargo build", 2)


def server_entries(tmp: Path) -> dict:
    """The four reference servers, launched straight from the pinned installs."""
    return {
        "everything": {"command": "node", "args": [str(NPM / "server-everything" / "dist" / "index.js"), "stdio"]},
        "filesystem": {"command": "node", "args": [str(NPM / "server-filesystem" / "dist" / "index.js"), str(tmp)]},
        "memory": {
            "command": "node",
            "args": [str(NPM / "server-memory" / "dist" / "index.js")],
            "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
        },
        "time": {"command": str(PEERS / "py" / "bin" / "mcp-server-time"), "args": ["--local-timezone", "UTC"]},
    }


def write_config(tmp: Path, servers: dict, **meta) -> Path:
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps({"metaServer": {"catalogDir": "catalogs", **meta}, "mcpServers": servers}, indent=2))
    return cfg


def run_cli(cfg: Path, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN), "--config", str(cfg), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"meta-server {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, cmdline) for every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue
        out[int(entry.name)] = (ppid, cmd)
    return out


def meta_server_pid(cfg: Path) -> int:
    procs = processes()
    found = [pid for pid, (_, cmd) in procs.items() if str(cfg) in cmd and cmd.startswith(str(BIN))]
    # A child between fork and exec still shows meta-server's command line: not another one.
    found = [pid for pid in found if procs[pid][0] not in found]
    assert len(found) == 1, f"expected one meta-server for {cfg}, found {found}"
    return found[0]


def children(pid: int) -> list[int]:
    """Direct children of pid: the upstream servers meta-server started (its guardian,
    `meta-server __guard`, is not one)."""
    return sorted(p for p, (ppid, cmd) in processes().items() if ppid == pid and not cmd.endswith(" __guard"))


def descendants_of_config(tmp: Path) -> list[int]:
    """Any process whose command line mentions the test's temp dir (upstreams and meta-server)."""
    return sorted(p for p, (_, cmd) in processes().items() if str(tmp) in cmd)


def wait_until(predicate, what: str, limit: float = 30.0):
    """Polls an eventual condition; fails after `limit` seconds so a broken build cannot hang CI."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def meta_client(cfg: Path, mode: str = "auto", env: dict | None = None):
    env = {**os.environ, "META_SERVER_LOG": "meta_server=info", **(env or {})}
    params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"], env=env)
    async with Client(params, mode=mode) as client:
        yield client


def text_of(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def everything_over(transport: str):
    """server-everything over `streamableHttp` or the legacy `sse` transport on a loopback
    port; yields the port."""
    port = free_port()
    proc = subprocess.Popen(
        ["node", "--require", str(Path(__file__).with_name("loopback.cjs")),
         str(NPM / "server-everything" / "dist" / "index.js"), transport],
        env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    try:
        wait_until(listening, f"server-everything to listen ({transport})")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def everything_http():
    """server-everything over streamable HTTP on a loopback port; yields the port."""
    with everything_over("streamableHttp") as port:
        yield port


@pytest.fixture
def everything_sse():
    """server-everything over the legacy HTTP+SSE transport on a loopback port."""
    with everything_over("sse") as port:
        yield port


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    """A config of the four reference servers with catalogs already built by `meta-server index`."""
    (tmp_path / "notes.txt").write_text("hello from the filesystem server\n")
    cfg = write_config(tmp_path, server_entries(tmp_path))
    run_cli(cfg, "index")
    return cfg
