"""Logs in to a server from an MCP session, as a user of an MCP client would: the official
Python SDK runs `meta-server serve`, calls the server's tool (which needs a login), takes the
login link meta-server offers through URL-mode elicitation, opens it like a browser, and calls
again once the login is through. Usage: serve_login.py META_SERVER_BIN CONFIG. Exit 0 when the
second call succeeds."""
import asyncio
import os
import sys
import urllib.request
from pathlib import Path

import mcp.types as types
from mcp import Client, StdioServerParameters

TOOL = "conf__test-tool"


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def main(binary, config):
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
    async with Client(params, mode="legacy", elicitation_callback=on_elicit) as client:
        first = await client.call_tool("call_tool", {"name": TOOL, "arguments": {}})
        print("first call:", text_of(first), file=sys.stderr)
        if not first.is_error or "meta-server auth login conf" not in text_of(first):
            print("the first call should fail naming the login command", file=sys.stderr)
            return 1
        if "login link was offered" not in text_of(first):
            print("the first call should say a login link was offered", file=sys.stderr)
            return 1
        for _ in range(300):
            second = await client.call_tool("call_tool", {"name": TOOL, "arguments": {}})
            if not second.is_error:
                break
            await asyncio.sleep(0.1)
        print("second call:", text_of(second), file=sys.stderr)
        if second.is_error or len(offered) != 1:
            print(f"login through the session failed; offers: {offered}", file=sys.stderr)
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
