"""MCP servers as tools: the deployment's servers file, one session per server kept open, each tool by name.

Unlike AnythingLLM, nothing here decides whether a call may run: MCP tools are plain LangChain tools and go
through the ``approve`` node like every other tool (D21). The parts, by concern:

- ``config``: the servers file, a deployment setting (``MCP_CONFIG``), read safely and parsed;
- ``transports``: stdio, SSE and streamable HTTP;
- ``sessions``: one server's session on the hub's loop, replaced when it breaks;
- ``tools``: provider-safe names and langchain-mcp-adapters' conversion, relayed to the hub;
- ``hub``: the thread that owns every session, and the servers file as last read;
- ``workspace``: what one workspace sees: the servers it chose, their tools and problems.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .config import ENV_VAR, MAX_FILE_BYTES, configured_file
from .hub import DEFAULT_CALL_TIMEOUT, hub
from .sessions import McpCallTimeout, McpServerError
from .tools import MAX_NAME, tool_name
from .workspace import McpLoad, ServerStatus

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "ENV_VAR",
    "MAX_FILE_BYTES",
    "MAX_NAME",
    "McpCallTimeout",
    "McpLoad",
    "McpServerError",
    "ServerStatus",
    "close_mcp",
    "configured_file",
    "load_mcp",
    "load_mcp_sync",
    "tool_name",
]


async def load_mcp(
    servers: Sequence[str] | None = None,
    *,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    config: str | os.PathLike[str] | None = None,
) -> McpLoad:
    """The MCP tools of the chosen servers of the deployment's servers file (``None``: all of them).

    ``config`` overrides the deployment's file: for the program that owns the deployment (the CLI's
    ``mcp --config``, tests), never for anything a run sends. Problems are returned, never raised.
    """
    return await hub().load(config, servers=servers, call_timeout=call_timeout)


def load_mcp_sync(
    servers: Sequence[str] | None = None,
    *,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    config: str | os.PathLike[str] | None = None,
) -> McpLoad:
    """``load_mcp`` for synchronous code such as the CLI; not from the hub's own thread."""
    return hub().load_sync(config, servers=servers, call_timeout=call_timeout)


async def close_mcp(config: str | os.PathLike[str] | None = None) -> None:
    """Close the sessions of one servers file (or all): tests, and programs that edit servers at run time."""
    await hub().close(config)
