"""C1 and G2 — the model picks the next tool (or answers); a reply cut off by the token limit is flagged."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from ..core.client_loop import hand_back, stub_tools
from ..core.context import Context
from ..core.conversation import message_text, turn_asked
from ..core.figures import refused_calculations
from ..core.jobs import time_left, timed_out
from ..core.plan import assemble
from ..core.prompts import ALREADY_RUN, CUT_CALL
from ..core.state import AgentState, Decision, decision
from ..providers.prompted import (
    answered_tools,
    digest,
    last_results,
    named_unused,
    names_a_tool,
    prompted_turn,
    ran_calls,
    this_turn_only,
    waiting_calls,
    withheld_call,
    wrote_last,
)
from ..providers.prompted.rules import on
from ..providers.prompted.streaming import progress, reply_kind
from .services import Services

#: Why the tools are withheld after the write the question asked for (``write_ends``).
WRITE_DONE = "the write it asked for is done"


def _only_repeats(messages: list[AnyMessage]) -> bool:
    """Whether the last round's calls all repeated calls already run this turn (answered, not run, by C10)."""
    results = last_results(messages)
    return bool(results) and all(message_text(m).endswith(ALREADY_RUN) for m in results)


def _made_up_again(messages: list[AnyMessage], tools: list[BaseTool]) -> bool:
    """Whether the last round was only calculations refused for a figure nobody gave, and none can find it.

    There is none when ``calculate`` is the turn's only tool, or when it was refused so once already: with no
    document to read, the 1.5B wrote ten calculations of made-up prices in a row, each refused (husk, with
    history).
    """
    results, refused = last_results(messages), refused_calculations(messages)
    if not results or not all(m in refused for m in results):
        return False
    return len(refused) > len(results) or {t.name for t in tools} <= {"calculate"}


async def _offered_tools(
    state: AgentState, ctx: Context, services: Services
) -> tuple[list[BaseTool], str | None, list[Decision]]:
    """The turn's tools, why they are withheld from this call if they are, and that decision.

    They are withheld once the budget is spent, and after a round of nothing but repeats: a model that asks
    again for results it already has is going round in circles (the 1.5B repeated one ``calculate`` seven
    times after the right result), so it is asked for its answer from them.
    """
    if state.get("route") != "agent" or ctx.client_tools is not None:  # a client's run: its tools alone
        return [], None, []
    offered = state.get("offered")
    tools = [t for t in (await services.toolset(ctx)).tools.values() if offered is None or t.name in offered]
    if not tools:
        return [], None, []
    made = state.get("tool_calls_made", 0)
    if made >= ctx.max_tool_calls:
        why = f"{made} of {ctx.max_tool_calls} tool calls spent: the model must answer"
        return (
            tools,
            f"this turn's {ctx.max_tool_calls} tool calls are spent",
            [decision("G1", "code", "tools withheld", why)],
        )
    if on("answer_after_repeats") and _only_repeats(state["messages"]):
        why = "the last round only repeated calls whose results the model has: it answers from them"
        return (
            tools,
            "it asked again for results it already has",
            [decision("G1", "code", "tools withheld", why)],
        )
    if _made_up_again(state["messages"], tools):
        why = (
            "its calculations started from figures nobody gave, and nothing is left to find them: it answers"
        )
        return tools, "the figures it needs are not given", [decision("G1", "code", "tools withheld", why)]
    messages: list[BaseMessage] = list(state["messages"])
    prompted = not ctx.native_tool_calling and on("no_args_once")
    if prompted and answered_tools(tools, messages) >= {t.name for t in tools}:
        names = ", ".join(t.name for t in tools)
        why = f"{names} take no arguments and have answered in this turn: asked again, they say the same"
        return tools, "its tools have answered", [decision("G1", "code", "tools withheld", why)]
    question = turn_asked(messages)
    wrote = wrote_last(messages, tools, question) if not ctx.native_tool_calling and on("write_ends") else []
    if wrote and not named_unused(question, messages, tools):
        why = (
            f"{', '.join(wrote)} ran and succeeded in the last round, and the question asks for no other "
            "action: the write was the last step, so the next reply is the answer"
        )
        return tools, WRITE_DONE, [decision("G1", "code", "tools withheld", why)]
    return tools, None, []


