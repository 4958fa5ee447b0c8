"""C1 and G2 — the model picks the next tool (or answers); a reply cut off by the token limit is flagged."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, Decision, decision
from workspace_agent.nodes.trim import assemble
from workspace_agent.providers.prompted import digest, prompted_turn, retry_after_invalid
from workspace_agent.skills.toolset import Services


async def _offered_tools(
    state: AgentState, ctx: Context, services: Services
) -> tuple[list[BaseTool], list[Decision]]:
    """The tools this model call may use: none in chat, none once the budget is spent."""
    if state.get("route") != "agent":
        return [], []
    made = state.get("tool_calls_made", 0)
    if made >= ctx.max_tool_calls:
        why = f"{made} of {ctx.max_tool_calls} tool executions spent: the model must answer"
        return [], [decision("G1", "code", "tools withheld", why)]
    return list((await services.toolset(ctx)).tools.values()), []


async def call_model(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Call the model with the trimmed prompt and the turn's tools: natively, or described in the prompt.

    Once ``max_tool_calls`` executions are spent the model is called without tools, so it has to answer.
    A model without native tool calling (reached through ``@agent``) gets the tools described in its system
    prompt and answers with JSON naming one; after one round of calls it answers from a plain-text digest of
    the results. A reply that stopped on ``length`` is recorded as ``max_tokens``: its text stands, but a
    tool call in it may be half-written and is never executed (AnythingLLM runs such calls with ``{}``).
    """
    ctx = runtime.context
    model: Any = services.chat_model(ctx)
    tools, decisions = await _offered_tools(state, ctx, services)
    stop_reason = "max_tool_calls" if decisions else None
    request: list[BaseMessage] = assemble(state["plan"], state["messages"], state.get("history") or [])
    prompted = bool(tools) and not ctx.native_tool_calling
    if prompted and any(isinstance(m, ToolMessage) for m in state["messages"]):
        again = retry_after_invalid(state["messages"])  # calls written ambiguously may be written again
        request, stop_reason = digest(request, again=again), None
        tools, prompted = (tools, True) if again else ([], False)
    elif tools and not prompted:
        model = services.bind_tools(model, tools)
    how = "natively"
    if prompted:
        turn = await prompted_turn(
            model,
            request,
            tools,
            max_tokens=ctx.reply_reserve,
            window=ctx.window,
            grammar=services.call_grammar(),
        )
        under = ", under the call grammar" if turn.constrained else ""
        how = f"in JSON text (prompted tool calling{under})"
        response = turn.message
        if turn.left_out:
            why = (
                f"the catalog of {len(tools)} tools did not fit the window: the {len(turn.offered)} most "
                "relevant to the message were described"
            )
            cut = {"offered": turn.offered, "left_out": turn.left_out}
            decisions.append(decision("C1", "code", cut, why))
        if turn.grammar_refused:
            why = f"the endpoint refused the call grammar; free text was read: {turn.grammar_refused}"
            decisions.append(decision("C1", "code", "grammar refused", why))
        if turn.reopenings:
            chances = ", ".join(f"{p:.2f}" for p in turn.reopenings)
            why = (
                f"the model closed its list of calls while giving another call a chance of {chances}: the "
                f"list was reopened {len(turn.reopenings)} time(s) for it to go on"
            )
            decisions.append(decision("C1", "code", "list reopened", why))
        if turn.repeats:
            why = f"the reply repeated a call with the same arguments {turn.repeats} time(s); it runs once"
            decisions.append(decision("C1", "code", "repeats dropped", why))
        if turn.retried:  # a call to a tool that does not exist: asked again for a plain answer
            why = "the reply called a tool that does not exist; the model was asked again without tools"
            decisions.append(decision("C1", "model", "no such tool", why))
    else:
        response = await model.ainvoke(request)
    assert isinstance(response, AIMessage)
    if response.response_metadata.get("finish_reason") == "length":
        stop_reason = "max_tokens"
        calls = len(response.tool_calls) + len(response.invalid_tool_calls)
        why = f"the reply hit the output limit; {calls} tool call(s) in it will not run"
        decisions.append(decision("G2", "code", "max_tokens", why))
    names = [c["name"] for c in response.tool_calls]
    why = f"the model asked for {len(names)} tool call(s) {how}" if names else "the model answered"
    decisions.append(decision("C1", "model", names or "answer", why))
    return {"messages": [response], "decisions": decisions, "stop_reason": stop_reason}


def route_after_model(state: AgentState) -> Literal["approve", "finish"]:
    """G1: tool calls go to approval; a text reply, a reply cut off, or one past the budget ends the turn."""
    last = state["messages"][-1]
    if state.get("stop_reason") in ("max_tokens", "max_tool_calls") or not isinstance(last, AIMessage):
        return "finish"
    return "approve" if (last.tool_calls or last.invalid_tool_calls) else "finish"
