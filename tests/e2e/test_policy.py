"""The call policy end to end, from the real annotations of server-filesystem (write_file,
edit_file and move_file are destructiveHint) and server-memory (its delete_* tools), driven by
the official Python SDK with and without an elicitation callback: `confirm` asks and runs only
what the user accepts, `deny` and `readOnly` refuse, the same from a script and for alwaysLoad
tools; and the audit log has one line per call, refusals and declines included, without
argument values."""
import json
import os
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters, types

from conftest import BIN, meta_client, run_cli, server_entries, text_of

pytestmark = pytest.mark.anyio

FS_KEY = 'mcpServers."filesystem".policy.destructive'


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """filesystem (serving `files/`) and memory, indexed once; each test writes its own config
    beside the catalogs."""
    tmp = tmp_path_factory.mktemp("policy")
    (tmp / "files").mkdir()
    configure(tmp, "index.json")
    run_cli(tmp / "index.json", "index")
    catalog = json.loads((tmp / "catalogs" / "filesystem.json").read_text())
    hints = {t["name"]: t.get("annotations", {}) for t in catalog["tools"]}
    assert hints["write_file"]["destructiveHint"] and hints["create_directory"]["destructiveHint"] is False
    return tmp


def configure(tmp: Path, name: str, fs: dict | None = None, memory: dict | None = None, **meta) -> Path:
    entries = server_entries(tmp / "files")
    entries["memory"]["env"]["MEMORY_FILE_PATH"] = str(tmp / f"{name}.memory.jsonl")
    servers = {"filesystem": {**entries["filesystem"], **(fs or {})}, "memory": {**entries["memory"], **(memory or {})}}
    cfg = tmp / name
    cfg.write_text(json.dumps({"metaServer": {"catalogDir": "catalogs", **meta}, "mcpServers": servers}))
    return cfg


@asynccontextmanager
async def asking(cfg: Path, answer: str | None, mode: str = "legacy"):
    """A client (by default a legacy, 2025-11-25, session) whose user answers every elicitation
    with `answer` (`None`: a client without elicitation); yields the client and the questions
    asked."""
    asked: list[str] = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=answer, content={} if answer == "accept" else None)

    callbacks = {} if answer is None else {"elicitation_callback": elicit}
    params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"],
                                   env={**os.environ, "META_SERVER_LOG": "meta_server=info"})
    async with Client(params, mode=mode, **callbacks) as c:
        yield c, asked


async def call(c, name: str, arguments: dict):
    return await c.call_tool("call_tool", {"name": name, "arguments": arguments})


async def script(c, code: str):
    return await c.call_tool("call_tool", {"name": "meta__run_script", "arguments": {"code": code}})


async def test_confirm_asks_and_runs_only_what_the_user_accepts(home):
    cfg = configure(home, "confirm.json", fs={"policy": {"destructive": "confirm"}})
    target = home / "files" / "confirmed.txt"
    async with asking(cfg, "decline") as (c, asked):
        r = await call(c, "filesystem__write_file", {"path": str(target), "content": "secret\u202eText"})
        assert r.is_error and "the user declined it" in text_of(r), text_of(r)
        assert not target.exists(), "declined: nothing written"
        assert len(asked) == 1
        question = asked[0]
        assert "Tool: write_file" in question and 'server "filesystem"' in question, question
        assert str(target) in question and "\\u{202e}" in question and "\u202e" not in question, question
        assert FS_KEY in question
        # Not destructive by its annotations: runs without a question.
        r = await call(c, "filesystem__create_directory", {"path": str(home / "files" / "made")})
        assert not r.is_error, text_of(r)
        assert (home / "files" / "made").is_dir() and len(asked) == 1
    async with asking(cfg, "cancel") as (c, asked):
        r = await call(c, "filesystem__write_file", {"path": str(target), "content": "x"})
        assert r.is_error and "cancelled" in text_of(r) and not target.exists()
    async with asking(cfg, "accept") as (c, asked):
        r = await call(c, "filesystem__write_file", {"path": str(target), "content": "approved"})
        assert not r.is_error, text_of(r)
        assert target.read_text() == "approved" and len(asked) == 1


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_confirmation_names_every_argument_whatever_the_size_of_the_others(home, mode):
    """Issue 38, M4: a megabyte of `content` sent before `path` pushed the path out of the
    question; the user accepted and `.bashrc` was written. Every key is shown, each value cut."""
    cfg = configure(home, f"long-{mode}.json", fs={"policy": {"destructive": "confirm"}})
    target = home / "files" / ".bashrc"
    content = "echo pwned; " * 100_000
    async with asking(cfg, "decline", mode=mode) as (c, asked):
        r = await call(c, "filesystem__write_file", {"content": content, "path": str(target)})
        assert r.is_error and "the user declined it" in text_of(r), text_of(r)
    assert not target.exists()
    [question] = asked
    assert str(target) in question, question
    shown = question.split("Arguments:\n", 1)[1].splitlines()
    assert shown[0] == f'  path: "{target}"', question
    assert shown[1].startswith('  content: "echo pwned; ') and shown[1].endswith(f"… ({len(content) + 2} characters)"), question
    assert len(question) < 1_000, "each value cut"