async def _prompted(
    model: Any,
    request: list[BaseMessage],
    question: str,
    tools: list[BaseTool],
    withheld: str | None,
    ctx: Context,
    grammar: bool,
    given_with: bool,
    forced: frozenset[str] = frozenset(),
) -> tuple[AIMessage, str, list[Decision]]:
    """A prompted model call: the tools described in the prompt, every round's results in a digest.

    After each round the tools are offered again and the model decides: more calls, or the answer. A reply
    that writes a call where none can run (the budget spent, or a tool that does not exist even when asked
    again) is never shown as JSON: the person reads why, and what the tools returned. ``forced`` names the
    tools a reply must call (a client's ``tool_choice`` of ``required`` or a name): under the call grammar
    the reply is calls of those only; without a grammar the model is only asked.
    """
    results_in = any(isinstance(m, ToolMessage) for m in request)
    named = named_unused(question, request, tools) if results_in and withheld is None else []
    going_on = results_in and withheld is None
    answered = answered_tools(tools, request) if going_on and on("no_args_once") else frozenset()
    turn = await prompted_turn(
        model,
        # After the asked write the next-step ask stands, under a grammar of text only: told to "give the
        # results above" instead (the spent budget's ask), the 1.5B answered a note's turn with the first
        # searched passage, which was about something else
        digest(request, more=withheld in (None, WRITE_DONE), named=named),
        tools,
        max_tokens=ctx.max_tokens or ctx.reply_reserve,
        window=ctx.window,
        grammar=grammar,
        answer_only=withheld is not None,
        calls_only=forced or waiting_calls(request),
        first_round=not results_in,
        given_with=given_with,
        ran=ran_calls(request) if going_on else frozenset(),
        still_named=tuple(named),
        answered=answered,
    )
    under = ", under the call grammar" if turn.constrained else ""
    how = f"in JSON text (prompted tool calling{under})"
    notes: list[Decision] = []
    if named:
        why = f"the question names {', '.join(named)}, not used in this turn yet: the results' digest says so"
        notes.append(decision("C1", "code", {"named_unused": named}, why))
    if answered and turn.constrained:
        why = (
            f"{', '.join(sorted(answered))} took no arguments and answered in this turn: the grammar leaves "
            "them out, so the reply is another tool's call or the answer"
        )
        notes.append(decision("C1", "code", {"answered": sorted(answered)}, why))
    if turn.left_out:
        why = (
            f"the catalog of {len(tools)} tools did not fit the window: the {len(turn.offered)} most "
            "relevant to the message were described"
        )
        notes.append(decision("C1", "code", {"offered": turn.offered, "left_out": turn.left_out}, why))
    if turn.grammar_refused:
        why = f"the endpoint refused the call grammar; free text was read: {turn.grammar_refused}"
        notes.append(decision("C1", "code", "grammar refused", why))
    if turn.reopenings:
        chances = ", ".join(f"{p:.2f}" for p in turn.reopenings)
        why = (
            f"the model closed its list of calls while giving another call a chance of {chances}: the "
            f"list was reopened {len(turn.reopenings)} time(s) for it to go on"
        )
        notes.append(decision("C1", "code", "list reopened", why))
    if turn.repeats:
        why = f"the reply repeated a call with the same arguments {turn.repeats} time(s); it runs once"
        notes.append(decision("C1", "code", "repeats dropped", why))
    if turn.described:
        why = (
            f"the model answered that {', '.join(turn.described)} should be called instead of calling it: it "
            "was asked for that call, under a grammar of calls only"
        )
        notes.append(decision("C1", "code", "described call asked for", why))
    if turn.repeated:
        why = (
            f"the reply only repeated calls of {', '.join(turn.repeated)} already run in this turn: it was "
            f"asked again for the answer or a call of {', '.join(named) or 'no tool'} (the question names "
            "them and they have not run)"
        )
        notes.append(decision("C1", "code", {"repeat_refused": turn.repeated}, why))
    if turn.retried:  # a call to a tool that does not exist: asked again for a plain answer
        why = "the reply called a tool that does not exist; the model was asked again without tools"
        notes.append(decision("C1", "model", "no such tool", why))
    response = turn.message
    text = message_text(response)
    written = names_a_tool(text, whole=turn.constrained)  # grammar: whole replies only
    # A list of calls cut off by the token limit (the 1.5B once wrote a timestamp into an expression until it
    # ran out) is no answer either: half-written JSON would reach the person as it stood.
    cut = response.response_metadata.get("finish_reason") == "length" and reply_kind(text) == "calls"
    if not response.tool_calls and not response.invalid_tool_calls and (written or cut):
        cause = withheld or (CUT_CALL if cut else "it named a tool that does not exist")
        answer = withheld_call(request, cause)
        response = response.model_copy(update={"content": answer})
        why = f"the model wrote a call as its answer, and {cause}: the person reads that, not the JSON"
        notes.append(decision("G1", "code", "call withheld", why))
    return response, how, notes


def _sampled(model: Any, ctx: Context, *, max_tokens: int | None) -> Any:
    """The model with the workspace's own sampling asked of it: its temperature, and a reply's length."""
    options: dict[str, Any] = {"temperature": ctx.temperature, "max_tokens": max_tokens}
    given = {k: v for k, v in options.items() if v is not None}
    return model.bind(**given) if given else model


