"""Result handling end to end: real servers send results far over budget; the client receives at
most the budget, a notice that parses, and recovery hints that rebuild the original exactly."""
import json
from pathlib import Path

import pytest

from conftest import children, meta_client, meta_server_pid, processes, run_cli, server_entries, text_of, write_config

pytestmark = pytest.mark.anyio

BUDGET = 4000
HEADER = "--- TRUNCATION NOTICE ---"
NOTICE_KEYS = ["isTruncated", "tool", "originalTokens", "returnedTokens", "returnedFraction", "boundary", "reason",
               "resourceId", "nextOffset", "recoveryHint"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def small_budget(tmp_path: Path) -> Path:
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"], "filesystem": entries["filesystem"]},
                       maxResultTokens=BUDGET)
    run_cli(cfg, "index")
    return cfg


def notices(result) -> list[dict]:
    found = []
    for block in result.content:
        if block.type == "text" and block.text.startswith(HEADER):
            notice = json.loads(block.text[len(HEADER):])
            assert list(notice) == NOTICE_KEYS, "same keys in the same order every time"
            found.append(notice)
    return found


async def follow(client, notice: dict) -> tuple[str, int]:
    """Runs the notice's recovery hint, then each page's continuation, until hasMore is false.
    Reads from offset 0 first, so the pages must rebuild the whole original."""
    hint = notice["recoveryHint"]
    assert hint.startswith("call_tool ")
    call = json.loads(hint[len("call_tool "):])
    assert call["arguments"]["offset"] == notice["nextOffset"]
    first = await client.call_tool("call_tool", call)
    assert not first.is_error, text_of(first)
    assert first.structured_content["offset"] == notice["nextOffset"]
    call["arguments"]["offset"] = 0
    parts, pages = [], 0
    while True:
        r = await client.call_tool("call_tool", call)
        assert not r.is_error, text_of(r)
        page = r.structured_content
        assert page["resourceId"] == notice["resourceId"] and page["offset"] == call["arguments"]["offset"]
        parts.append(page["content"])
        pages += 1
        if not page["hasMore"]:
            assert page["nextOffset"] == page["total"]
            return "".join(parts), pages
        assert page["nextOffset"] > page["offset"]
        call["arguments"]["offset"] = page["nextOffset"]


def meta_rss_peak_mb(cfg: Path) -> float:
    pid = meta_server_pid(cfg)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def test_three_megabyte_echo_is_cut_and_fully_recoverable(small_budget):
    message = "".join(f"Sentence {i} mentions item {i * 7}. " for i in range(80_000))
    async with meta_client(small_budget) as c:
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": message}})
        assert not r.is_error, text_of(r)[:500]
        [notice] = notices(r)
        assert notice["tool"] == "everything__echo" and notice["isTruncated"] is True
        assert notice["returnedTokens"] <= BUDGET < notice["originalTokens"]
        shown = r.content[0].text
        assert len(shown) <= BUDGET * 8, "the client gets about the budget, not megabytes"
        assert ("Echo: " + message).startswith(shown)
        assert shown.endswith(". ") or shown.endswith("."), f"cut at a sentence, got {shown[-40:]!r}"
        link = [b for b in r.content if b.type == "resource_link"][0]
        assert link.uri == f"meta-server://results/{notice['resourceId']}"

        whole, pages = await follow(c, notice)
        assert whole == "Echo: " + message
        assert pages > 10

        found = await c.call_tool("call_tool", {"name": "meta__search_full_content",
                                                "arguments": {"resource_id": notice["resourceId"], "pattern": "item 559993\\."}})
        [m] = found.structured_content["matches"]
        page = await c.call_tool("call_tool", {"name": "meta__lookup_full_content",
                                               "arguments": {"resource_id": notice["resourceId"], "offset": m["offset"], "limit": 20}})
        assert page.structured_content["content"].startswith("item 559993.")

        resource = await c.read_resource(link.uri)
        assert resource.contents[0].text == "Echo: " + message
        templates = await c.list_resource_templates()
        assert templates.resource_templates[0].uri_template == "meta-server://results/{resourceId}"

        # The built-in tools are found by search like any other tool.
        hits = (await c.call_tool("search_tools", {"query": "read the full content of a truncated result"})).structured_content["hits"]
        assert "meta__lookup_full_content" in [h["name"] for h in hits[:3]]


async def test_thirteen_megabyte_one_line_file_keeps_content_and_structured_consistent(small_budget, tmp_path):
    big = tmp_path / "one-line.txt"
    body = "".join(f"record-{i:07d}=" + "abcdefghij" * 3 + ";" for i in range(330_000))
    big.write_text(body)
    assert big.stat().st_size > 13_000_000 and "\n" not in body
    async with meta_client(small_budget) as c:
        r = await c.call_tool("call_tool", {"name": "filesystem__read_text_file", "arguments": {"path": str(big)}})
        assert not r.is_error, text_of(r)[:500]
        [notice] = notices(r)
        shown = r.content[0].text
        assert body.startswith(shown) and len(shown) < 100_000
        # server-filesystem repeats the text in structuredContent: both carry the same cut
        assert r.structured_content == {"content": shown}
        whole, _ = await follow(c, notice)
        assert whole == body
        assert meta_rss_peak_mb(small_budget) < 600, "peak memory stays bounded"


async def test_large_markdown_is_cut_at_a_section(small_budget, tmp_path):
    doc = tmp_path / "guide.md"
    sections = [f"## Section {i}\n\n" + f"Paragraph {i} explains step {i} in detail. " * 40 + "\n\n" for i in range(300)]
    text = "# Guide\n\n" + "".join(sections)
    doc.write_text(text)
    async with meta_client(small_budget) as c:
        r = await c.call_tool("call_tool", {"name": "filesystem__read_text_file", "arguments": {"path": str(doc)}})
        [notice] = notices(r)
        assert notice["boundary"] == "section"
        shown = r.content[0].text
        rest = text[len(shown):]
        assert rest.startswith("## Section "), "the next page starts at a heading"
        whole, _ = await follow(c, notice)
        assert whole == text


async def test_over_the_hard_limit_is_a_loud_error(tmp_path):
    entries = server_entries(tmp_path)
    cfg = write_config(tmp_path, {"everything": entries["everything"]}, maxResultTokens=500, hardResultTokens=2000)
    run_cli(cfg, "index")
    async with meta_client(cfg) as c:
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "word " * 20_000}})
        assert r.is_error
        msg = text_of(r)
        for needle in ("hard limit of 2000 tokens", "call_tool on server \"everything\"", "maxResultTokens", "Narrow"):
            assert needle in msg, msg
        assert notices(r) == []


async def test_expired_or_unknown_ids_get_clear_errors(small_budget):
    async with meta_client(small_budget) as c:
        unknown = "r-" + "0" * 32
        r = await c.call_tool("call_tool", {"name": "meta__lookup_full_content", "arguments": {"resource_id": unknown}})
        assert r.is_error and f"no stored result {unknown}" in text_of(r)
        r = await c.call_tool("call_tool", {"name": "meta__lookup_full_content", "arguments": {"resource_id": "x"}})
        assert r.is_error and "resource_id" in text_of(r)
