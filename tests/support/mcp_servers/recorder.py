"""A FastMCP server that writes down every call it receives, so tests can assert exactly what ran.

Each call appends one JSON line ``{"server", "tool", "args", "pid", "t"}`` to the file named by
``MCP_RECORD`` *before* the tool body runs, so a call that hangs or kills the server is recorded too.
``MCP_LABEL`` names the server in those lines. Run it as a script:
``python recorder.py --transport stdio|sse|streamable-http [--port N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ContentBlock, ImageContent, ResourceLink, TextContent

LABEL = os.environ.get("MCP_LABEL", "recorder")


def record(tool: str, args: dict[str, Any]) -> None:
    """Append one call to the record file, if the test gave one."""
    path = os.environ.get("MCP_RECORD")
    if not path:
        return
    line = json.dumps({"server": LABEL, "tool": tool, "args": args, "pid": os.getpid(), "t": time.time()})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def build(host: str = "127.0.0.1", port: int = 8000) -> FastMCP:
    """The server and its tools."""
    server = FastMCP(LABEL, host=host, port=port, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Repeat the given text back."""
        record("echo", {"text": text})
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        record("add", {"a": a, "b": b})
        return a + b

    @server.tool()
    def pid() -> str:
        """Report the server's process id."""
        record("pid", {})
        return str(os.getpid())

    @server.tool()
    def env(name: str) -> str:
        """Read one environment variable of the server process."""
        record("env", {"name": name})
        return os.environ.get(name, "<unset>")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Wait the given number of seconds, then answer."""
        record("slow", {"seconds": seconds})
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def die() -> str:
        """Make the server process exit at once, without answering."""
        record("die", {})
        os._exit(3)

    @server.tool()
    def fail(message: str) -> str:
        """Raise an error with the given message."""
        record("fail", {"message": message})
        raise ValueError(message)

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """Read one HTTP header of the request that carried this call (servers-file "headers")."""
        record("header", {"name": name})
        request = ctx.request_context.request
        return request.headers.get(name, "<unset>") if request is not None else "<not over HTTP>"

    @server.tool()
    def secret() -> str:
        """A tool the servers file suppresses."""
        record("secret", {})
        return "should never be offered"

    @server.tool()
    def picture() -> list[ContentBlock]:
        """Answer with text, an image and a link to a resource (blocks a tool message cannot carry as is)."""
        record("picture", {})
        return [
            TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png"),
            ResourceLink(type="resource_link", uri="file:///srv/dot.png", name="dot"),
        ]

    @server.tool(name="word.count")
    def word_count(text: str) -> int:
        """Count the words of a text (its name has a dot, which model providers reject)."""
        record("word.count", {"text": text})
        return len(text.split())

    return server


def main() -> None:
    """Serve on the transport the test asks for."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "sse", "streamable-http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    opts = parser.parse_args()
    build(port=opts.port).run(transport=opts.transport)


if __name__ == "__main__":
    main()
