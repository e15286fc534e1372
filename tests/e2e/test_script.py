"""Code Mode end to end: `meta__run_script` driven by the official Python SDK through call_tool,
its nested calls going to the real reference servers. Each limit ends the script with an error
result, and the same session keeps working afterwards."""
import asyncio
import json

import pytest

from conftest import meta_client, run_cli, server_entries, text_of, write_config

pytestmark = pytest.mark.anyio

SCRIPT = "meta__run_script"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """The four reference servers, indexed once for this module; filesystem serves its dir."""
    tmp = tmp_path_factory.mktemp("script")
    cfg = write_config(tmp, server_entries(tmp))
    run_cli(cfg, "index")
    return cfg


async def run_script(client, code: str, progress=None, **args):
    return await client.call_tool("call_tool", {"name": SCRIPT, "arguments": {"code": code, **args}},
                                  progress_callback=progress)


async def still_works(client):
    """A plain call and a fresh script both succeed."""
    r = await client.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "after"}})
    assert not r.is_error and text_of(r) == "Echo: after"
    r = await run_script(client, 'return (await tools.call("everything__echo", {message: "again"}));')
    assert not r.is_error, text_of(r)
    assert r.structured_content["result"] == "Echo: again"


async def test_fan_out_over_four_real_servers(indexed):
    paths = []
    for i in range(20):
        p = indexed.parent / f"file-{i:02d}.txt"
        p.write_text("line\n" * (i * 37 % 23 + 1))
        paths.append(str(p))
    async with meta_client(indexed) as c:
        hits = (await c.call_tool("search_tools", {"query": "run a script that calls many tools"})).structured_content
        assert SCRIPT in [h["name"] for h in hits["hits"][:3]]

        r = await c.call_tool("call_tool", {"name": "memory__create_entities", "arguments": {"entities": [
            {"name": "Ada", "entityType": "person", "observations": ["timezone Europe/London"]},
            {"name": "Grace", "entityType": "person", "observations": ["timezone America/New_York"]},
        ]}})
        assert not r.is_error, text_of(r)

        updates = []

        async def progress(value, total, message):
            updates.append((value, message))

        code = """
        const files = await Promise.all(input.paths.map(async (path) => {
          const r = await tools.call("filesystem__read_text_file", {path});
          return {path: path.split("/").pop(), size: r.content.length};
        }));
        files.sort((a, b) => b.size - a.size || a.path.localeCompare(b.path));
        const sums = await Promise.all(Array.from({length: 20}, (_, i) =>
          tools.call("everything__get-sum", {a: i, b: 1})));
        const total = sums.map((s) => Number(String(s).match(/(-?\\d+)\\D*$/)[1])).reduce((x, y) => x + y, 0);
        const graph = await tools.call("memory__search_nodes", {query: "person"});
        const people = [];
        for (const e of graph.entities) {
          const zone = e.observations.find((o) => o.startsWith("timezone ")).slice(9);
          const now = await tools.call("time__get_current_time", {timezone: zone});
          people.push({name: e.name, timezone: now.timezone, hasTime: /T\\d\\d:/.test(now.datetime)});
        }
        console.log("read", files.length, "files");
        return {largest: files.slice(0, 3), total, people};
        """
        r = await run_script(c, code, progress=progress, input={"paths": paths}, max_calls=100)
        assert not r.is_error, text_of(r)
        out = r.structured_content
        sizes = sorted(((len(open(p).read()), p.rsplit("/", 1)[1]) for p in paths), key=lambda s: (-s[0], s[1]))
        assert out["result"]["largest"] == [{"path": name, "size": size} for size, name in sizes[:3]]
        assert out["result"]["total"] == sum(i + 1 for i in range(20))
        assert sorted(out["result"]["people"], key=lambda p: p["name"]) == [
            {"name": "Ada", "timezone": "Europe/London", "hasTime": True},
            {"name": "Grace", "timezone": "America/New_York", "hasTime": True},
        ]
        assert out["logs"] == ["read 20 files"]
        names = [call["name"] for call in out["calls"]]
        assert names.count("filesystem__read_text_file") == 20 and names.count("everything__get-sum") == 20
        assert names[-3:] == ["memory__search_nodes", "time__get_current_time", "time__get_current_time"]
        assert all(call["ok"] and call["ms"] >= 0 for call in out["calls"])
        # The compact text twin carries the same answer.
        assert json.loads(text_of(r).split("\n[logs]")[0]) == out["result"]
        # One progress notification per nested call as it starts, counting up.
        assert [v for v, _ in updates] == list(range(1, 44))
        assert sorted(m for _, m in updates) == sorted("calling " + n for n in names)


async def test_upstream_errors_are_caught_by_the_script(indexed):
    async with meta_client(indexed) as c:
        code = """
        const out = {};
        for (const [key, name, args] of [
          ["missing", "filesystem__read_text_file", {path: input.missing}],
          ["invalid", "everything__get-sum", {a: "one"}],
          ["unknown", "everything__ecko", {message: "x"}],
          ["nested", "meta__run_script", {code: "return 1"}],
          ["meta", "call_tool", {}],
        ]) {
          try { await tools.call(name, args); out[key] = "no error"; }
          catch (e) { out[key] = {tool: e.tool, message: e.message}; }
        }
        out.after = await tools.call("everything__echo", {message: "fine"});
        return out;
        """
        r = await run_script(c, code, input={"missing": str(indexed.parent / "nope.txt")})
        assert not r.is_error, text_of(r)
        out = r.structured_content["result"]
        assert out["missing"]["tool"] == "filesystem__read_text_file"
        assert "nope.txt" in out["missing"]["message"]
        assert "do not match its input schema" in out["invalid"]["message"]
        assert "Did you mean: everything__echo" in out["unknown"]["message"]
        assert "cannot start another script" in out["nested"]["message"]
        assert "tools.search" in out["meta"]["message"]
        assert out["after"] == "Echo: fine"
        assert [call["ok"] for call in r.structured_content["calls"]] == [False, False, False, False, False, True]
        assert "[6 calls, 5 failed:" in text_of(r)

        # An error the script does not catch ends it, with its logs and calls kept.
        r = await run_script(c, 'console.log("before"); await tools.call("filesystem__read_text_file", {path: "/nope"});')
        assert r.is_error
        assert r.structured_content["error"].startswith("the script threw an uncaught error: Error:")
        assert r.structured_content["logs"] == ["before"]
        assert r.structured_content["calls"][0]["ok"] is False
        await still_works(c)


