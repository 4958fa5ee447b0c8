"""What one workspace sees of the deployment's MCP servers: the ones it chose, their tools and problems.

A workspace chooses servers by name (``Context.mcp_servers``); it can never add one, so the deployment alone
decides what runs. Two servers whose tools sanitise to the same name cannot both be offered: the first in
file order keeps it, and the other is reported, so a model never sees two tools under one name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from langchain_core.tools import BaseTool

from .config import ServersFile, Transport
from .sessions import Link
from .tools import Call, convert_tool, tool_name


@dataclass(frozen=True)
class ServerStatus:
    """How one configured server fared, for the ``mcp`` command and for problem reports."""

    name: str
    transport: Transport | None
    state: Literal["started", "not auto-started", "error"]
    error: str | None = None
    """The problem, as reported in ``McpLoad.problems`` (it names the server)."""
    tools: tuple[str, ...] = ()
    suppressed: tuple[str, ...] = ()


@dataclass
class McpLoad:
    """The MCP tools a workspace gets from the servers file, and everything that went wrong (never raised)."""

    path: Path
    found: bool
    tools: list[BaseTool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    servers: list[ServerStatus] = field(default_factory=list)


def select(names: Sequence[str] | None, file: ServersFile) -> tuple[list[str], list[str]]:
    """The servers a workspace uses, in file order, and the problems with its list of names."""
    if names is None:
        return list(file.order), []
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        return [], [f"mcp_servers must be a list of server names, got {names!r}; no MCP tools are offered"]
    unknown = [n for n in dict.fromkeys(names) if n not in file.order]
    known = ", ".join(file.order) or "none"
    problems = [
        f"MCP server {n!r} named in mcp_servers is not one of the deployment's servers ({known})"
        for n in unknown
    ]
    return [n for n in file.order if n in names], problems


def assemble(
    file: ServersFile,
    links: dict[str, Link],
    chosen: list[str],
    problems: list[str],
    caller: Callable[[Link, float], Call],
    timeout: float,
) -> McpLoad:
    """The tools, statuses and problems of the chosen servers; a name already taken keeps its first owner."""
    bad_blocks = {name: text for name, text in file.problems if name is not None}
    out = McpLoad(file.path, file.found)
    out.problems = [text for name, text in file.problems if name is None] + problems
    taken: dict[str, str] = {}
    for name in chosen:
        if name in bad_blocks:
            out.problems.append(bad_blocks[name])
            out.servers.append(ServerStatus(name, None, "error", bad_blocks[name]))
            continue
        link = links[name]
        spec = link.spec
        if not spec.auto_start:
            out.servers.append(ServerStatus(name, spec.transport, "not auto-started"))
            continue
        if link.error is not None or not link.started:
            problem = f"MCP server {name!r} could not be started: {link.error or 'not started yet'}"
            out.problems.append(problem)
            out.servers.append(ServerStatus(name, spec.transport, "error", problem))
            continue
        offered: list[str] = []
        for tool in link.tools:
            if tool.name in spec.suppressed_tools:
                continue
            full = tool_name(name, tool.name)
            if full in taken:
                out.problems.append(
                    f"MCP server {name!r}: tool {tool.name!r} is offered as {full!r}, which "
                    f"{taken[full]} already uses; it is left out"
                )
                continue
            taken[full] = f"{name}:{tool.name}"
            offered.append(full)
            out.tools.append(convert_tool(name, tool, caller(link, timeout)))
        hidden = tuple(sorted(t.name for t in link.tools if t.name in spec.suppressed_tools))
        out.servers.append(
            ServerStatus(name, spec.transport, "started", tools=tuple(offered), suppressed=hidden)
        )
    return out
