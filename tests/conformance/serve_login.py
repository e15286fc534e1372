"""Logs in to a server while an MCP session runs, as a user of an MCP client would: the official
Python SDK runs `meta-server serve` and calls the server's tool, which needs a login. Then, with
`elicit`, the client takes the login link meta-server offers through URL-mode elicitation and
opens it like a browser; with `terminal`, the client declares no elicitation and the user runs
`meta-server auth login` in another terminal. The session calls again once the login is
through. Usage: serve_login.py elicit|terminal META_SERVER_BIN CONFIG. Exit 0 when the second
call succeeds."""
import asyncio
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import mcp.types as types
from mcp import Client, StdioServerParameters

TOOL = "conf__test-tool"


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def main(mode, binary, config):
    offered = []

    async def on_elicit(context, params):
        if isinstance(params, types.ElicitRequestURLParams):
            offered.append(params.url)
            # The user opens the link; the authorization server sends the browser back to
            # meta-server's loopback callback.
            await asyncio.to_thread(lambda: urllib.request.urlopen(params.url, timeout=30).read())
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(command=binary, args=["--config", config, "serve"], env=dict(os.environ))
    callback = on_elicit if mode == "elicit" else None
    async with Client(params, mode="legacy", elicitation_callback=callback) as client:
        first = await client.call_tool("call_tool", {"name": TOOL, "arguments": {}})
        print("first call:", text_of(first), file=sys.stderr)
        if not first.is_error or "meta-server auth login conf" not in text_of(first):
            print("the first call should fail naming the login command", file=sys.stderr)
            return 1
        if ("login link was offered" in text_of(first)) != (mode == "elicit"):
            print("only a client that takes URL elicitation is offered a link", file=sys.stderr)
            return 1
        if mode == "terminal":
            login = await asyncio.to_thread(
                subprocess.run, [binary, "--config", config, "auth", "login", "conf"], stdin=subprocess.DEVNULL)
            if login.returncode != 0:
                return 1
        for _ in range(300):
            second = await client.call_tool("call_tool", {"name": TOOL, "arguments": {}})
            if not second.is_error:
                break
            await asyncio.sleep(0.1)
        print("second call:", text_of(second), file=sys.stderr)
        if second.is_error or len(offered) != (mode == "elicit"):
            print(f"login through the session failed; offers: {offered}", file=sys.stderr)
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3])))
