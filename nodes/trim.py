"""B11 — what is cut when the prompt does not fit the model's window.

AnythingLLM's budget, kept: system prompt with its context ≤ 15 % of the window, history ≤ 15 %, the user
message ≤ 70 %, ``reply_reserve`` tokens kept free, and nothing touched when everything fits. Beyond it: the
budget holds in agent mode too (tool results of the running turn are cut in the middle, never dropped, so a
tool message always follows its call), history keeps chronological order, and the request is guaranteed to
fit — AnythingLLM's shares add up to 100 % before the reserve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from ..core.context import Context
from ..core.conversation import conversation, message_text, prompt_text
from ..core.plan import (
    FRAME,
    HISTORY_SHARE,
    SYSTEM_SHARE,
    USER_ALONE_SHARE,
    USER_SHARE,
    HistoryEntry,
    Plan,
    assemble,
    render_system,
)
from ..core.prompts import context_block, memory_block
from ..core.state import AgentState, decision
from ..providers.prompted.catalog import catalog_reserve
from ..providers.tokens import count, count_messages, cut_middle, ensure_tokenizer


def _fit_system(prompt: str, context: str, limit: int) -> tuple[str, str, bool]:
    """The system prompt and the turn's context cut to share ``limit`` tokens (15 % of the window)."""
    if count(prompt + context) + 2 * FRAME <= limit:
        return prompt, context, False
    prompt = cut_middle(prompt, int(limit * 0.25)) if count(prompt) >= limit * 0.25 else prompt
    context = cut_middle(context, int(limit * 0.75)) if count(context) >= limit * 0.75 else context
    return prompt, context, True


def _fit_history(history: list[dict[str, str]], limit: int) -> list[HistoryEntry]:
    """Newest exchanges that fit, in chronological order; the three newest are cut before being dropped.

    Each kept exchange is its index in ``history`` or, when it had to be cut, its cut ``[prompt, response]``.
    """
    kept: list[HistoryEntry] = []
    used = 0
    for i, exchange in enumerate(reversed(history)):
        entry: HistoryEntry = len(history) - 1 - i
        size = count_messages([HumanMessage(exchange["prompt"]), AIMessage(exchange["response"])])
        if used + size > limit:
            if i > 2:
                break
            side = int(limit / 2.2)
            entry = [cut_middle(exchange["prompt"], side), cut_middle(exchange["response"], side)]
            size = count_messages([HumanMessage(entry[0]), AIMessage(entry[1])])
            if used + size > limit:
                continue
        kept.insert(0, entry)
        used += size
    return kept


def _fit_exchange(exchange: list[BaseMessage], budget: int) -> dict[str, str]:
    """Cut tool results of the running turn in proportion so the turn fits ``budget``; never drop one.

    Returns the cut contents by ``tool_call_id``.
    """
    size = count_messages(exchange) - 5
    tools = [m for m in exchange if isinstance(m, ToolMessage)]
    if size <= budget or not tools:
        return {}
    tool_tokens = sum(count(message_text(m)) for m in tools)
    room = max(budget - (size - tool_tokens), 16 * len(tools))
    return {
        m.tool_call_id: cut_middle(
            message_text(m), max(16, room * count(message_text(m)) // max(tool_tokens, 1))
        )
        for m in tools
    }


def build_prompt(
    ctx: Context,
    messages: Sequence[BaseMessage],
    memories: list[str],
    context: list[str],
    catalog: int = 0,
) -> tuple[Plan, dict[str, Any]]:
    """The plan of the request for the model over the thread's ``messages``, and a summary of what was cut.

    The history is the newest ``ctx.history_limit`` exchanges of ``messages``; the running turn follows.
    ``catalog`` tokens are kept free for the tool catalog a prompted model call adds to the system prompt.
    """
    history, turn = conversation(messages, ctx.history_limit)
    first = messages[: len(messages) - len(turn) + 1]  # the thread up to the running turn's user message
    window, avail = ctx.window, ctx.window - ctx.reply_reserve - catalog
    prompt, turn_context = render_system(ctx), memory_block(memories) + context_block(context)
    plan: Plan = {
        "system": prompt,
        "context": turn_context,
        "history": list(range(len(history))),
        "user": None,
        "tools": {},
        "history_limit": ctx.history_limit,
    }
    tokens = count_messages(assemble(plan, messages))
    if tokens <= avail:
        return plan, {"cut": False, "tokens": tokens}
    user, exchange = turn[0], turn[1:]
    user_text = prompt_text(user)
    if count(user_text) > window * USER_SHARE:
        # The message alone is most of the window: send it (and this turn's tool exchange) without the rest.
        exchange_budget = min(count_messages(exchange) - 5, avail // 2) if exchange else 0
        target = int(min(window * USER_ALONE_SHARE, avail - exchange_budget - 2 * FRAME - 5))
        plan = {
            "system": None,
            "context": None,
            "history": [],
            "user": cut_middle(user_text, target),
            "tools": _fit_exchange(exchange, exchange_budget),
            "history_limit": ctx.history_limit,
        }
        tokens = count_messages(assemble(plan, messages))
        return plan, {
            "cut": True,
            "user_alone": True,
            "tool_results_cut": len(plan["tools"]),
            "tokens": tokens,
        }
    prompt, turn_context, system_cut = _fit_system(prompt, turn_context, int(window * SYSTEM_SHARE))
    plan = {
        "system": prompt,
        "context": turn_context,
        "history": _fit_history(history, int(window * HISTORY_SHARE)),
        "user": None,
        "tools": {},
        "history_limit": ctx.history_limit,
    }
    while plan["history"] and count_messages(assemble(plan, messages)) > avail:
        plan["history"] = plan["history"][1:]  # the guarantee: oldest exchanges go first
    fixed = count_messages(assemble(plan, first)) - 5
    plan["tools"] = _fit_exchange(exchange, avail - fixed - 5)
    tokens = count_messages(assemble(plan, messages))
    if tokens > avail:  # only a pathological system prompt gets here: the user message gives way
        plan["user"] = cut_middle(user_text, max(count(user_text) - (tokens - avail), 16))
        tokens = count_messages(assemble(plan, messages))
    summary = {
        "cut": True,
        "system_cut": system_cut,
        "history_kept": len(plan["history"]),
        "history_total": len(history),
        "tool_results_cut": len(plan["tools"]),
        "tokens": tokens,
    }
    return plan, summary


async def trim(state: AgentState, runtime: Runtime[Context]) -> dict:
    """Plan the model request within the window: system, history, and the running turn (see ``Plan``)."""
    if state.get("stop_reason") == "refused":
        return {}
    await ensure_tokenizer()
    ctx = runtime.context
    prompted = state.get("route") == "agent" and not ctx.native_tool_calling
    catalog = catalog_reserve(ctx.window) if prompted else 0
    plan, summary = build_prompt(
        ctx, state["messages"], state.get("memories") or [], state.get("context") or [], catalog
    )
    why = (
        f"{summary['tokens']} tokens fit the window of {ctx.window}, {ctx.reply_reserve} kept for the reply"
        if not summary["cut"]
        else f"cut to {summary['tokens']} tokens to fit {ctx.window} − {ctx.reply_reserve}"
    ) + (f", {catalog} for the tool catalog" if catalog else "")
    return {"plan": plan, "decisions": [decision("B11", "code", summary, why)]}


def route_after_trim(state: AgentState) -> Literal["call_model", "finish"]:
    """A refused query (decided by retrieve) ends the turn without calling the model."""
    return "finish" if state.get("stop_reason") == "refused" else "call_model"
