"""Skills: found by search_tools, their instructions returned by get_tool_details / call_tool,
which also start the servers they declare before any of their tools is called."""
import json
from pathlib import Path

import pytest

from conftest import (ROOT, children, meta_client, meta_server_pid, processes, run_cli, server_entries, text_of,
                      wait_until, write_config)

pytestmark = pytest.mark.anyio
SKILLS = ROOT / "tests" / "fixtures" / "skills"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def skills_config(tmp_path: Path) -> Path:
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"time": entries["time"], "memory": entries["memory"]}, skillsDirs=[str(SKILLS)])
    run_cli(cfg, "index")
    return cfg


def running_time_server(pid: int) -> bool:
    return any("mcp-server-time" in processes()[p][1] for p in children(pid) if p in processes())


async def test_reading_a_skill_starts_its_servers_before_any_call(skills_config):
    async with meta_client(skills_config) as c:
        me = meta_server_pid(skills_config)
        r = await c.call_tool("search_tools", {"query": "plan a meeting across time zones"})
        hit = r.structured_content["hits"][0]
        assert hit["name"] == "skill__time-helper" and hit["kind"] == "skill", r.structured_content
        assert children(me) == []

        before = [h["name"] for h in (await c.call_tool("search_tools", {"query": "entities at a time"})).structured_content["hits"]]
        r = await c.call_tool("get_tool_details", {"names": ["skill__time-helper"]})
        [skill] = r.structured_content["tools"]
        assert skill["kind"] == "skill" and skill["servers"] == ["time"] and skill["missingServers"] == []
        assert "time__convert_time" in skill["instructions"]
        wait_until(lambda: running_time_server(me), "the skill's server to start")
        assert len(children(me)) == 1, "only the declared server starts"

        after = [h["name"] for h in (await c.call_tool("search_tools", {"query": "entities at a time"})).structured_content["hits"]]
        first_time_tool = lambda names: min(i for i, n in enumerate(names) if n.startswith("time__"))
        assert first_time_tool(after) <= first_time_tool(before)
        assert after[0].startswith("time__"), f"time tools rank higher now: {after}"


async def test_skill_with_unconfigured_servers_says_so(skills_config):
    async with meta_client(skills_config) as c:
        r = await c.call_tool("call_tool", {"name": "skill__github-triage", "arguments": {}})
        assert not r.is_error
        text = text_of(r)
        assert "Label every new issue" in text
        assert "not configured: github" in text and str(skills_config) in text
        assert r.structured_content["missingServers"] == ["github"]


async def test_skills_are_resources(skills_config):
    async with meta_client(skills_config) as c:
        listed = await c.list_resources()
        uris = [str(r.uri) for r in listed.resources]
        # The skills first, then the upstreams' resources (server-memory has one).
        memory = json.loads((skills_config.parent / "catalogs" / "memory.json").read_text())
        assert uris == ["skill://github-triage", "skill://time-helper", *[r["uri"] for r in memory["resources"]]]
        body = await c.read_resource("skill://time-helper")
        assert body.contents[0].text == (SKILLS / "time-helper" / "SKILL.md").read_text()