async def call_model(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Call the model with the trimmed prompt and the turn's tools: natively, or described in the prompt.

    Once ``max_tool_calls`` calls are spent the model is called without tools, so it has to answer. A model
    without native tool calling (reached through ``@agent``) gets the tools described in its system prompt
    and answers with JSON naming them; after each round it reads the results as a digest and is offered the
    tools again, so the model, not code, ends the loop (G1). A reply that stopped on ``length`` is recorded
    as ``max_tokens``: its text stands, but a tool call in it may be half-written and is never executed
    (AnythingLLM runs such calls with ``{}``); a prompted reply cut off inside its list of calls is replaced
    by words saying so, with what the tools returned.
    """
    ctx = runtime.context
    model: Any = services.chat_model(ctx)
    tools, withheld, decisions = await _offered_tools(state, ctx, services)
    spent = state.get("tool_calls_made", 0) >= ctx.max_tool_calls and withheld is not None
    stop_reason = "max_tool_calls" if spent else None
    plan = state.get("plan", {})  # trim's, always there by now; missing, it is the empty plan between turns
    request: list[BaseMessage] = assemble(plan, state["messages"])
    how = "natively"
    client = ctx.client_tools if state.get("route") == "agent" else None
    left = time_left(state.get("deadline"))
    try:
        async with asyncio.timeout(left):
            if left == 0:
                raise TimeoutError
            if client is not None and ctx.native_tool_calling:
                model = model.bind_tools(
                    [f.openai() for f in client.functions], tool_choice=client.openai_choice()
                )
                response = await _sampled(model, ctx, max_tokens=ctx.max_tokens).ainvoke(request)
            elif state.get("route") == "agent" and not ctx.native_tool_calling:
                grammar = services.call_grammar()
                sampled = _sampled(
                    model, ctx, max_tokens=None
                )  # the prompted turn asks for its own max_tokens
                asked = turn_asked(state["messages"])
                given_with = bool(plan.get("context"))  # memories or documents before the person's words
                offer = stub_tools(client) if client is not None else tools
                if on("history_first_round"):
                    request, left_out = this_turn_only(request)
                    if left_out:
                        why = (
                            f"{left_out} message(s) of earlier exchanges left out after the turn's first "
                            "round: its calls carry what the model read there"
                        )
                        decisions.append(decision("B4", "code", "earlier exchanges left out", why))
                forced = client.forced if client is not None else frozenset()
                response, how, notes = await _prompted(
                    sampled, request, asked, offer, withheld, ctx, grammar, given_with, forced
                )
                decisions += notes
            else:
                if tools and withheld is None:
                    model = services.bind_tools(model, tools)
                progress("reading")
                if ctx.response_format is not None:  # the endpoint enforces it (llama.cpp: as a grammar)
                    model = model.bind(response_format=ctx.response_format.openai())
                model = _sampled(model, ctx, max_tokens=ctx.max_tokens)
                response = await model.ainvoke(request)
    except TimeoutError:
        why = "the model was still writing" if left else "no time was left for a model call"
        return timed_out(ctx.time_limit, why)
    assert isinstance(response, AIMessage)
    if client is not None:
        response, notes = hand_back(response, client)
        decisions += notes
        stop_reason = stop_reason or ("tool_calls" if response.tool_calls else None)
    if response.response_metadata.get("finish_reason") == "length":
        stop_reason = "max_tokens"
        calls = len(response.tool_calls) + len(response.invalid_tool_calls)
        why = f"the reply hit the output limit; {calls} tool call(s) in it will not run"
        decisions.append(decision("G2", "code", "max_tokens", why))
    names = [c["name"] for c in response.tool_calls]
    why = f"the model asked for {len(names)} tool call(s) {how}" if names else "the model answered"
    decisions.append(decision("C1", "model", names or "answer", why))
    return {"messages": [response], "decisions": decisions, "stop_reason": stop_reason}


def route_after_model(
    state: AgentState, runtime: Runtime[Context] | None = None
) -> Literal["approve", "check_figures", "finish"]:
    """G1: tool calls go to approval; a text reply has its figures checked (G3), then ends the turn.

    Calls in a reply cut off, or past the budget, never run: that turn ends. Its text is checked all the
    same: the 1.5B once copied the results' digest into an answer until the output limit cut it off.

    A run for an OpenAI client (``client_tools`` or ``response_format``) always ends here: calls of the
    client's tools are handed back to it (the C10 decision ``call_model`` recorded) and nothing of such a
    run reaches ``approve`` or ``execute_tool``; its answer goes back as the model wrote it (a JSON reply
    rewritten for a figure would no longer be the format asked for, and the client's loop owns its results).
    A run past its time limit (J1, ``timed_out``) ends too.
    """
    last = state["messages"][-1]
    ctx = runtime.context if runtime is not None else None
    for_client = ctx is not None and (ctx.client_tools is not None or ctx.response_format is not None)
    if not isinstance(last, AIMessage) or for_client or state.get("stop_reason") == "timed_out":
        return "finish"
    if last.tool_calls or last.invalid_tool_calls:
        ended = ("max_tokens", "max_tool_calls", "tool_calls")  # cut off, out of budget, or the client's
        return "finish" if state.get("stop_reason") in ended else "approve"
    return "check_figures"
