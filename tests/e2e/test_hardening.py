"""What an adversarial probe found (issue 18), through the official Python SDK, which checks
every structured result against the tool's declared outputSchema and raises when it breaks it."""
import json
import os
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from conftest import BIN, ROOT, text_of, write_config

pytestmark = pytest.mark.anyio

# Codex keeps about 10 KiB of a result, so its session's budget is 2,500 tokens (about 10 KB).
CODEX = Implementation(name="codex-mcp-client", version="1.0")
BUDGET_BYTES = 2_500 * 4


@pytest.fixture
def anyio_backend():
    return "asyncio"


def shipped(tmp: Path) -> Path:
    servers = {name: {"command": f"/nonexistent/{name}"} for name in ("everything", "filesystem", "memory", "time")}
    return write_config(tmp, servers, catalogDir=str(ROOT / "catalogs"))


def size(result) -> int:
    return len(text_of(result)) + len(json.dumps(result.structured_content or {}))


async def test_huge_arguments_get_results_that_fit_and_keep_their_schema(tmp_path):
    params = StdioServerParameters(command=str(BIN), args=["--config", str(shipped(tmp_path)), "serve"],
                                   env={**os.environ})
    async with Client(params, client_info=CODEX) as c:
        # The SDK raises if structuredContent is missing or breaks the outputSchema.
        r = await c.call_tool("search_tools", {"query": "current time in a timezone " * 800, "limit": 50,
                                               "detail": "full"})
        assert not r.is_error and size(r) < 4 * BUDGET_BYTES
        assert len(r.structured_content["query"]) < 300, "what is echoed is capped"

        r = await c.call_tool("get_tool_details", {"names": ["x" * 1_000_000, "time__get_current_time"]})
        assert not r.is_error and size(r) < 4 * BUDGET_BYTES
        assert r.structured_content["notFound"][0]["name"].endswith("(1000000 characters)")

        r = await c.call_tool("call_tool", {"name": "y" * 1_000_000, "arguments": {}})
        assert r.is_error and len(text_of(r)) < BUDGET_BYTES

        r = await c.call_tool("call_tool", {"name": "time__get_current_time",
                                            "arguments": {"timezone": ["z" * 1_300_000]}})
        assert r.is_error and "timezone" in text_of(r) and len(text_of(r)) < BUDGET_BYTES


async def test_resources_read_errors_cap_the_uri_they_repeat(tmp_path):
    params = StdioServerParameters(command=str(BIN), args=["--config", str(shipped(tmp_path)), "serve"],
                                   env={**os.environ})
    async with Client(params, client_info=CODEX) as c:
        # A stored-result id, a URI of no kind meta-server serves, and a skill name: 100 KB each.
        for uri in ("meta-server://results/r-" + "a" * 100_000, "x:" + "y" * 100_000, "skill://" + "s" * 100_000):
            with pytest.raises(MCPError) as refused:
                await c.read_resource(uri)
            message = refused.value.message
            assert len(message) < 1_000, f"{len(message)} characters: {message[:300]}"
            assert " characters)" in message, message

