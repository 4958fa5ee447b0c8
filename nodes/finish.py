"""G1 — the turn is over: name why, and write the exchange to the chat log."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from ..checkpoints.chatlog import Exchange
from ..core.context import Context
from ..core.conversation import EXCLUDED, message_text, prompt_text, turn_start
from ..core.prompts import TIMED_OUT
from ..core.state import AgentState, decision
from .services import Services

TERMINATE = "TERMINATE"


async def finish(
    state: AgentState, runtime: Runtime[Context], config: RunnableConfig, *, services: Services
) -> dict:
    """Settle ``stop_reason`` and log the exchange; a refusal is logged with include = false.

    ``TERMINATE`` is AnythingLLM's exact, case-sensitive end-of-session reply. The chat log row is the
    durable record the memory job reads (the model's history is the thread's state). It is keyed by the
    turn's user message and answer, so finish run again after a crash — the row written, the checkpoint
    not — leaves one row, not two. A refusal stays in the thread but is marked as never given back. A turn
    that handed calls of a client's tools back (``tool_calls``) answered nothing yet: its row is not included
    either; the client's next request, with the results, ends with the answer.
    """
    ctx = runtime.context
    turn = state["messages"][turn_start(state["messages"]) :]
    answer = next((m for m in reversed(turn) if isinstance(m, AIMessage)), AIMessage(""))
    stop = state.get("stop_reason")
    if stop == "timed_out":  # the person is told in words; what ran stays in the thread above
        ran = sorted({m.name or "a tool" for m in turn if isinstance(m, ToolMessage) and m.status != "error"})
        done = f" It had run: {', '.join(ran)}." if ran else " It had run no tool."
        # keyed by the turn's message, so finish run again after a crash logs and adds it once
        key = f"timed-out-{turn[0].id if turn else ''}"
        answer = AIMessage(TIMED_OUT.format(limit=ctx.time_limit or 0) + done, id=key)
    text = message_text(answer)
    if stop is None:
        stop = "terminated" if text == TERMINATE else "answered"
    why = {
        "answered": "the model replied without a tool call",
        "terminated": "the model replied exactly TERMINATE",
        "max_tokens": "the reply was cut off by the output-token limit",
        "max_tool_calls": "the tool-call budget was spent; the model answered without tools",
        "refused": "query mode without document context",
        "tool_calls": "the reply calls the client's own tools: handed back to the client to run",
        "timed_out": "the run reached its time limit; what it had done is kept",
    }[stop]
    user = turn[0] if turn and isinstance(turn[0], HumanMessage) else HumanMessage("")
    thread_id = str((config.get("configurable") or {}).get("thread_id", ""))
    await services.records.log_exchange(
        Exchange(
            workspace=ctx.workspace,
            user_id=ctx.user_id,
            thread_id=thread_id,
            prompt=prompt_text(user),
            response=text,
            route=state.get("route") or "chat",
            stop_reason=stop,
            sources=state.get("sources") or [],
            include=stop not in ("refused", "tool_calls"),  # a hand-off is no answer to remember
            message_id=user.id or "",
            answer_id=answer.id or "",
        )
    )
    out: dict[str, Any] = {"stop_reason": stop, "plan": {}, "decisions": [decision("G1", "code", stop, why)]}
    if stop == "timed_out":
        out["messages"] = [answer]
    if stop == "refused" and answer.id:
        metadata = {**answer.response_metadata, EXCLUDED: True}
        out["messages"] = [answer.model_copy(update={"response_metadata": metadata})]
    return out
