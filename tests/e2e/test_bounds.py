"""What meta-server bounds per principal and per client (issue 38), over `serve --http` with
named tokens, in front of `examples/fault_server.rs` (no real server parks calls by the
dozen or floods its client with questions): the 2026-07-28 calls waiting for their client's
input (here, to confirm a destructive call, as the probe parked them) are a share per token,
so one token cannot take every place."""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, run_cli, write_config
from test_http import http_server, jsonrpc_of, post

FAULT = ROOT / "target" / "debug" / "examples" / "fault_server"
GREEDY = "greedy-token-5e0c1b2a"
OTHER = "other-token-9f3d7a61"
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One fault server, indexed; two named tokens that see it."""
    assert FAULT.exists(), f"{FAULT} is missing: cargo build --all-targets builds it"
    tmp = tmp_path_factory.mktemp("bounds")
    # Every call of the fault server asks its client to confirm it (its tools are destructive by
    # MCP's defaults): each waits for an answer that never comes.
    fault = {"command": str(FAULT), "policy": {"destructive": "confirm"}}
    cfg = write_config(tmp, {"fault": fault}, http={"tokens": [
        {"name": "greedy", "token": "${GREEDY_TOKEN}"},
        {"name": "other", "token": "${OTHER_TOKEN}"},
    ]})
    run_cli(cfg, "index")
    mp = pytest.MonkeyPatch()
    mp.setenv("GREEDY_TOKEN", GREEDY)
    mp.setenv("OTHER_TOKEN", OTHER)
    with http_server(cfg, token="unnamed-token-31c0de55") as (proc, url):
        yield url
    mp.undo()


def modern_call(url: str, token: str, rid: int, name: str, arguments: dict) -> dict:
    """One 2026-07-28 `call_tool` (a client that answers forms), its JSON-RPC reply; never
    retried, so a call that asks for input stays waiting in meta-server."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "call_tool", "arguments": {"name": name, "arguments": arguments},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientInfo": {"name": "bounds-test", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}}
    status, _, text = post(url, body, {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": MODERN,
                                       "Mcp-Method": "tools/call", "Mcp-Name": "call_tool"})
    assert status == 200, text
    return jsonrpc_of(text)


def parked(reply: dict) -> bool:
    return reply.get("result", {}).get("resultType") == "input_required"


def test_one_token_parks_its_share_of_waiting_calls_and_another_token_still_parks(served):
    url = served
    # Thirty-two calls that each ask one question and are never answered: the share of one token.
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda i: modern_call(url, GREEDY, 100 + i, "fault__echo",
                                                      {"text": "x" * 1000}), range(32)))
    assert all(parked(r) for r in replies), json.dumps(replies[0])[:500]
    refused = modern_call(url, GREEDY, 200, "fault__echo", {"text": "one more"})
    said = refused.get("error", {}).get("message", "")
    assert said.startswith('"greedy" already has 32 calls') and "the share of one principal (32 calls, 16 MiB)" in said, refused
    # The other token's call still waits for its own client.
    assert parked(modern_call(url, OTHER, 300, "fault__echo", {"text": "mine"})), "another token is not refused"
