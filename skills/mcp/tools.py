"""MCP tools as LangChain tools: provider-safe names, and langchain-mcp-adapters' conversion.

The conversion (schema, description, the call, ``isError`` results, structured content as the artifact) is
langchain-mcp-adapters' ``convert_mcp_tool_to_langchain_tool``. Its tools call ``session.call_tool`` in the
caller's event loop, while our sessions live on the hub's loop in another thread; so the "session" handed to
it is a relay whose ``call_tool`` hands the call to the hub. Two things stay ours: the names (``<server>-
<tool>``, sanitised the same way every turn), and keeping results to text, because the adapters turn images
and resource links into content blocks that Chat Completions cannot carry in a tool message (a file URL
makes langchain-openai refuse the whole next model call, and a text-only local model rejects images).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, cast

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langchain_mcp_adapters.interceptors import MCPToolCallRequest
from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
from langgraph.types import Command
from mcp import ClientSession
from mcp.types import CallToolResult, ContentBlock, EmbeddedResource, TextContent, TextResourceContents
from mcp.types import Tool as McpTool

Call = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]
"""Runs one call of a server's tool by its MCP name, wherever that server's session lives."""

MCPToolCallResult: TypeAlias = CallToolResult | ToolMessage | Command
"""What an adapters interceptor returns: the adapters' ``MCPToolCallResult`` with langgraph installed.

They define theirs under a run-time test for langgraph, which a type checker cannot read as a type.
"""

MAX_NAME = 64
"""OpenAI's limit on a tool name; other providers allow the same or more."""

_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``<server>-<tool>``, made acceptable to every provider the same way every time.

    Characters outside ``[a-zA-Z0-9_-]`` become ``_``; a name over 64 characters is cut and given a short
    hash of the full name, so two long names that share a prefix stay distinct and a name never changes
    between turns (a changed name would orphan the model's earlier calls and remembered approvals).
    """
    name = f"{server}-{tool}"
    if _VALID_NAME.match(name):
        return name
    clean = _BAD_CHARS.sub("_", name)
    if len(clean) <= MAX_NAME:
        return clean
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{clean[: MAX_NAME - len(digest) - 1]}_{digest}"


class _RelaySession:
    """Stands in for the adapters' ``ClientSession``: each call goes to the loop that owns the session."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **_: Any) -> CallToolResult:
        """Run the call on the hub (progress callbacks are not relayed across loops)."""
        return await self._call(name, arguments or {})


def _as_text(block: ContentBlock) -> ContentBlock:
    if isinstance(block, TextContent):
        return block
    if isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
        return block
    if block.type == "resource_link":
        return TextContent(type="text", text=f"[resource: {block.uri}]")
    return TextContent(type="text", text=f"[{block.type} content ({getattr(block, 'mimeType', '') or '?'})]")


async def _text_only(
    request: MCPToolCallRequest, handler: Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]]
) -> MCPToolCallResult:
    """An adapters interceptor: non-text blocks become a line of text saying what was there."""
    result = await handler(request)
    if isinstance(result, CallToolResult):
        return result.model_copy(update={"content": [_as_text(b) for b in result.content]})
    return result


def _error_text(name: str) -> Callable[[ToolException], str]:
    """An ``isError`` result as the error message the model reads: tool messages carry no status field."""

    def handle(exc: ToolException) -> str:
        return f"Error: {name} failed: {exc}"

    return handle


def convert_tool(server: str, tool: McpTool, call: Call) -> BaseTool:
    """One MCP tool as a LangChain tool named ``<server>-<tool>`` that runs through ``call``."""
    schema = dict(tool.inputSchema or {})
    schema.setdefault("type", "object")  # providers insist on both, even for a tool without arguments
    schema.setdefault("properties", {})
    description = tool.description or f"{tool.name} (MCP server {server})"
    described = tool.model_copy(update={"inputSchema": schema, "description": description})
    converted = convert_mcp_tool_to_langchain_tool(
        cast(ClientSession, _RelaySession(call)),
        described,
        server_name=server,
        tool_interceptors=[_text_only],
        handle_tool_errors=False,
    )
    converted.name = tool_name(server, tool.name)
    converted.handle_tool_error = _error_text(converted.name)
    converted.metadata = {**(converted.metadata or {}), "server": server, "tool": tool.name, "mcp": True}
    return converted