async def test_a_client_that_cannot_be_asked_is_told_which_key_allows_the_call(home):
    cfg = configure(home, "unasked.json", policy={"destructive": "confirm"})
    target = home / "files" / "unasked.txt"
    async with asking(cfg, None) as (c, _):
        r = await call(c, "filesystem__write_file", {"path": str(target), "content": "x"})
        assert r.is_error
        said = text_of(r)
        assert 'metaServer.policy.destructive is "confirm"' in said, said
        assert "did not declare the elicitation capability" in said and f'set {FS_KEY} to "allow"' in said, said
        r = await call(c, "memory__delete_entities", {"entityNames": ["x"]})
        assert r.is_error and 'mcpServers."memory".policy.destructive' in text_of(r)
    async with meta_client(cfg, mode="2026-07-28") as c:
        r = await call(c, "filesystem__write_file", {"path": str(target), "content": "x"})
        said = text_of(r)
        assert r.is_error and "did not declare the elicitation capability" in said, said
        assert f'set {FS_KEY} to "allow"' in said, said
    assert not target.exists()


async def test_confirm_asks_a_2026_07_28_client_in_its_calls_input_required_result(home):
    """The same confirmation form reaches a 2026-07-28 client as an input request of its
    call's InputRequiredResult; the SDK answers it with the retry; decline and cancel run
    nothing, accept runs the call, from call_tool and from a script, with audit lines."""
    cfg = configure(home, "modern.json", fs={"policy": {"destructive": "confirm"}}, audit={"path": "modern.jsonl"})
    target = home / "files" / "modern.txt"
    write = {"path": str(target), "content": "secret\u202eText"}
    async with asking(cfg, "decline", mode="2026-07-28") as (c, asked):
        r = await call(c, "filesystem__write_file", write)
        assert r.is_error and "the user declined it" in text_of(r), text_of(r)
        assert not target.exists(), "declined: nothing written"
        [question] = asked
        assert "Tool: write_file" in question and 'server "filesystem"' in question, question
        assert str(target) in question and "\\u{202e}" in question and "\u202e" not in question, question
        assert FS_KEY in question
        code = f"""
        try {{ await tools.call("filesystem__write_file", {{path: {json.dumps(str(target))}, content: "by script"}}); return "written"; }}
        catch (e) {{ return "refused: " + e.message; }}"""
        r = await script(c, code)
        assert "the user declined it" in r.structured_content["result"], text_of(r)
        assert not target.exists() and len(asked) == 2
    async with asking(cfg, "cancel", mode="2026-07-28") as (c, _):
        r = await call(c, "filesystem__write_file", write)
        assert r.is_error and "cancelled" in text_of(r) and not target.exists()
    async with asking(cfg, "accept", mode="2026-07-28") as (c, asked):
        r = await script(c, code)
        assert r.structured_content["result"] == "written", text_of(r)
        assert target.read_text() == "by script"
        r = await call(c, "filesystem__write_file", {"path": str(target), "content": "approved"})
        assert not r.is_error, text_of(r)
        assert target.read_text() == "approved" and len(asked) == 2

        # By hand: the first answer is the InputRequiredResult with the form; a retry of
        # another request with its requestState is refused, and nothing ran meanwhile.
        arguments = {"name": "filesystem__write_file", "arguments": {"path": str(target), "content": "by hand"}}
        first = await c.session.call_tool("call_tool", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        [(key, request)] = first.input_requests.items()
        assert request.method == "elicitation/create" and "Tool: write_file" in request.params.message
        accept = {key: {"action": "accept", "content": {}}}
        other = {**arguments, "arguments": {**arguments["arguments"], "content": "swapped"}}
        with pytest.raises(MCPError) as refused:
            await c.session.call_tool("call_tool", other, input_responses=accept,
                                      request_state=first.request_state, allow_input_required=True)
        assert "a retry must repeat the request that got it" in str(refused.value)
        assert target.read_text() == "approved"
        r = await c.session.call_tool("call_tool", arguments, input_responses=accept,
                                      request_state=first.request_state, allow_input_required=True)
        assert isinstance(r, types.CallToolResult) and not r.is_error, r
        assert target.read_text() == "by hand"
    lines = [json.loads(line) for line in (home / "modern.jsonl").read_text().splitlines()]
    got = [(l["tool"], l["outcome"], l["inScript"]) for l in lines]
    assert got == [
        ("write_file", "declined", False),
        ("write_file", "declined", True),
        ("run_script", "ok", False),
        ("write_file", "declined", False),
        ("write_file", "ok", True),
        ("run_script", "ok", False),
        ("write_file", "ok", False),
        ("write_file", "ok", False),
    ], got
    assert "secret" not in (home / "modern.jsonl").read_text()


async def test_deny_and_read_only_refuse_and_nothing_is_done(home):
    cfg = configure(home, "deny.json", fs={"policy": {"readOnly": True}}, memory={"policy": {"destructive": "deny"}})
    async with asking(cfg, "accept") as (c, asked):
        r = await call(c, "memory__create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": []}]})
        assert not r.is_error, text_of(r)
        r = await call(c, "memory__delete_entities", {"entityNames": ["Ada"]})
        assert r.is_error and 'mcpServers."memory".policy.destructive is "deny"' in text_of(r), text_of(r)
        graph = await call(c, "memory__read_graph", {})
        assert "Ada" in text_of(graph), "deny: nothing deleted"
        made = home / "files" / "read-only-dir"
        r = await call(c, "filesystem__create_directory", {"path": str(made)})
        assert r.is_error and 'mcpServers."filesystem".policy.readOnly is true' in text_of(r), text_of(r)
        assert not made.exists()
        r = await call(c, "filesystem__list_allowed_directories", {})
        assert not r.is_error and str(home / "files") in text_of(r)
        assert asked == [], "refusals ask nobody"


