"""Prompted tool calling, for models that cannot call tools natively (AnythingLLM's "untooled" path).

The tools are described in the system prompt (``catalog``) and the model answers with JSON naming them; where
the endpoint takes one, a grammar (``call_grammar``) keeps that JSON well-formed. Every call of the reply is
read (``call_parsing``); anything that names no known tool is an ordinary answer. Under the grammar, a list
the model closed while giving another call a real chance is reopened for it (``more_calls``).
After a round of calls the model answers from a plain-text digest of the results: small models follow a
digest far better than raw tool messages they were never trained on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from workspace_agent.providers.call_grammar import call_grammar
from workspace_agent.providers.call_parsing import names_a_tool, parse_reply
from workspace_agent.providers.catalog import coerce, fit_tools, schema_of, with_catalog
from workspace_agent.providers.more_calls import CONTINUE_AT, MAX_REOPENINGS, more_probability, reopened
from workspace_agent.providers.tokens import count, count_messages, message_text

__all__ = ["PromptedTurn", "digest", "names_a_tool", "parse_tool_calls", "prompted_turn"]

FRAME = 8  # the catalog is joined to the system prompt; a little slack for the count's approximation
TOP_LOGPROBS = 10  # alternatives per token asked for under the grammar, to see a list closed too early
MIN_ROOM = 48  # reply tokens a reopened list needs at least: about one more call


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


async def prompted_turn(
    model: Any,
    request: list[BaseMessage],
    tools: list[BaseTool],
    *,
    max_tokens: int | None = None,
    window: int | None = None,
    grammar: bool = False,
) -> PromptedTurn:
    """One model call with the tools described in the prompt; every call in the reply becomes a tool call.

    Args:
        model: The chat model.
        request: The trimmed request, without the catalog.
        tools: The tools offered.
        max_tokens: The reply limit (the reserve trim kept free), so a runaway list cannot fill the window.
        window: The model's window: what the request and ``max_tokens`` leave of it is the catalog's room;
            when the whole catalog needs more, the tools most relevant to the user's message are kept.
        grammar: Send a llama.cpp grammar (``call_grammar``) with the request, so the reply is plain text or
            well-formed calls of the offered tools; only for an endpoint that takes one. The tokens'
            probabilities are asked for too, and a list the model closed while giving another call at least
            ``CONTINUE_AT`` is reopened for it (``providers.more_calls``).

    Returns:
        The reply with its calls (and ambiguous calls as invalid ones). A reply that names only tools that do
        not exist is asked again without tools, and that plain answer is returned with ``retried``.

    """
    query = next((message_text(m) for m in reversed(request) if isinstance(m, HumanMessage)), "")
    room = window - (max_tokens or 0) - count_messages(request) - FRAME if window else None
    offered, left_out = fit_tools(tools, query, room)
    schemas = {t.name: schema_of(t) for t in offered}
    options: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
    if grammar and offered:
        options.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        options["extra_body"] = {"grammar": call_grammar(offered, schemas)}
    prompt = with_catalog(request, offered)
    refused = None
    try:
        response = await _ask(model, options, prompt)
    except Exception as exc:
        if "extra_body" not in options or "grammar" not in str(exc).lower():
            raise
        # The endpoint refused the grammar (a schema it cannot compile, a server that takes none): the
        # reply is then read as free text, as it is for any endpoint without one.
        for key in ("extra_body", "logprobs", "top_logprobs"):
            options.pop(key, None)
        refused = " ".join(str(exc).split())[:300]
        response = await _ask(model, options, prompt)
    text, reopenings, constrained = message_text(response), [], "extra_body" in options
    if constrained:
        text, reopenings = await _reopen(model, options, prompt, response, offered, schemas)
        # the tokens' probabilities were asked for this decision only; the thread does not keep them
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
    if response.response_metadata.get("finish_reason") == "length":
        return turn
    calls, invalid = parse_reply(text, {n: tuple(s.get("properties") or ()) for n, s in schemas.items()})
    if calls or invalid:
        calls, repeats = _once_each([{**c, "args": coerce(c["args"], schemas[c["name"]])} for c in calls])
        meta = {**response.response_metadata, "prompted_text": text}
        message = AIMessage(
            "", tool_calls=calls, invalid_tool_calls=invalid, id=response.id, response_metadata=meta
        )
        return replace(turn, message=message, repeats=repeats)
    if names_a_tool(text):
        return replace(turn, message=await model.ainvoke(request), retried=True)
    return turn


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
    text, prefix, reply, chances = message_text(response), "", response, []
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
        reply = await _ask(model, asked, [*prompt, AIMessage(head)])
        if reply.response_metadata.get("finish_reason") == "length":
            break
        written = message_text(reply)
        text = written if written.startswith(head) else head + written  # llama.cpp answers with the head
        prefix = head
        chances.append(more)
    return text, chances


def _once_each(calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The calls with exact repeats (same tool, same arguments) dropped, and how many were dropped.

    A small model sometimes writes one call over and over until the token limit; the same call with the
    same arguments in one reply asks for one thing, so it runs once.
    """
    seen: set[str] = set()
    kept = []
    for call in calls:
        key = json.dumps([call["name"], call["args"]], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(call)
    return kept, len(calls) - len(kept)


async def _ask(model: Any, options: dict[str, Any], prompt: list[BaseMessage]) -> AIMessage:
    caller = model.bind(**options) if options else model
    return await caller.with_config(tags=["nostream"]).ainvoke(prompt)


def retry_after_invalid(messages: list[BaseMessage]) -> bool:
    """Whether the turn's only round of calls had ambiguous ones: the model may then write them once more."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
    rounds = [
        m for m in messages[start:] if isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls)
    ]
    return len(rounds) == 1 and bool(rounds[0].invalid_tool_calls)


def digest(messages: list[BaseMessage], *, again: bool = False) -> list[BaseMessage]:
    """Fold this turn's tool calls and results into the user message as plain text.

    A call that was not run because it was written ambiguously is listed with its error; with ``again`` the
    model is asked to write such calls again (the catalog is then offered once more) instead of answering.
    """
    calling = [isinstance(m, AIMessage) and bool(m.tool_calls or m.invalid_tool_calls) for m in messages]
    first = calling.index(True) if any(calling) else None
    if first is None:
        return messages
    head, exchange = messages[:first], messages[first:]
    results = {m.tool_call_id: message_text(m) for m in exchange if isinstance(m, ToolMessage)}
    lines = []
    for m in exchange:
        if not isinstance(m, AIMessage):
            continue
        for c in m.tool_calls:
            args = json.dumps(c["args"], ensure_ascii=False)
            lines.append(f"- {c['name']}({args}) returned: {results.get(c['id'], '-')}")
        for c in m.invalid_tool_calls:
            lines.append(f"- {c['name']}({c['args']}) was not run: {c['error']}")
    user = head[-1]
    ask = (
        "Write the calls that were not run again, correctly, as a JSON list; or, if the results suffice, "
        "answer the question briefly from them in plain sentences."
        if again
        else "Answer the question briefly from these results, in plain sentences, without code."
    )
    note = "\n\nTool results for this question:\n" + "\n".join(lines) + "\n" + ask
    return [*head[:-1], HumanMessage(message_text(user) + note)]
