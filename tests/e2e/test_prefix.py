"""`prefix: false`: a server's tools and prompts under their own names. The official Python SDK,
in both revisions, talks to meta-server in front of the real server-everything (alwaysLoad,
unprefixed) and the time server (prefixed); a clash of own names stops `serve` at start with
an error naming both."""
import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference

from conftest import BIN, meta_client, run_cli, server_entries, text_of, write_config

pytestmark = pytest.mark.anyio

META_TOOLS = ["search_tools", "get_tool_details", "call_tool"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def unprefixed(tmp_path: Path) -> Path:
    servers = server_entries(tmp_path)
    everything = {**servers["everything"], "alwaysLoad": True, "prefix": False}
    cfg = write_config(tmp_path, {"everything": everything, "time": servers["time"]})
    run_cli(cfg, "index")
    return cfg


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_tools_and_prompts_keep_their_own_names_and_answer_to_both(unprefixed, mode):
    catalog = json.loads((unprefixed.parent / "catalogs" / "everything.json").read_text())
    own_tools = sorted(t["name"] for t in catalog["tools"])
    own_prompts = [p["name"] for p in catalog["prompts"]]
    async with meta_client(unprefixed, mode=mode) as c:
        listed = [t.name for t in (await c.list_tools()).tools]
        assert listed[:3] == META_TOOLS and sorted(listed[3:]) == own_tools, listed
        assert "echo" in listed and not any("__" in name for name in listed)

        direct = await c.call_tool("echo", {"message": "hi"})
        assert text_of(direct) == "Echo: hi", text_of(direct)
        for name in ("echo", "everything__echo"):
            r = await c.call_tool("call_tool", {"name": name, "arguments": {"message": "hi"}})
            assert not r.is_error and text_of(r) == "Echo: hi", (name, text_of(r))
        r = await c.call_tool("call_tool", {"name": "get_current_time", "arguments": {"timezone": "UTC"}})
        assert r.is_error and "time__get_current_time" in text_of(r), "time keeps its prefix"
        r = await c.call_tool("call_tool", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
        assert not r.is_error and json.loads(text_of(r))["timezone"] == "UTC"

        r = await c.call_tool("get_tool_details", {"names": ["get-sum", "everything__get-sum"]})
        found = r.structured_content
        assert [t["name"] for t in found["tools"]] == ["everything__get-sum"] * 2, found
        assert found["notFound"] == []
        r = await c.call_tool("search_tools", {"query": "get-sum", "limit": 3})
        assert r.structured_content["hits"][0]["tool"] == "get-sum"

        prompts = [p.name for p in (await c.list_prompts()).prompts]
        assert prompts == own_prompts, prompts
        for name in ("args-prompt", "everything__args-prompt"):
            prompt = await c.get_prompt(name, {"city": "Paris"})
            assert prompt.messages[0].content.text == "What's weather in Paris?"
        ref = PromptReference(type="ref/prompt", name="completable-prompt")
        done = await c.complete(ref, {"name": "department", "value": "Eng"})
        assert done.completion.values == ["Engineering"]
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("time__nothing", {})
        assert unknown.value.error.code == -32602


async def test_own_names_that_clash_stop_serve_naming_both(tmp_path):
    time = server_entries(tmp_path)["time"]
    cfg = write_config(tmp_path, {"clock": {**time, "prefix": False}, "time": {**time, "prefix": False}})
    run_cli(cfg, "index")
    proc = subprocess.run([str(BIN), "--config", str(cfg), "serve"], input="", capture_output=True, text=True,
                          timeout=120, env={**os.environ, "META_SERVER_LOG": "meta_server=warn"})
    assert proc.returncode != 0
    assert 'tool "convert_time" of server "time" (prefix: false) has the name of tool "convert_time" of server "clock"' in proc.stderr, proc.stderr
    assert str(cfg) in proc.stderr and '"prefix": true on server "time"' in proc.stderr
    # One of them prefixed again: serve starts, and the own name goes to the unprefixed one.
    write_config(tmp_path, {"clock": {**time, "prefix": False}, "time": time})
    async with meta_client(cfg, mode="legacy") as c:
        for name in ("convert_time", "clock__convert_time", "time__convert_time"):
            r = await c.call_tool("get_tool_details", {"names": [name]})
            assert [t["server"] for t in r.structured_content["tools"]] == [name.split("__")[0] if "__" in name else "clock"]
