"""A one-tool FastMCP server over stdio for ``bench/mcp_calls.py``: ``echo`` answers at once."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("bench", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Repeat the given text back."""
    return text


if __name__ == "__main__":
    server.run(transport="stdio")
