"""How a session reaches its server: stdio process, SSE or streamable HTTP, as the servers file says."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Tool as McpTool

from .config import ServerSpec

CONNECT_TIMEOUT = 30.0
"""Seconds a server gets to start and list its tools, as in AnythingLLM."""
HTTP_READ_TIMEOUT = 300.0
"""Seconds an HTTP server's event stream may stay silent before the session counts as broken."""
MAX_TOOL_PAGES = 100
"""A server that pages its tool list forever must not hang the turn."""


def describe(exc: BaseException) -> str:
    """The innermost useful message: anyio wraps transport failures in nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpError):
        return exc.error.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@asynccontextmanager
async def open_session(spec: ServerSpec) -> AsyncIterator[ClientSession]:
    """Open the transport and an MCP session over it (not yet initialised).

    A stdio server gets the parent's environment plus its own ``env`` block: the MCP SDK would otherwise
    hand it only a minimal one, and servers started from AnythingLLM expect to see ``PATH`` and friends.
    """
    if spec.transport == "stdio":
        assert spec.command is not None
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env={**os.environ, **dict(spec.env)}
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            yield session
    elif spec.transport == "sse":
        assert spec.url is not None
        async with (
            sse_client(
                spec.url,
                headers=dict(spec.headers),
                timeout=CONNECT_TIMEOUT,
                sse_read_timeout=HTTP_READ_TIMEOUT,
            ) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session
    else:
        assert spec.url is not None
        client = httpx.AsyncClient(
            headers=dict(spec.headers),
            timeout=httpx.Timeout(CONNECT_TIMEOUT, read=HTTP_READ_TIMEOUT),
            follow_redirects=True,
        )
        async with (
            client,
            streamable_http_client(spec.url, http_client=client) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            yield session


async def list_tools(session: ClientSession) -> list[McpTool]:
    """Every tool of the server, following its pages (a bounded number of them)."""
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    return tools
