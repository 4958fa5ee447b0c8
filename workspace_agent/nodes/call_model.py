"""C1 and G2 — the model picks the next tool (or answers); a reply cut off by the token limit is flagged."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, decision
from workspace_agent.nodes.trim import assemble
from workspace_agent.skills.toolset import Services


async def call_model(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Call the model with the trimmed prompt, binding the turn's tools natively in agent mode.

    Once ``max_tool_calls`` executions are spent the model is called without tools, so it has to answer.
    A reply that stopped on ``length`` is recorded as ``max_tokens``: its text stands, but a tool call in it
    may be half-written and is never executed (AnythingLLM runs such calls with ``{}`` arguments).
    """
    ctx = runtime.context
    model = services.chat_model(ctx)
    decisions = []
    stop_reason = None
    if state.get("route") == "agent":
        made = state.get("tool_calls_made", 0)
        if made >= ctx.max_tool_calls:
            stop_reason = "max_tool_calls"
            decisions.append(
                decision(
                    "G1",
                    "code",
                    "tools withheld",
                    f"{made} of {ctx.max_tool_calls} tool executions spent: the model must answer",
                )
            )
        else:
            toolset = await services.toolset(ctx)
            if toolset.tools:
                model = model.bind_tools(list(toolset.tools.values()))  # type: ignore[assignment]
    response = await model.ainvoke(assemble(state["plan"], state["messages"], state.get("history") or []))
    assert isinstance(response, AIMessage)
    finish = response.response_metadata.get("finish_reason")
    if finish == "length":
        stop_reason = "max_tokens"
        calls = len(response.tool_calls) + len(response.invalid_tool_calls)
        decisions.append(
            decision(
                "G2",
                "code",
                "max_tokens",
                f"the reply hit the output limit; {calls} tool call(s) in it will not run",
            )
        )
    names = [c["name"] for c in response.tool_calls]
    decisions.append(
        decision(
            "C1",
            "model",
            names or "answer",
            f"the model asked for {len(names)} tool call(s)" if names else "the model answered",
        )
    )
    return {"messages": [response], "decisions": decisions, "stop_reason": stop_reason}


def route_after_model(state: AgentState) -> Literal["approve", "finish"]:
    """G1: tool calls go to approval; a text reply, a reply cut off, or one past the budget ends the turn."""
    last = state["messages"][-1]
    if state.get("stop_reason") in ("max_tokens", "max_tool_calls") or not isinstance(last, AIMessage):
        return "finish"
    return "approve" if (last.tool_calls or last.invalid_tool_calls) else "finish"
