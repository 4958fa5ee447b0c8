"""The tools a turn may use: built-ins, the program's own tools, and MCP tools."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from workspace_agent.checkpoints.chatlog import Records
from workspace_agent.graphs.context import Context
from workspace_agent.skills.builtin import builtin_tools


@dataclass
class Toolset:
    """The tools of one turn by name, and what could not be loaded (reported, never fatal)."""

    tools: dict[str, BaseTool]
    problems: list[str] = field(default_factory=list)


@dataclass
class Services:
    """What the nodes use besides state and context: the records store and the program's extra tools."""

    records: Records
    extra_tools: list[BaseTool] = field(default_factory=list)

    async def toolset(self, context: Context) -> Toolset:
        """Every tool offered to the model in this workspace; a name clash keeps the first one."""
        tools: dict[str, BaseTool] = {}
        problems: list[str] = []
        for tool in [*builtin_tools(context.workspace, context.user_id, self.records), *self.extra_tools]:
            if tool.name in tools:
                problems.append(f"tool name {tool.name!r} is offered twice; the first one is kept")
                continue
            tools[tool.name] = tool
        return Toolset(tools, problems)