async def test_a_script_and_an_always_loaded_tool_follow_the_same_policy(home):
    cfg = configure(home, "script.json", fs={"alwaysLoad": True, "policy": {"destructive": "confirm"}})
    target = home / "files" / "from-script.txt"
    code = f"""
    try {{ await tools.call("filesystem__write_file", {{path: {json.dumps(str(target))}, content: "by script"}}); return "written"; }}
    catch (e) {{ return "refused: " + e.message; }}"""
    async with asking(cfg, "decline") as (c, asked):
        r = await script(c, code)
        assert not r.is_error and "refused: " in r.structured_content["result"], text_of(r)
        assert "the user declined it" in r.structured_content["result"]
        assert not target.exists() and len(asked) == 1
        listed = [t.name for t in (await c.list_tools()).tools]
        assert "filesystem__write_file" in listed
        r = await c.call_tool("filesystem__write_file", {"path": str(target), "content": "direct"})
        assert r.is_error and "declined" in text_of(r) and not target.exists()
        assert len(asked) == 2
    async with asking(cfg, None) as (c, _):
        r = await script(c, code)
        assert "did not declare the elicitation capability" in r.structured_content["result"], text_of(r)
        assert not target.exists()
    async with asking(cfg, "accept") as (c, asked):
        r = await script(c, code)
        assert r.structured_content["result"] == "written", text_of(r)
        assert target.read_text() == "by script" and len(asked) == 1


async def test_the_audit_log_has_a_line_per_call_without_argument_values(home):
    log = home / "audit.jsonl"
    cfg = configure(home, "audit.json", memory={"policy": {"destructive": "deny"}},
                    fs={"policy": {"destructive": "confirm"}}, audit={"path": "audit.jsonl"})
    secret = "do-not-log-this-value"
    async with asking(cfg, "decline") as (c, _):
        assert not (await call(c, "memory__read_graph", {})).is_error
        assert (await call(c, "memory__delete_entities", {"entityNames": [secret]})).is_error
        assert (await call(c, "filesystem__write_file", {"path": str(home / "files" / secret), "content": secret})).is_error
        assert (await call(c, "filesystem__no_such_tool", {"x": secret})).is_error
        r = await script(c, f'return await tools.call("filesystem__list_allowed_directories", {{}}) && "{secret}".length;')
        assert not r.is_error, text_of(r)
        assert not (await c.call_tool("search_tools", {"query": secret})).is_error
    text = log.read_text()
    assert secret not in text, "no argument values by default"
    lines = [json.loads(line) for line in text.splitlines()]
    got = [(l["server"], l["tool"], l["outcome"], l["inScript"]) for l in lines]
    assert got == [
        ("memory", "read_graph", "ok", False),
        ("memory", "delete_entities", "denied", False),
        ("filesystem", "write_file", "declined", False),
        ("filesystem", "no_such_tool", "error", False),
        ("filesystem", "list_allowed_directories", "ok", True),
        ("meta", "run_script", "ok", False),
    ], "one line per tool call, nested ones first as they end; searches are no tool calls"
    first = lines[0]
    assert first["principal"] is None and first["session"].startswith("stdio-") and first["client"]
    assert first["resultBytes"] > 0 and first["cut"] is False and isinstance(first["durationMs"], int)
    assert first["time"].endswith("Z") and "arguments" not in first
    assert os.stat(log).st_mode & 0o777 == 0o600