LIMITS = {
    "timeout": ("while (true) {}", {"timeout_ms": 500}, "time limit of 500 ms"),
    "slow upstream": ('await tools.call("everything__trigger-long-running-operation", {duration: 30, steps: 3});',
                      {"timeout_ms": 1000}, "time limit of 1000 ms"),
    "memory bomb": ("const a = []; for (;;) a.push(new Array(1e6).fill(1));", {}, "out of memory (limit 64 MiB)"),
    "caught memory bomb": ('try { let s = []; for (;;) s.push("x".repeat(1 << 20) + s.length); } catch (e) {} return 1;',
                           {}, "out of memory"),
    "call cap": ('for (let i = 0; ; i++) { try { await tools.call("everything__echo", {message: `${i}`}); } catch {} }',
                 {"max_calls": 3}, "more than max_calls = 3"),
    "stack": ("const f = (n) => f(n + 1) + 1; return f(0);", {}, "overflowed its stack"),
}


async def test_each_limit_ends_the_script_and_the_session_keeps_working(indexed):
    async with meta_client(indexed) as c:
        for limit, (code, args, says) in LIMITS.items():
            r = await run_script(c, code, **args)
            assert r.is_error, f"{limit}: {text_of(r)}"
            assert says in r.structured_content["error"], f"{limit}: {r.structured_content['error']}"
            assert text_of(r).startswith("script error: the script ")
            if limit == "call cap":
                assert [call["name"] for call in r.structured_content["calls"]] == ["everything__echo"] * 3
            await still_works(c)


async def test_a_busy_script_holds_up_no_other_request(indexed):
    """With a single worker thread (TOKIO_WORKER_THREADS=1), a script that computes without
    awaiting runs on it first; a search and a tool call sent meanwhile are still answered while
    the script runs, because the script hands the worker's other requests to a new thread."""
    async with meta_client(indexed, env={"TOKIO_WORKER_THREADS": "1"}) as c:
        script = asyncio.create_task(run_script(c, "for (;;) {}", timeout_ms=3000))
        await asyncio.sleep(0.5)  # settle time for the script to start, not a measurement
        r = await c.call_tool("search_tools", {"query": "current time"})
        assert not r.is_error and r.structured_content["hits"], text_of(r)
        r = await c.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "beside"}})
        assert not r.is_error and text_of(r) == "Echo: beside"
        assert not script.done(), "the requests waited for the busy script"
        r = await script
        assert "time limit of 3000 ms" in r.structured_content["error"]
        await still_works(c)


async def test_no_host_globals_in_the_sandbox(indexed):
    code = """
    const names = ["require", "process", "fetch", "XMLHttpRequest", "WebSocket", "setTimeout", "setInterval",
                   "std", "os", "module", "exports", "Deno", "Bun", "__dirname"];
    const present = names.filter((n) => typeof globalThis[n] !== "undefined");
    let imported;
    try { await import("fs"); imported = "loaded"; } catch (e) { imported = "refused"; }
    return {present, imported, viaEval: eval("typeof require"), viaFunction: new Function("return typeof process")()};
    """
    async with meta_client(indexed) as c:
        r = await run_script(c, code)
        assert not r.is_error, text_of(r)
        assert r.structured_content["result"] == {"present": [], "imported": "refused", "viaEval": "undefined",
                                                  "viaFunction": "undefined"}


async def test_search_describe_and_typescript_signatures(indexed):
    async with meta_client(indexed) as c:
        r = await run_script(c, """
        const found = await tools.search("current time in a timezone", 3);
        const tool = await tools.describe(found.hits[0].name);
        return {name: tool.name, required: tool.inputSchema.required};
        """)
        assert not r.is_error, text_of(r)
        assert r.structured_content["result"] == {"name": "time__get_current_time", "required": ["timezone"]}
        assert r.structured_content["calls"] == [], "search and describe are not tool calls"

        r = await c.call_tool("get_tool_details", {"names": ["filesystem__read_text_file", "nope__x"],
                                                   "format": "typescript"})
        assert not r.is_error, text_of(r)
        text = text_of(r)
        assert "declare function filesystem__read_text_file(args: {\n" in text
        assert "  path: string;\n" in text and "  tail?: number;\n" in text
        assert "): Promise<{\n  content: string;\n}>;" in text
        assert '// unknown tool "nope__x"' in text
        assert r.structured_content["tools"][0]["typescript"] in text


async def test_a_large_script_result_goes_through_result_handling(indexed):
    async with meta_client(indexed) as c:
        r = await run_script(c, 'return Array.from({length: 40000}, (_, i) => `word${i}`).join(" ");')
        assert not r.is_error, text_of(r)[:300]
        notice = [b.text for b in r.content if b.type == "text" and b.text.startswith("--- TRUNCATION NOTICE ---")]
        assert notice, "the script's own result is cut to the budget like any result"
        assert json.loads(notice[0].split("\n", 1)[1])["tool"] == SCRIPT
