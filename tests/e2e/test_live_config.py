"""Servers come and go: `meta-server add|remove|get|list` edit and read a commented config
(every other byte kept), with real servers: mcp-server-time over stdio and server-everything
over streamable HTTP."""
import json
from pathlib import Path

from conftest import PEERS, run_cli

TIME = [str(PEERS / "py" / "bin" / "mcp-server-time"), "--local-timezone", "UTC"]

# A config as a person writes it: comments, trailing commas, their own layout.
COMMENTED = """// meta-server's servers
{
  "metaServer": {
    "catalogDir": "catalogs", // beside this file
  },
  /* the servers */
  "mcpServers": {
  },
}
"""


def listing(cfg: Path) -> dict:
    return json.loads(run_cli(cfg, "list", "--json").stdout)


def test_add_list_get_remove_on_a_commented_config(tmp_path, everything_http):
    cfg = tmp_path / "config.json"
    cfg.write_text(COMMENTED)
    added = run_cli(cfg, "add", "time", "--", *TIME)
    assert 'added server "time" (stdio)' in added.stdout
    assert "2 tools" in added.stdout, added.stdout
    after_time = cfg.read_text()
    url = f"http://127.0.0.1:{everything_http}/mcp"
    added = run_cli(cfg, "add", "everything", url, "-H", "X-Team: docs")
    assert 'added server "everything" (http)' in added.stdout, added.stdout
    text = cfg.read_text()
    for kept in ("// meta-server's servers", '"catalogDir": "catalogs", // beside this file', "/* the servers */"):
        assert kept in text, text

    servers = {s["key"]: s for s in listing(cfg)["servers"]}
    assert set(servers) == {"time", "everything"}
    assert servers["time"]["transport"] == "stdio" and servers["time"]["state"] == "indexed"
    assert servers["time"]["tools"] == 2
    assert servers["everything"]["transport"] == "http" and servers["everything"]["state"] == "indexed"
    assert servers["everything"]["tools"] >= 10 and servers["everything"]["prompts"] >= 1
    assert servers["everything"]["target"] == url
    assert servers["everything"]["refreshedAt"] and servers["everything"]["revision"]

    got = run_cli(cfg, "get", "everything").stdout
    assert f"url:         {url}" in got and "headers:     X-Team" in got and "state:       indexed" in got, got
    assert json.loads(run_cli(cfg, "get", "time", "--json").stdout)["tools"] == 2

    table = run_cli(cfg, "list").stdout.splitlines()
    assert table[0].split() == ["server", "transport", "state", "tools", "refreshed", "revision", "quarantined"]
    assert table[1].split()[:4] == ["everything", "http", "indexed", str(servers["everything"]["tools"])]

    removed = run_cli(cfg, "remove", "everything")
    assert "deleted" in removed.stdout and "everything.json" in removed.stdout, removed.stdout
    assert cfg.read_text() == after_time, "removing gives back the file as it was, byte for byte"
    assert not (tmp_path / "catalogs" / "everything.json").exists()
    assert [s["key"] for s in listing(cfg)["servers"]] == ["time"]


def test_refusals_leave_the_config_alone(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(COMMENTED)
    run_cli(cfg, "add", "--no-index", "time", "--", *TIME)
    before = cfg.read_bytes()
    again = run_cli(cfg, "add", "time", "--", *TIME, check=False)
    assert again.returncode == 1 and "--force" in again.stderr, again.stderr
    bad = run_cli(cfg, "add", "a__b", "x", check=False)
    assert bad.returncode == 1 and '"__"' in bad.stderr, bad.stderr
    gone = run_cli(cfg, "remove", "nothing", check=False)
    assert gone.returncode == 1 and "configured: time" in gone.stderr, gone.stderr
    assert cfg.read_bytes() == before
    state = listing(cfg)["servers"][0]
    assert (state["key"], state["state"], state["tools"]) == ("time", "not-indexed", None)
    # A server that cannot start is added, said to fail, and listed as failing with the reason.
    failing = run_cli(cfg, "add", "broken", str(tmp_path / "no-such-server"), check=False)
    assert failing.returncode == 2 and "not indexed" in failing.stdout, failing.stdout
    broken = next(s for s in listing(cfg)["servers"] if s["key"] == "broken")
    assert broken["state"] == "failing" and "not found" in broken["reason"], broken
