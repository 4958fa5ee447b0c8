"""A3 — chat or agent? Also where a new turn starts: the previous turn's working state is cleared."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, Decision, decision
from workspace_agent.providers.tokens import message_text
from workspace_agent.skills.toolset import Services

AGENT_PREFIX = "@agent"
MAX_MESSAGE_CHARS = 1_000_000
EXECUTED_PREFIX = "wa-tool-"


class InvalidMessage(ValueError):
    """The new message cannot start a turn (empty, too large, or not from the user)."""


def _abandoned(earlier: list) -> list[Decision]:
    """Calls of the previous turn still waiting for approval when the person sent a new message instead."""
    ran = {
        m.tool_call_id
        for m in earlier
        if isinstance(m, ToolMessage) and (m.id or "").startswith(EXECUTED_PREFIX)
    }
    asked = next((m for m in reversed(earlier) if isinstance(m, AIMessage) and m.tool_calls), None)
    pending = [c for c in (asked.tool_calls if asked else []) if c["id"] not in ran]
    if not pending:
        return []
    return [
        decision(
            "D3",
            "person",
            {"abandoned": [c["id"] for c in pending]},
            "a new message arrived while these calls awaited approval: they were never run",
        )
    ]


async def route(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Pick plain chat or the tool-using agent for this turn, the way AnythingLLM does.

    ``@agent`` at the very start always means agent (the prefix is stripped before the model sees it). In
    automatic mode a model that calls tools natively gets the agent when its tools could be set up. Anything
    else is plain chat; query mode is plain chat that answers only from documents.
    """
    ctx = runtime.context
    messages = state["messages"]
    new = messages[-1] if messages else None
    if not isinstance(new, HumanMessage):
        raise InvalidMessage("a turn starts with a user message: send {'role': 'user', 'content': '...'}")
    text = message_text(new)
    if not text.strip():
        raise InvalidMessage("the message is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidMessage(f"the message has {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}")

    if text.startswith(AGENT_PREFIX):
        text = text[len(AGENT_PREFIX) :].strip() or "Hello!"
        chosen, why = "agent", "the message starts with @agent"
    elif ctx.chat_mode != "automatic":
        chosen, why = "chat", f"chat_mode is {ctx.chat_mode} and the message does not start with @agent"
    elif not ctx.native_tool_calling:
        chosen, why = "chat", "automatic mode, but the model does not call tools natively"
    else:
        toolset = await services.toolset(ctx)
        if toolset.tools:
            chosen, why = (
                "agent",
                f"automatic mode with native tool calling and {len(toolset.tools)} tools ready",
            )
        else:
            chosen, why = (
                "chat",
                f"automatic mode, but no tool could be set up: {'; '.join(toolset.problems)}",
            )
    query_only = chosen == "chat" and ctx.chat_mode == "query"
    turn = HumanMessage(content=text, id=new.id)
    return {
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), turn],
        "route": chosen,
        "query_only": query_only,
        "decisions": Overwrite([*_abandoned(messages[:-1]), decision("A3", "code", chosen, why)]),
        "tool_calls_made": Overwrite(0),
        "sources": Overwrite([]),
        "context": [],
        "approved": [],
        "plan": {},
        "stop_reason": None,
    }
