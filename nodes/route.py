"""A3 — chat or agent? Also where a new turn starts: the previous turn is folded into the conversation."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from ..checkpoints.members import check_member_run, require
from ..core.client_loop import clashes, exchange_problem
from ..core.context import Context
from ..core.conversation import (
    AGENT_PREFIX,
    EXECUTED_PREFIX,
    attachments,
    fold_update,
    message_text,
    turn_start,
)
from ..core.jobs import deadline, run_key
from ..core.question import ASK_TOOL, ResumeError, checked_answer, question_request
from ..core.state import AgentState, Decision, decision
from .services import Services

MAX_MESSAGE_CHARS = 1_000_000


class InvalidMessage(ValueError):
    """The new message cannot start a turn (empty, too large, not from the user, or not storable)."""


def _unstorable(value: Any, where: str = "the message") -> str | None:
    """Why a message cannot be stored, if it cannot: PostgreSQL text holds no NUL and no lone surrogate.

    Checked before anything runs, so a turn is never refused by the database after the model answered
    and its tools ran.
    """
    if isinstance(value, str):
        if "\x00" in value:
            return f"{where} contains a NUL character (\\x00), which cannot be stored; remove it and resend"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = f"U+{ord(value[exc.start]):04X}"
            return f"{where} contains a lone surrogate ({bad}), which is not valid text; remove it and resend"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((why for _, v in items if (why := _unstorable(v, where))), None)


def _abandoned(earlier: list, dispatched: list) -> list[Decision]:
    """Calls of the previous turn left without a result when the person sent a new message instead.

    Only a turn that stopped early has such calls: one that went on to an answer settled every call (run,
    rejected or answered as not run). A call still waiting for approval was never run. A call already
    approved and handed to ``execute_tool`` (``dispatched``) was stopped by a crash or a cancelled run: it
    may have run, and only its result is lost.
    """
    previous = earlier[turn_start(earlier) :]
    ran = {
        m.tool_call_id
        for m in previous
        if isinstance(m, ToolMessage) and (m.id or "").startswith(EXECUTED_PREFIX)
    }
    asked = next((m for m in reversed(previous) if isinstance(m, AIMessage)), None)
    pending = [c for c in (asked.tool_calls if asked else []) if c["id"] not in ran]
    started = {c["id"] for c in dispatched or []}
    notes: list[Decision] = []
    if never := [c["id"] for c in pending if c["id"] not in started]:
        why = "a new message arrived while these calls awaited approval: they were never run"
        notes.append(decision("D3", "person", {"abandoned": never}, why))
    if maybe := [c["id"] for c in pending if c["id"] in started]:
        why = "the run stopped (a crash or a cancel) while these approved calls ran: they may have run"
        notes.append(decision("C10", "code", {"interrupted": maybe}, why))
    return notes


NOT_A_TURN = "a turn starts with a user message: send {'role': 'user', 'content': '...'}"
#: How Agent Chat UI's made-up results for calls left without one start their ids
#: (``ensureToolCallsHaveResponses`` of its ``src/lib/ensure-tool-responses.ts``), sent before typed text.
FILLER_PREFIX = "do-not-render-"
UNDECIDED = "Not run: the person sent a message instead of deciding on this call."


def _typed_answer(messages: list) -> tuple[list, list, list[Decision]] | None:
    """A question of the model answered by typing, as Agent Chat UI sends it; ``None`` for anything else.

    Its generic interrupt view shows the question and offers no input: the person types the answer as a
    new message, which the UI sends after a made-up result for every call of the waiting reply. The typed
    text becomes the first waiting ``ask_person`` call's result (checked as a resume value would be), the
    other calls are answered as not run, and the turn of the question goes on instead of a new one starting.

    Returns the messages as the continued turn has them, the update that makes them so, and the trace.
    """
    if len(messages) < 3 or not isinstance(messages[-1], HumanMessage):
        return None
    fillers: list[ToolMessage] = []
    for message in reversed(messages[:-1]):
        if not (isinstance(message, ToolMessage) and (message.id or "").startswith(FILLER_PREFIX)):
            break
        fillers.insert(0, message)
    before = messages[: len(messages) - 1 - len(fillers)]
    asked = before[-1] if before else None
    if not fillers or not isinstance(asked, AIMessage):
        return None
    calls = {c["id"]: c for c in asked.tool_calls}
    waiting = [calls[f.tool_call_id] for f in fillers if f.tool_call_id in calls]
    question = next((c for c in waiting if c["name"] == ASK_TOOL), None)
    if question is None:
        return None
    typed = message_text(messages[-1]).strip()
    try:
        answer = checked_answer(typed, question_request(question["id"] or "", question["args"]))
    except ResumeError as exc:
        answer = f"The person answered {typed[:200]!r}, which does not answer the question: {exc}"
    results = [
        ToolMessage(answer, tool_call_id=c["id"], name=ASK_TOOL, id=f"{EXECUTED_PREFIX}{c['id']}")
        if c["id"] == question["id"]
        else ToolMessage(UNDECIDED, tool_call_id=c["id"], name=c["name"], status="error")
        for c in asked.tool_calls
    ]
    removed = [RemoveMessage(id=m.id) for m in [*fillers, messages[-1]] if m.id]
    why = f"asked {question['args'].get('question')!r}; the person typed the answer as a new message"
    return (
        [*before, *results],
        [*removed, *results],
        [decision("Q1", "person", {question["id"]: "answered"}, why)],
    )


async def _check_client_names(ctx: Context, services: Services) -> None:
    """Refuse a client's tool named like one of the workspace's (``client_loop.clashes``)."""
    if ctx.client_tools is None:
        return
    toolset = await services.toolset(ctx)
    if problem := clashes(ctx.client_tools, set(toolset.tools) | toolset.unchosen):
        raise InvalidMessage(problem)


def _for_the_client(ctx: Context) -> tuple[str, str]:
    """A3 for a run that brings an OpenAI client's reply format or tools: what the client asked for decides.

    A reply format makes a chat turn (no tool catalog or call grammar may shape that reply); the client's
    tools make an agent turn offering only them, unless its ``tool_choice`` is ``none``.
    """
    if ctx.response_format is not None:
        return "chat", f"the run asks for a {ctx.response_format.type} reply: a chat turn written in it"
    assert ctx.client_tools is not None
    if ctx.client_tools.choice == "none":
        return "chat", "the run brings the client's tools with tool_choice none: a chat turn"
    count = len(ctx.client_tools.functions)
    return "agent", f"the run brings the client's {count} tool(s): only they are offered, and go back to it"


async def route(
    state: AgentState, runtime: Runtime[Context], config: RunnableConfig, *, services: Services
) -> dict:
    """Pick plain chat or the tool-using agent for this turn, the way AnythingLLM does.

    ``@agent`` at the very start always means agent (the model never sees the prefix; the thread keeps it
    where it was typed). In automatic mode a model that calls tools natively gets the agent when its tools
    could be set up. Anything else is plain chat; query mode is plain chat that answers only from documents.
    The previous turn is folded into the conversation here: its user message and final answer stay, with
    the newest ``history_limit`` exchanges before it, so the thread shows what the model is given.
    """
    ctx = runtime.context
    access = await require(ctx.user_id, ctx.workspace)  # a shared workspace's member, or refused
    if ctx.job is not None and runtime.store is not None:  # listed under its job, refused or not
        await _record_job_run(runtime, config)
    await check_member_run(access, ctx.model_dump(mode="json"))  # on the workspace's settings, or refused
    messages = state["messages"]
    continued = _typed_answer(messages)
    if continued is not None:
        return _continue(continued, state, ctx)
    at = turn_start(messages)
    new = messages[at] if messages else None
    if not isinstance(new, HumanMessage):
        raise InvalidMessage(NOT_A_TURN)
    exchange = messages[at + 1 :]
    if problem := exchange_problem(exchange, ctx.client_tools):
        raise InvalidMessage(problem)
    for m in exchange:  # the client's calls and results are stored in the thread like the message
        calls = m.tool_calls if isinstance(m, AIMessage) else []
        if problem := _unstorable([m.content, *[c["args"] for c in calls]], f"the {m.type} message"):
            raise InvalidMessage(problem)
    await _check_client_names(ctx, services)
    text = message_text(new)
    if not text.strip() and not attachments(new):
        raise InvalidMessage("the message is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidMessage(f"the message has {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}")
    if problem := _unstorable(new.content):
        raise InvalidMessage(problem)

    if ctx.response_format is not None or ctx.client_tools is not None:
        chosen, why = _for_the_client(ctx)
    elif text.startswith(AGENT_PREFIX):
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
    # a query workspace answers only from its documents, whoever brings tools: a client's run refuses too
    query_only = ctx.chat_mode == "query" and (chosen == "chat" or ctx.client_tools is not None)
    return {
        "messages": fold_update(messages[:at], ctx.history_limit),
        "route": chosen,
        "query_only": query_only,
        "decisions": Overwrite(
            [*_abandoned(messages[:at], state.get("approved") or []), decision("A3", "code", chosen, why)]
        ),
        "tool_calls_made": Overwrite(0),
        **_gathered_again(ctx),
    }


async def _record_job_run(runtime: Runtime[Context], config: RunnableConfig) -> None:
    """List this run under its scheduled job, in the job owner's part of the store (``core/jobs.py``).

    The engines fire a job's run on a thread of its own and carry none of the cron's metadata onto it, so
    the run says itself whose it is. Written once per thread: a resumed run keeps its first record.
    """
    ctx, store = runtime.context, runtime.store
    assert ctx.job is not None and store is not None
    thread_id = str((config.get("configurable") or {}).get("thread_id") or "")
    key = run_key(ctx.user_id, ctx.job)
    if thread_id and await store.aget(key, thread_id) is None:
        await store.aput(key, thread_id, {"thread_id": thread_id, "job": ctx.job, "started_at": time.time()})


def _gathered_again(ctx: Context) -> dict:
    """What a turn gathers anew: documents, uploads, offered tools, plan, stop reason, time to work."""
    return {
        "deadline": deadline(ctx.time_limit),
        "sources": Overwrite([]),
        "uploads": [],
        "context": [],
        "approved": [],
        "offered": None,
        "plan": {},
        "stop_reason": None,
    }


def _continue(continued: tuple[list, list, list[Decision]], state: AgentState, ctx: Context) -> dict:
    """The update that goes on with a question's turn once its answer was typed (``_typed_answer``).

    The turn keeps its route, its decisions and the calls it made; what the turn gathered (context,
    sources) is gathered again by the nodes after this one, for the same question.
    """
    messages, update, notes = continued
    at = turn_start(messages)
    why = "the answer to the turn's question arrived as a new message: the same turn goes on"
    return {
        "messages": [*update, *fold_update(messages[:at], ctx.history_limit)],
        "route": state.get("route") or "agent",
        "decisions": [*notes, decision("A3", "code", state.get("route") or "agent", why)],
        **_gathered_again(ctx),
    }
