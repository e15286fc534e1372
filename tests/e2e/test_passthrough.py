"""Upstream prompts, resources and completions through meta-server: the official Python SDK, in
both protocol revisions over stdio and HTTP, lists server-everything's prompts, resources and templates
from its catalog with nothing started, then gets a prompt, reads a listed and a templated
resource and completes a prompt argument, all answered by the real server-everything."""
import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from conftest import PEERS, children, meta_client, meta_server_pid, run_cli, server_entries, write_config
from test_revisions import TRANSPORTS, client

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28"]
STATIC = "demo://resource/static/document/architecture.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def everything(tmp_path: Path) -> Path:
    """server-everything (prompts, resources, templates, completions) and the time server,
    indexed first."""
    servers = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": servers["everything"], "time": servers["time"]})
    run_cli(cfg, "index")
    return cfg


def test_index_records_prompts_resources_and_templates(everything):
    catalog = json.loads((everything.parent / "catalogs" / "everything.json").read_text())
    assert "args-prompt" in [p["name"] for p in catalog["prompts"]]
    assert STATIC in [r["uri"] for r in catalog["resources"]]
    assert TEXT_TEMPLATE in [t["uriTemplate"] for t in catalog["resourceTemplates"]]
    time = json.loads((everything.parent / "catalogs" / "time.json").read_text())
    assert (time["prompts"], time["resources"], time["resourceTemplates"]) == ([], [], [])


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_lists_come_from_the_catalog_with_nothing_started(everything, transport, mode):
    async with client(everything, transport, mode) as c:
        prompts = await c.list_prompts()
        # After a first answer: a 2026-07-28 client over stdio sends nothing before its first
        # request, so until then the process may not have exec'd meta-server yet.
        me = meta_server_pid(everything)
        names = [p.name for p in prompts.prompts]
        assert names == ["everything__simple-prompt", "everything__args-prompt",
                         "everything__completable-prompt", "everything__resource-prompt"]
        args = prompts.prompts[1].arguments
        assert [(a.name, a.required) for a in args] == [("city", True), ("state", False)]
        resources = await c.list_resources()
        uris = [r.uri for r in resources.resources if not r.uri.startswith("skill://")]
        assert STATIC in uris and len(uris) == 7, uris
        templates = await c.list_resource_templates()
        listed = [t.uri_template for t in templates.resource_templates]
        assert listed[0] == "meta-server://results/{resourceId}", "meta-server's own stays listed"
        assert TEXT_TEMPLATE in listed and "demo://resource/dynamic/blob/{resourceId}" in listed
        if mode != "legacy":
            # The shortest idleTimeoutSecs (300 s by default), bounded by the servers' own ttlMs:
            # time, spoken to at 2026-07-28, gives its tool list ttlMs 0 (see passthrough::list_ttl).
            assert json.loads((everything.parent / "catalogs" / "time.json").read_text())["ttlMs"] == 0
            for listing in (prompts, resources, templates):
                assert (listing.ttl_ms, listing.cache_scope) == (0, "public")
        assert children(me) == [], "listing starts no upstream"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_prompts_resources_and_completions_reach_the_real_server(everything, transport, mode):
    async with client(everything, transport, mode) as c:
        assert (await c.list_prompts()).prompts, "an answer first (see above)"
        me = meta_server_pid(everything)
        assert children(me) == []
        prompt = await c.get_prompt("everything__args-prompt", {"city": "Paris", "state": "Texas"})
        assert prompt.messages[0].content.text == "What's weather in Paris, Texas?"
        assert len(children(me)) == 1, "the first use starts the server"

        read = await c.read_resource(STATIC)
        assert read.contents[0].text.startswith("# Everything Server")
        assert read.contents[0].mime_type == "text/markdown"
        templated = await c.read_resource("demo://resource/dynamic/text/42")
        assert templated.contents[0].uri == "demo://resource/dynamic/text/42"
        assert templated.contents[0].text.startswith("Resource 42: This is a plaintext resource")

        ref = PromptReference(type="ref/prompt", name="everything__completable-prompt")
        done = await c.complete(ref, {"name": "department", "value": "Eng"})
        assert done.completion.values == ["Engineering"]
        done = await c.complete(ref, {"name": "name", "value": ""}, context_arguments={"department": "Engineering"})
        assert done.completion.values == ["Alice", "Bob", "Charlie"]
        template = ResourceTemplateReference(type="ref/resource", uri=TEXT_TEMPLATE)
        done = await c.complete(template, {"name": "resourceId", "value": "1"})
        assert done.completion.values == ["1"]
        assert len(children(me)) == 1, "all on the one connection tool calls use"


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_prompts_and_uris_and_upstream_refusals_are_clear_errors(everything, mode):
    async with meta_client(everything, mode=mode) as c:
        with pytest.raises(MCPError) as unknown:
            await c.get_prompt("everything__no-such-prompt", {})
        me = meta_server_pid(everything)
        assert unknown.value.error.code == -32602
        assert "prompts/list" in unknown.value.error.message
        with pytest.raises(MCPError) as unknown:
            await c.complete(PromptReference(type="ref/prompt", name="simple-prompt"), {"name": "x", "value": ""})
        assert unknown.value.error.code == -32602, "prompts are known by their qualified names only"
        with pytest.raises(MCPError) as missing:
            await c.read_resource("demo://resource/elsewhere/1")
        # -32002 is 2025-11-25's resource-not-found; 2026-07-28 makes it -32602.
        assert missing.value.error.code == (-32002 if mode == "legacy" else -32602)
        assert "resources/list" in missing.value.error.message
        assert missing.value.error.data == {"uri": "demo://resource/elsewhere/1"}, "SEP-2164"
        assert children(me) == [], "nothing is started for what no server offers"

        with pytest.raises(MCPError) as refused:
            await c.get_prompt("everything__resource-prompt", {"resourceType": "Video", "resourceId": "1"})
        assert refused.value.error.code == -32603, "server-everything's own code for it"
        assert 'server "everything"' in refused.value.error.message
        assert "Invalid resourceType" in refused.value.error.message
        prompt = await c.get_prompt("everything__simple-prompt", {})
        assert prompt.messages[0].content.text == "This is a simple prompt without arguments."


