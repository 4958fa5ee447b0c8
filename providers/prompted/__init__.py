"""Prompted tool calling, for models that cannot call tools natively (AnythingLLM's "untooled" path).

The tools are described in the system prompt (``catalog``) and the model answers with JSON naming them; where
the endpoint takes one, a grammar (``call_grammar``) keeps that JSON well-formed. Every call of the reply is
read (``call_parsing``); anything that names no known tool is an ordinary answer. Under the grammar, a list
the model closed while giving another call a real chance is reopened for it (``more_calls``).
After each round of calls the results are folded into the user message as a plain-text digest and the
tools are offered again: the model decides whether to call more (a step that needs an earlier result) or to
answer. Only when the turn's budget is spent is it asked for the answer alone, under a grammar that admits
text only, and a reply that still writes a call is never shown to the person as JSON (``withheld_call``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from ...core.conversation import (
    call_key,
    message_text,
    passages_given_once,
    results_in_words,
    turn_question,
    turn_start,
)
from ...core.prompts import (
    ALREADY_RUN,
    ASK_ANSWER,
    ASK_NEXT_STEP,
    HELD,
    NAMED_UNUSED,
    REPEATED,
    RESULTS_HEADER,
    SLOT,
    WAITING,
)
from ..tokens import count, count_messages
from .call_grammar import TEXT_GRAMMAR, call_grammar
from .call_parsing import names_a_tool, parse_reply
from .catalog import (
    acts,
    builtin,
    coerce,
    fit_tools,
    placeholders,
    schema_of,
    with_catalog,
    with_reminder,
)
from .cues import asked_for
from .more_calls import CONTINUE_AT, MAX_REOPENINGS, more_probability, reopened
from .rules import on
from .streaming import ask

__all__ = [
    "PromptedTurn",
    "answered_tools",
    "digest",
    "names_a_tool",
    "parse_tool_calls",
    "prompted_turn",
    "ran_calls",
    "this_turn_only",
    "withheld_call",
]

FRAME = 8  # the catalog is joined to the system prompt; a little slack for the count's approximation
TOP_LOGPROBS = 10  # alternatives per token asked for under the grammar, to see a list closed too early
MIN_ROOM = 48  # reply tokens a reopened list needs at least: about one more call
#: How a prompted model reads a round's results: ``"digest"``, plain text folded into the user message, or
#: ``"messages"``, the calls and tool messages as the chat template renders them. ``bench/chains.py
#: --results`` measures both on the same tasks.
RESULTS_AS = "digest"
#: The error of a call written with a slot for a result not yet had (``catalog.placeholders``).
_INTENT = re.compile(r"\b(call|calls|calling|use|need to|invoke)\b", re.IGNORECASE)


def parse_tool_calls(text: str, names: set[str]) -> list[dict[str, Any]]:
    """The valid tool calls a reply asks for, for tools known by name only."""
    return parse_reply(text, {n: () for n in names})[0]


@dataclass
class PromptedTurn:
    """A prompted model call: the reply (calls parsed out), what the catalog offered, what happened."""

    message: AIMessage
    offered: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    retried: bool = False
    grammar_refused: str | None = None
    repeats: int = 0
    constrained: bool = False  # the reply was written under the call grammar
    reopenings: list[float] = field(default_factory=list)  # the chance of another call at each reopened close
    described: list[str] = field(default_factory=list)  # tools the text said to call, then asked for as calls
    repeated: list[str] = field(default_factory=list)  # tools of a reply that only repeated calls already run


async def prompted_turn(
    model: Any,
    request: list[BaseMessage],
    tools: list[BaseTool],
    *,
    max_tokens: int | None = None,
    window: int | None = None,
    grammar: bool = False,
    answer_only: bool = False,
    calls_only: frozenset[str] = frozenset(),
    first_round: bool = True,
    given_with: bool = False,
    ran: frozenset[str] = frozenset(),
    still_named: tuple[str, ...] = (),
    answered: frozenset[str] = frozenset(),
) -> PromptedTurn:
    """One model call with the tools described in the prompt; every call in the reply becomes a tool call.

    Args:
        model: The chat model.
        request: The trimmed request, without the catalog.
        tools: The tools described in the catalog; none (C0 chose none) leaves the catalog out, and the
            reply is text (under the text grammar where the endpoint takes one).
        max_tokens: The reply limit (the reserve trim kept free), so a runaway list cannot fill the window.
        window: The model's window: what the request and ``max_tokens`` leave of it is the catalog's room;
            when the whole catalog needs more, the tools most relevant to the user's message are kept.
        grammar: Send a llama.cpp grammar (``call_grammar``) with the request, so the reply is plain text or
            well-formed calls of the offered tools; only for an endpoint that takes one. The tokens'
            probabilities are asked for too, and a list the model closed while giving another call at least
            ``CONTINUE_AT`` is reopened for it (``more_calls``). A reply whose first characters
            show it is text streams to the turn's ``messages`` stream as it is written.
        answer_only: The turn's tool budget is spent: the catalog stays in the prompt (its prefix is what
            the server has cached) but the reply is asked for as text, under a grammar that admits nothing
            else where the endpoint takes one, and is not read for calls.
        calls_only: The tools of the calls the model's last reply left waiting for results that are now
            in (``waiting_calls``): under the grammar this reply is calls of those tools only, so the model
            writes the step it planned; the arguments stay its choice.
        first_round: No call has run in this turn yet. Only then is the catalog's rule said again after
            the user's message (``with_reminder``): once results are in, the next-step ask says what to do,
            and the reminder after it ("reply with only the JSON list of calls") drew the 1.5B, in a thread
            with history, into writing the ``calculate`` it had just run again instead of the ``save_note``
            that came next.
        given_with: The user message carries document context or memories before the person's words: the
            catalog's rule is then said again after it, as after history (``with_reminder``).
        ran: The calls already run in this turn (``ran_calls``). Under the grammar, a reply that only
            repeats them is asked again (``_without_repeats``): the answer, or a call of a tool in
            ``still_named``.
        still_named: The offered tools the person's question names that no call of this turn has used yet
            (``named_unused``).
        answered: Offered tools whose answer is in already and cannot change within the turn
            (``answered_tools``). They stay in the catalog, so its prefix is still the one the server has
            cached, but under the grammar no call of them can be written again.

    Returns:
        The reply with its calls (and ambiguous calls as invalid ones). A reply that names only tools that do
        not exist is asked again without tools, and that plain answer is returned with ``retried``.

    """
    query = message_text(question) if (question := turn_question(request)) else ""
    room = window - (max_tokens or 0) - count_messages(request) - FRAME if window else None
    offered, left_out = fit_tools(tools, query, room)
    schemas = {t.name: schema_of(t) for t in offered}
    options: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
    callable_ = [t for t in offered if t.name not in answered]
    planned = [t for t in offered if t.name in calls_only] or callable_
    if grammar and (answer_only or not planned):
        options["extra_body"] = {"grammar": TEXT_GRAMMAR}
    elif grammar:
        options.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        rules = call_grammar(planned, schemas, calls_only=bool(calls_only))
        options["extra_body"] = {"grammar": rules}
    reminding = first_round and not answer_only and offered and on("reminder")
    reminded = with_reminder(request, given_with) if reminding else request
    # No tool offered (C0 chose none): no catalog either, and the grammar admits text only
    prompt = with_catalog(reminded, offered) if offered else reminded
    refused = None
    try:
        response = await ask(model, options, prompt, show_text="extra_body" in options)
    except Exception as exc:
        if "extra_body" not in options or "grammar" not in str(exc).lower():
            raise
        # The endpoint refused the grammar (a schema it cannot compile, a server that takes none): the
        # reply is then read as free text, as it is for any endpoint without one.
        for key in ("extra_body", "logprobs", "top_logprobs"):
            options.pop(key, None)
        refused = " ".join(str(exc).split())[:300]
        response = await ask(model, options, prompt)
    reopenings: list[float] = []
    text, constrained = message_text(response), "extra_body" in options
    if constrained and not answer_only and planned and on("reopen"):
        text, reopenings = await _reopen(model, options, prompt, response, planned, schemas)
    if constrained:  # the tokens' probabilities were asked for this decision only; the thread keeps none
        meta = {k: v for k, v in response.response_metadata.items() if k != "logprobs"}
        response = response.model_copy(update={"response_metadata": meta})
    turn = PromptedTurn(
        response,
        [t.name for t in offered],
        left_out,
        grammar_refused=refused,
        constrained=constrained,
        reopenings=reopenings,
    )
    if answer_only or response.response_metadata.get("finish_reason") == "length":
        return turn
    acting = {t.name for t in offered if acts(t)}
    found = _read_calls(response, text, schemas, acting, whole=constrained)
    named_left = [t for t in offered if t.name in still_named]
    refusing = constrained and named_left and not calls_only and on("repeat_refused")
    if found is not None and refusing and _all_ran(found[0], ran):
        return await _without_repeats(model, options, prompt, turn, found[0], named_left, schemas, acting)
    if found is not None:
        return replace(turn, message=found[0], repeats=found[1])
    if names_a_tool(text, whole=constrained):
        text_only = {"extra_body": {"grammar": TEXT_GRAMMAR}} if constrained else {}
        plain = await ask(model, text_only, request, show_text=constrained)
        return replace(turn, message=plain, retried=True)
    asking = constrained and planned and not calls_only and on("described_call")
    named = described_calls(text, callable_) if asking else []
    if named:  # "you need to call the `calculate` function with 3 * 4817": asked for that call itself
        asked = {k: v for k, v in options.items() if k not in ("logprobs", "top_logprobs")}
        asked["extra_body"] = {"grammar": call_grammar(callable_, schemas, calls_only=True)}
        again = await ask(model, asked, prompt)
        found = _read_calls(again, message_text(again), schemas, acting, whole=True)
        if found is not None and again.response_metadata.get("finish_reason") != "length":
            return replace(turn, message=found[0], repeats=found[1], described=named)
    return turn


def _read_calls(
    response: AIMessage, text: str, schemas: dict[str, dict[str, Any]], acting: set[str], *, whole: bool
) -> tuple[AIMessage, int] | None:
    """The reply as a message of calls (and how many repeats were dropped); ``None`` if it writes none.

    Calls that cannot run yet (``_ready``) are returned as invalid calls that say so; ``acting`` names the
    offered tools that change something.

    ``whole``: the reply was written under the call grammar, so only a reply that is calls has any; a call
    quoted in its prose is text (``call_parsing.parse_reply``).
    """
    params = {n: tuple(s.get("properties") or ()) for n, s in schemas.items()}
    calls, invalid = parse_reply(text, params, whole=whole)
    if not calls and not invalid:
        return None
    calls, repeats = _once_each([{**c, "args": coerce(c["args"], schemas[c["name"]])} for c in calls])
    calls, waiting = _ready(calls, schemas, acting) if on("held_writes") else (calls, [])
    meta = {**response.response_metadata, "prompted_text": text}
    message = AIMessage(
        "", tool_calls=calls, invalid_tool_calls=[*invalid, *waiting], id=response.id, response_metadata=meta
    )
    return message, repeats


def described_calls(text: str, tools: list[BaseTool]) -> list[str]:
    """The offered tools a text reply says should be called, instead of calling them.

    Under the grammar the 1.5B sometimes answers "you need to call the `calculate` function with the
    expression 3 * 4817": the step it means to take, written as advice to the person; or "you would use the
    following call" above the call in a fence. A tool named as a call to make (in backticks, as "the X
    function/tool", or as a quoted call's ``"name"``, beside "call", "use" or "need to") is that. The quoted
    call itself never runs (a call in prose is text under the grammar): the model is asked for the call.
    """
    if not _INTENT.search(text):
        return []
    named = []
    for tool in tools:
        name = re.escape(tool.name)
        if re.search(rf"`{name}`|\b{name}\s+(function|tool)\b|\"name\"\s*:\s*\"{name}\"", text):
            named.append(tool.name)
    return named


async def _reopen(
    model: Any,
    options: dict[str, Any],
    prompt: list[BaseMessage],
    response: AIMessage,
    tools: list[BaseTool],
    schemas: dict[str, dict[str, Any]],
) -> tuple[str, list[float]]:
    """The reply's text, its list of calls reopened while the model gave another call ``CONTINUE_AT``.

    The model is given its reply up to the last call and a comma as the start of its answer, and writes on
    under the grammar of the rest of a list of these ``tools`` (the next calls and the close). A
    continuation cut off by the token limit is dropped. Returns the text and the chance of another call at
    each close that was reopened.
    """
    chances: list[float] = []
    text, prefix, reply = message_text(response), "", response
    limit, grammar = options.get("max_tokens"), None
    while len(chances) < MAX_REOPENINGS and reply.response_metadata.get("finish_reason") != "length":
        tokens = (reply.response_metadata.get("logprobs") or {}).get("content") or []
        more = more_probability(tokens, prefix)
        head = reopened(text)
        room = limit - count(head or "") if limit else None
        if more is None or more < CONTINUE_AT or head is None or (room is not None and room < MIN_ROOM):
            break
        grammar = grammar or call_grammar(tools, schemas, reopened=True)
        asked = {**options, "extra_body": {"grammar": grammar}, **({"max_tokens": room} if room else {})}
        reply = await ask(model, asked, [*prompt, AIMessage(head)])
        if reply.response_metadata.get("finish_reason") == "length":
            break
        written = message_text(reply)
        text = written if written.startswith(head) else head + written  # llama.cpp answers with the head
        prefix = head
        chances.append(more)
    return text, chances


def answered_tools(tools: list[BaseTool], messages: list[BaseMessage]) -> frozenset[str]:
    """The read-only tools without arguments that have already answered in the running turn.

    Such a tool says the same thing each time it is asked within a turn (the date, the documents' list), so a
    second call of it can only cost a round. Under the grammar they are not offered again (``prompted_turn``'s
    ``answered``); when they are all the turn has, the model is asked for its answer (``call_model``).
    """
    ran = ran_calls(messages)
    return frozenset(
        t.name
        for t in tools
        if not acts(t)
        and not schema_of(t).get("properties")
        and call_key({"name": t.name, "args": {}}) in ran
    )


def last_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The results of the last round: the tool messages the conversation ends with, last first."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return results


def this_turn_only(request: list[BaseMessage]) -> tuple[list[BaseMessage], int]:
    """The request without the earlier exchanges once this turn has results, and how many it left out.

    The earlier exchanges are read where they matter, in the turn's first round: the model resolves "that
    plan" into the calls it writes. After that the calls and results carry what it needs. Left in, they drew
    the 1.5B into an earlier exchange: with two small talk exchanges before "find out how long Lanternfish
    keeps check results and note it down", it searched, then saved the note "A yellow fruit is an apple.",
    the last answer of the history; in another thread it answered the history's "what colour is a clear
    daytime sky?" after its search.
    """
    start = turn_start(request)
    if not any(isinstance(m, ToolMessage) for m in request[start:]):
        return request, 0
    head = [m for m in request[:start] if isinstance(m, SystemMessage)]
    return [*head, *request[start:]], start - len(head)


def wrote_last(messages: list[BaseMessage], tools: list[BaseTool], question: str) -> list[str]:
    """The actions the question asks for that the last round ran, if it came after results and all succeeded.

    A write made from results is the last step of what a person asks in one turn ("find it, work it out
    and save it in a note"): the 1.5B, after such a note was saved, wrote the same ``save_note`` again in
    most note tasks, a round to be told it had already run. A write in the turn's first round may come
    before what was asked next ("ring the bell, then tell me the day"), so it ends nothing. Empty too when a
    call of the round failed, was refused, repeated an earlier one or waits for results (the model still
    has something to decide), and when nothing the question asks for acted: a tool is taken to act unless
    it says it only reads, so an MCP lookup without that hint must not end a chain.
    """
    results = last_results(messages)
    at = len(messages) - len(results) - 1
    calls = messages[at] if results and at >= 0 else None
    if not isinstance(calls, AIMessage) or calls.invalid_tool_calls:
        return []
    if not any(isinstance(m, ToolMessage) for m in messages[turn_start(messages) : at]):
        return []  # the turn's first round
    if any(r.status == "error" or message_text(r).endswith(ALREADY_RUN) for r in results):
        return []
    asked = {t.name for t in tools if acts(t) and asked_for(t, question, builtin(t))}
    return list(dict.fromkeys(c["name"] for c in calls.tool_calls if c["name"] in asked))


def ran_calls(messages: list[BaseMessage]) -> frozenset[str]:
    """The ``call_key`` of every call of the running turn that has a result."""
    start = turn_start(messages)
    done = {m.tool_call_id for m in messages[start:] if isinstance(m, ToolMessage)}
    return frozenset(
        call_key(c)
        for m in messages[start:]
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] in done
    )


def _all_ran(message: AIMessage, ran: frozenset[str]) -> bool:
    """Whether every call of a reply already ran in this turn with the same arguments."""
    calls = message.tool_calls
    return bool(calls) and not message.invalid_tool_calls and all(call_key(c) in ran for c in calls)


async def _without_repeats(
    model: Any,
    options: dict[str, Any],
    prompt: list[BaseMessage],
    turn: PromptedTurn,
    message: AIMessage,
    named: list[BaseTool],
    schemas: dict[str, dict[str, Any]],
    acting: set[str],
) -> PromptedTurn:
    """The model asked again for a reply that is not a repeat: the answer, or a call of a ``named`` tool.

    After a round of results the 1.5B most often wrote the call it had just run once more, the same
    ``calculate``, instead of the ``save_note`` the question asked for next; answered with the result it
    already had, it was then made to answer, and the note was never written. A repeat asks for nothing new
    (AnythingLLM's Deduplicator refuses it too), so while the question names a tool no call has used yet
    the model chooses again at once, between the answer and those tools. Offered every other tool, it
    reached for whatever was left (``current_datetime`` after a sum, ``save_to_workspace`` after its note);
    asked again for text alone, under the next-step ask, it wrote long, wrong workings where the answer
    ask (``ASK_ANSWER``, after C10 answers the repeat) gets a short one. A reply cut off by the token limit
    keeps the repeat.
    """
    repeated = list(dict.fromkeys(c["name"] for c in message.tool_calls))
    asked = {k: v for k, v in options.items() if k not in ("logprobs", "top_logprobs")}
    asked["extra_body"] = {"grammar": call_grammar(named, schemas)}
    again = await ask(model, asked, prompt, show_text=True)
    if again.response_metadata.get("finish_reason") == "length":
        return replace(turn, message=message)
    found = _read_calls(again, message_text(again), schemas, acting, whole=True)
    if found is not None:
        return replace(turn, message=found[0], repeats=found[1], repeated=repeated)
    return replace(turn, message=again, repeated=repeated)


def _ready(
    calls: list[dict[str, Any]], schemas: dict[str, dict[str, Any]], acting: set[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The calls that can run, and those that wait for results still to come, as invalid calls.

    A call waits when it holds a slot for a value not yet had (``catalog.placeholders``), and when it
    changes something (a tool in ``acting``) and comes after a call that looks something up: asked to
    "compute 37*43 and save the result", the 1.5B writes both at once and the note holds what it guessed,
    not what ``calculate`` returns. Held back, it is written again once the results are in, so whatever it
    saves, and a person approves, is made of real values. A call that changes something and comes first,
    or after other such calls only, needs nothing from the list and runs.
    """
    ready: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []
    looked_up = False
    for call in calls:
        slots = placeholders(call["args"], schemas)
        if slots:
            error = SLOT.format(slots=", ".join(dict.fromkeys(slots)))
        elif call["name"] in acting and looked_up:
            error = HELD
        else:
            ready.append(call)
            looked_up = looked_up or call["name"] not in acting
            continue
        args = json.dumps(call["args"], ensure_ascii=False)
        waiting.append(
            {
                "name": call["name"],
                "args": args,
                "id": call["id"],
                "error": error,
                "type": "invalid_tool_call",
            }
        )
    return ready, waiting


def _once_each(calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The calls with exact repeats (same tool, same arguments) dropped, and how many were dropped.

    A small model sometimes writes one call over and over until the token limit; the same call with the
    same arguments in one reply asks for one thing, so it runs once.
    """
    seen: set[str] = set()
    kept = []
    for call in calls:
        key = call_key(call)
        if key not in seen:
            seen.add(key)
            kept.append(call)
    return kept, len(calls) - len(kept)


def withheld_call(messages: list[BaseMessage], why: str) -> str:
    """The answer a person reads when the model's last reply was a call that cannot run: never its JSON.

    Args:
        messages: The turn's messages, for the results it already has.
        why: Why no call could run (the budget spent, no such tool).
    """
    start = turn_start(messages)
    lines = results_in_words(messages[start + 1 :])
    found = "\n\nWhat the tools returned before that:\n" + "\n".join(lines) if lines else ""
    return f"I could not finish this: my next step was another tool call, and {why}.{found}"


def _result_lines(messages: list[BaseMessage]) -> list[str]:
    """Each call of the running turn with its result, or why it did not run, as a line of text."""
    start = turn_start(messages)
    exchange = messages[start + 1 :]
    given = message_text(messages[start]) if on("given_passages_once") else ""
    results: dict[str | None, str] = {
        m.tool_call_id: passages_given_once(message_text(m), given)
        for m in exchange
        if isinstance(m, ToolMessage)
    }
    lines = []
    for m in exchange:
        if not isinstance(m, AIMessage):
            continue
        for c in m.tool_calls:
            args = json.dumps(c["args"], ensure_ascii=False)
            result = results.get(c["id"], "-")
            if result.endswith(ALREADY_RUN) and on("repeat_once"):  # its result is above already
                lines.append(f"- {c['name']}({args}) {REPEATED}")
            else:
                lines.append(f"- {c['name']}({args}) returned: {result}")
        for bad in m.invalid_tool_calls:
            lines.append(f"- {bad['name']}({bad['args']}) was not run: {bad['error']}")
    return lines


def named_unused(question: str, messages: list[BaseMessage], tools: list[BaseTool]) -> list[str]:
    """The offered tools that act, that the person's question asks for in words, and that have not run yet.

    Asked for a result and a note, the 1.5B ran ``calculate``, then wrote the same call again instead of the
    note; told that the question asks for ``save_note``, which had not run, it wrote the note. Only an action
    is named so: a tool that looks something up was "named" too when this read the last word of every
    tool's name, and "Which documents are in this workspace?" then pushed the model, after
    ``list_documents`` had answered it, into ``search_documents`` and ``summarize_document`` (two more rounds
    and a catalog's worth of results for one listing). Whether the question asks for a tool is read as the
    turn's tool choice reads it (``cues.asked_for``), so a note is asked for by "note" or "remember" and
    ``save_to_workspace`` by saving into the workspace, not by the word "document".
    """
    if not on("named_unused"):
        return []
    start = turn_start(messages)
    used = {c["name"] for m in messages[start:] if isinstance(m, AIMessage) for c in m.tool_calls}
    return [
        tool.name
        for tool in tools
        if tool.name not in used and acts(tool) and asked_for(tool, question, builtin(tool))
    ]


def digest(
    messages: list[BaseMessage], *, more: bool = True, named: list[str] | None = None
) -> list[BaseMessage]:
    """Fold this turn's tool calls and results into the user message as plain text.

    Every round so far is listed in order, calls that were not run with their error, and the model is told
    what it may do next: with ``more`` the tools are offered again and it writes the next calls (a step that
    needs these results) or answers; without, the turn's budget is spent and it answers. Only the user
    message changes from round to round, so everything before it stays in the server's prompt cache.
    """
    start = turn_start(messages)
    lines = _result_lines(messages)
    if not lines or RESULTS_AS == "messages":
        return messages
    then = ASK_NEXT_STEP if more else ASK_ANSWER
    if more and named:
        then = NAMED_UNUSED.format(tools=", ".join(named)) + then
    note = RESULTS_HEADER + "\n".join(lines) + "\n" + then
    return [*messages[:start], HumanMessage(message_text(messages[start]) + note)]


def waiting_calls(messages: list[BaseMessage]) -> frozenset[str]:
    """The tools of the calls the turn's last round left waiting for results (``_ready``); empty if none.

    A call left waiting a second time exactly as it was written before is not waited for again: asked for
    it under the grammar of calls only, the 1.5B wrote ``calculate('calculate((<result> / 10))')`` with the
    same slot round after round until the turn's budget was spent (nine rounds, 350 s). The next reply is
    then free to be the answer.
    """
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last is None or isinstance(messages[-1], HumanMessage):
        return frozenset()
    start = turn_start(messages)
    waiting = [c for c in last.invalid_tool_calls if WAITING in (c.get("error") or "")]
    before = {
        (c["name"], c["args"])
        for m in messages[start:]
        if isinstance(m, AIMessage) and m is not last
        for c in m.invalid_tool_calls
        if WAITING in (c.get("error") or "")
    }
    return frozenset(c["name"] or "" for c in waiting if (c["name"], c["args"]) not in before)