async def test_the_audit_log_takes_argument_values_only_when_asked(home):
    cfg = configure(home, "audit-args.json", audit={"path": "audit-args.jsonl", "arguments": True})
    async with asking(cfg, None) as (c, _):
        for i in range(2):
            assert not (await call(c, "memory__search_nodes", {"query": f"needle-{i}"})).is_error
    lines = [json.loads(line) for line in (home / "audit-args.jsonl").read_text().splitlines()]
    assert [l["arguments"] for l in lines] == [{"query": "needle-0"}, {"query": "needle-1"}]


async def test_huge_names_cannot_rotate_a_destructive_call_out_of_the_audit_log(home):
    """Issue 38, M5: after a destroy, nine calls with 3.9 MB names rotated its line out of the
    log and FILE.1. Each line and field is bounded now, and cut fields say their length."""
    log = home / "bounded.jsonl"
    cfg = configure(home, "bounded.json", audit={"path": "bounded.jsonl", "maxBytes": 1 << 20})
    name = "x" * 3_900_000
    client = "\u202e" + "c" * 1_000_000
    params = StdioServerParameters(command=str(BIN), args=["--config", str(cfg), "serve"], env=dict(os.environ))
    async with Client(params, client_info=types.Implementation(name=client, version="1")) as c:
        r = await call(c, "memory__delete_entities", {"entityNames": ["nobody"]})
        assert not r.is_error, text_of(r)
        for i in range(9):
            assert (await call(c, f"memory__{name}{i}", {})).is_error
    rotated = log.with_name(log.name + ".1")
    text = (rotated.read_text() if rotated.exists() else "") + log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 10 and (lines[0]["tool"], lines[0]["outcome"]) == ("delete_entities", "ok"), lines[0]
    assert max(len(line.encode()) for line in text.splitlines()) < 16 * 1024
    cut = lines[1]
    assert cut["truncated"]["tool"] == len(name) + 1 and name.startswith(cut["tool"]), cut["truncated"]
    assert cut["truncated"]["client"] == len(client.encode()) and cut["client"].startswith("\u202ec")
    assert "\u202e" not in text and "\\u202e" in text, "bidi controls escaped"


def test_serve_and_call_refuse_to_start_when_the_audit_log_cannot_be_written(home):
    """Issue 38, L8: an unwritable path or a symlink let calls run with a warning; an existing
    file readable by others stayed so."""
    elsewhere = home / "elsewhere.jsonl"
    link = home / "linked.jsonl"
    link.symlink_to(elsewhere)
    for path, reason in ((link, "is a symbolic link"), (home / "no-dir" / "a.jsonl", "No such file or directory")):
        cfg = configure(home, "unwritable.json", audit={"path": str(path)})
        serve = subprocess.run([str(BIN), "--config", str(cfg), "serve"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=120)
        assert serve.returncode != 0 and str(path) in serve.stderr and reason in serve.stderr, serve.stderr
        called = run_cli(cfg, "call", "memory__read_graph", check=False)
        assert called.returncode != 0 and str(path) in called.stderr and reason in called.stderr, called.stderr
    assert not elsewhere.exists(), "nothing written through the link"
    readable = home / "readable.jsonl"
    readable.write_text("")
    readable.chmod(0o644)
    cfg = configure(home, "readable.json", audit={"path": "readable.jsonl"})
    run_cli(cfg, "call", "memory__read_graph")
    assert readable.stat().st_mode & 0o777 == 0o600
    assert json.loads(readable.read_text())["tool"] == "read_graph"
