"""B11 — what is cut when the prompt does not fit the model's window.

AnythingLLM's budget, kept: system prompt with its context ≤ 15 % of the window, history ≤ 15 %, the user
message ≤ 70 %, ``reply_reserve`` tokens kept free, and nothing touched when everything fits. Beyond it: the
budget holds in agent mode too (tool results of the running turn are cut in the middle, never dropped, so a
tool message always follows its call), history keeps chronological order, and the request is guaranteed to
fit — AnythingLLM's shares add up to 100 % before the reserve.
"""

from __future__ import annotations

from datetime import datetime

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime

from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, decision
from workspace_agent.providers.tokens import count, count_messages, cut_middle, message_text

SYSTEM_SHARE, HISTORY_SHARE, USER_SHARE, USER_ALONE_SHARE = 0.15, 0.15, 0.70, 0.80
FRAME = 3  # tokens of framing per message, as in count_messages


def render_system(ctx: Context, memories: list[str]) -> str:
    """The system prompt with its variables filled in and the remembered facts appended."""
    now = datetime.now().astimezone()
    text = ctx.system_prompt
    for name, value in {
        "{date}": now.strftime("%Y-%m-%d"),
        "{datetime}": now.isoformat(timespec="seconds"),
        "{user_id}": ctx.user_id,
        "{workspace}": ctx.workspace,
    }.items():
        text = text.replace(name, value)
    if memories:
        text += "\n\nThings I remember about you:\n" + "\n".join(f"- {m}" for m in memories)
    return text


def context_block(texts: list[str]) -> str:
    """Document context in AnythingLLM's layout, appended to the system prompt."""
    if not texts:
        return ""
    return "\nContext:\n" + "".join(
        f"[CONTEXT {i}]:\n{t}\n[END CONTEXT {i}]\n\n" for i, t in enumerate(texts)
    )


def _fit_system(prompt: str, context: str, limit: int) -> tuple[str, bool]:
    if count(prompt + context) + FRAME <= limit:
        return prompt + context, False
    prompt = cut_middle(prompt, int(limit * 0.25)) if count(prompt) >= limit * 0.25 else prompt
    context = cut_middle(context, int(limit * 0.75)) if count(context) >= limit * 0.75 else context
    return prompt + context, True


def _fit_history(history: list[dict[str, str]], limit: int) -> list[BaseMessage]:
    """Newest exchanges that fit, in chronological order; the three newest are cut before being dropped."""
    kept: list[list[BaseMessage]] = []
    used = 0
    for i, exchange in enumerate(reversed(history)):
        pair: list[BaseMessage] = [HumanMessage(exchange["prompt"]), AIMessage(exchange["response"])]
        size = count_messages(pair)
        if used + size > limit:
            if i > 2:
                break
            side = int(limit / 2.2)
            pair = [
                HumanMessage(cut_middle(exchange["prompt"], side)),
                AIMessage(cut_middle(exchange["response"], side)),
            ]
            size = count_messages(pair)
            if used + size > limit:
                continue
        kept.insert(0, pair)
        used += size
    return [m for pair in kept for m in pair]


def _fit_exchange(exchange: list[BaseMessage], budget: int) -> tuple[list[BaseMessage], int]:
    """Cut tool results of the running turn in proportion so the turn fits ``budget``; never drop one."""
    size = count_messages(exchange) - 5
    tools = [m for m in exchange if isinstance(m, ToolMessage)]
    if size <= budget or not tools:
        return exchange, 0
    tool_tokens = sum(count(message_text(m)) for m in tools)
    room = max(budget - (size - tool_tokens), 16 * len(tools))
    out: list[BaseMessage] = []
    for m in exchange:
        if isinstance(m, ToolMessage):
            share = max(16, room * count(message_text(m)) // max(tool_tokens, 1))
            m = m.model_copy(update={"content": cut_middle(message_text(m), share)})
        out.append(m)
    return out, len(tools)


def build_prompt(
    ctx: Context,
    turn: list[BaseMessage],
    history: list[dict[str, str]],
    memories: list[str],
    context: list[str],
) -> tuple[list[BaseMessage], dict]:
    """The request for the model and a summary of what was cut."""
    window, avail = ctx.window, ctx.window - ctx.reply_reserve
    prompt, ctx_text = render_system(ctx, memories), context_block(context)
    history_msgs = [m for e in history for m in (HumanMessage(e["prompt"]), AIMessage(e["response"]))]
    full = [SystemMessage(prompt + ctx_text), *history_msgs, *turn]
    if count_messages(full) <= avail:
        return full, {"cut": False, "tokens": count_messages(full)}
    user, exchange = turn[0], turn[1:]
    user_text = message_text(user)
    if count(user_text) > window * USER_SHARE:
        # The message alone is most of the window: send it (and this turn's tool exchange) without the rest.
        exchange_budget = min(count_messages(exchange), avail // 2) if exchange else 0
        target = int(min(window * USER_ALONE_SHARE, avail - exchange_budget - 2 * FRAME - 5))
        exchange, tools_cut = _fit_exchange(exchange, exchange_budget)
        out = [HumanMessage(cut_middle(user_text, target), id=user.id), *exchange]
        return out, {
            "cut": True,
            "user_alone": True,
            "tool_results_cut": tools_cut,
            "tokens": count_messages(out),
        }
    system_text, system_cut = _fit_system(prompt, ctx_text, int(window * SYSTEM_SHARE))
    kept = _fit_history(history, int(window * HISTORY_SHARE))
    system = SystemMessage(system_text)
    fixed = count_messages([system, user])
    while kept and fixed + count_messages(kept) - 5 + count_messages(exchange) - 5 > avail:
        kept = kept[2:]  # the guarantee: oldest exchanges go first
    exchange, tools_cut = _fit_exchange(exchange, avail - fixed - (count_messages(kept) - 5 if kept else 0))
    out = [system, *kept, user, *exchange]
    if count_messages(out) > avail:  # only a pathological system prompt gets here: the user message gives way
        over = count_messages(out) - avail
        user = HumanMessage(cut_middle(user_text, max(count(user_text) - over, 16)), id=user.id)
        out = [system, *kept, user, *exchange]
    summary = {
        "cut": True,
        "system_cut": system_cut,
        "history_kept": len(kept) // 2,
        "history_total": len(history),
        "tool_results_cut": tools_cut,
        "tokens": count_messages(out),
    }
    return out, summary


def trim(state: AgentState, runtime: Runtime[Context]) -> dict:
    """Assemble the model request within the window: system, history, and the running turn.

    Synchronous on purpose: counting tokens is CPU work (and the first call loads the tokenizer from disk),
    so LangGraph runs this node in a worker thread instead of blocking the server's event loop.
    """
    ctx = runtime.context
    prompt, summary = build_prompt(
        ctx,
        state["messages"],
        state.get("history") or [],
        state.get("memories") or [],
        state.get("context") or [],
    )
    why = (
        f"{summary['tokens']} tokens fit the window of {ctx.window}, {ctx.reply_reserve} kept for the reply"
        if not summary["cut"]
        else f"cut to {summary['tokens']} tokens to fit {ctx.window} − {ctx.reply_reserve}"
    )
    return {"prompt": prompt, "decisions": [decision("B11", "code", summary, why)]}