async def test_an_upstream_that_cannot_start_is_named_in_the_error(tmp_path):
    servers = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": servers["everything"]})
    run_cli(cfg, "index")
    broken = {"everything": {**servers["everything"], "command": str(PEERS / "no-such-node")}}
    # The catalog stays usable; only launching is broken (the config fingerprint differs, so a
    # start would re-list it, which fails the same way).
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "mcpServers": broken}))
    async with meta_client(cfg, mode="legacy") as c:
        assert "everything__simple-prompt" in [p.name for p in (await c.list_prompts()).prompts]
        with pytest.raises(MCPError) as failed:
            await c.get_prompt("everything__simple-prompt", {})
        assert failed.value.error.code == -32603
        assert 'server "everything"' in failed.value.error.message
        assert "install it or give its full path" in failed.value.error.message


async def test_a_server_without_a_catalog_is_listed_before_its_prompt_is_got(tmp_path):
    servers = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": servers["everything"]})
    async with meta_client(cfg, mode="legacy") as c:
        prompt = await c.get_prompt("everything__args-prompt", {"city": "Oslo"})
        assert prompt.messages[0].content.text == "What's weather in Oslo?"
    catalog = json.loads((tmp_path / "catalogs" / "everything.json").read_text())
    assert "args-prompt" in [p["name"] for p in catalog["prompts"]], "and its catalog is written"


async def test_a_disabled_server_offers_nothing(everything):
    config = json.loads(everything.read_text())
    config["mcpServers"]["everything"]["disabled"] = True
    everything.write_text(json.dumps(config))
    async with meta_client(everything, mode="legacy") as c:
        assert (await c.list_prompts()).prompts == []
        assert not [r.uri for r in (await c.list_resources()).resources if not r.uri.startswith("skill://")]
        with pytest.raises(MCPError) as unknown:
            await c.get_prompt("everything__simple-prompt", {})
        assert unknown.value.error.code == -32602
        with pytest.raises(MCPError):
            await c.read_resource(STATIC)
        assert children(meta_server_pid(everything)) == []
