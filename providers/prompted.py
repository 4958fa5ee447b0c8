"""Prompted tool calling, for models that cannot call tools natively (AnythingLLM's "untooled" path).

The tools are described in the system prompt and the model answers with JSON naming them. Small local models
copy what they are shown, so the catalog shows what a good reply looks like: one JSON list with one object per
call, numbers unquoted, required arguments marked, enum values and the fields of object arguments spelled out.
Every call of the reply is read (``call_parsing``); anything that names no known tool is an ordinary answer.
After a round of calls the model answers from a plain-text digest of the results: small models follow a
digest far better than raw tool messages they were never trained on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from workspace_agent.providers.call_grammar import call_grammar
from workspace_agent.providers.call_parsing import names_a_tool, parse_reply
from workspace_agent.providers.tokens import count, count_messages, message_text

__all__ = ["PromptedTurn", "catalog", "digest", "names_a_tool", "parse_tool_calls", "prompted_turn"]

INSTRUCTIONS = (
    "You can call the tools below. To call tools, reply with only a JSON list, one object per call:\n"
    '[{"name": "<tool name>", "arguments": {...}}, {"name": "<tool name>", "arguments": {...}}]\n'
    "Put every call the request needs in that one list; when the same tool is needed for several things, "
    "write one object for each. Give every required argument and leave out optional ones you have no value "
    "for. Write numbers and true/false without quotes. When no tool helps, answer the user in plain text."
)
FRAME = 8  # the catalog is joined to the system prompt; a little slack for the count's approximation
_WORD = re.compile(r"[a-z0-9]+")
#: Share of the window trim keeps free for a prompted call's catalog (which is cut to what is left).
CATALOG_SHARE = 0.3


def catalog_reserve(window: int) -> int:
    """Tokens the window check keeps free for the tool catalog of a prompted model call."""
    return int(window * CATALOG_SHARE)


def schema_of(tool: BaseTool) -> dict[str, Any]:
    """A tool's arguments as JSON schema, whether it carries a pydantic model or a plain dict (MCP tools)."""
    raw = tool.tool_call_schema
    if raw is None:
        return {}
    return dict(raw) if isinstance(raw, dict) else raw.model_json_schema()


def _resolve(spec: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """A property with ``$ref`` and nullable ``anyOf`` unwrapped (pydantic writes ``Optional[X]`` so)."""
    if not isinstance(spec, dict):
        return {}
    if "$ref" in spec:
        target = defs.get(spec["$ref"].rsplit("/", 1)[-1], {})
        spec = {**target, **{k: v for k, v in spec.items() if k != "$ref"}}
    options = [o for o in spec.get("anyOf", spec.get("oneOf", [])) if o.get("type") != "null"]
    if len(options) == 1 and "type" not in spec:
        rest = {k: v for k, v in spec.items() if k not in ("anyOf", "oneOf")}
        spec = {**rest, **_resolve(options[0], defs)}
    return spec


def _type(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "any")
    if kind is None and spec.get("anyOf"):
        return " or ".join(_type(_resolve(o, defs), defs) for o in spec["anyOf"] if o.get("type") != "null")
    if kind == "array":
        return f"list of {_type(_resolve(spec.get('items', {}), defs), defs)}"
    return kind or ("object" if "properties" in spec else "any")


def _argument(name: str, spec: dict[str, Any], required: bool, defs: dict[str, Any], depth: int = 0) -> str:
    """One argument: ``name (type, required, one of ...): description``, object fields in brackets."""
    notes = [_type(spec, defs)] + (["required"] if required else [])
    items = _resolve(spec.get("items", {}), defs)
    for prefix, choices in (("one of ", spec.get("enum")), ("each one of ", items.get("enum"))):
        if choices:
            notes.append(prefix + ", ".join(json.dumps(v, ensure_ascii=False) for v in choices))
    default = spec.get("default")
    if default not in (None, "", [], {}) and len(json.dumps(default)) < 30:
        notes.append(f"default {json.dumps(spec['default'], ensure_ascii=False)}")
    text = f"{name} ({', '.join(notes)})"
    description = " ".join(str(spec.get("description", "")).split())
    if description:
        text += f": {description}"
    fields = spec.get("properties") or items.get("properties")
    if fields and depth < 2:
        inner = set(spec.get("required", items.get("required", [])))
        parts = [_argument(k, _resolve(v, defs), k in inner, defs, depth + 1) for k, v in fields.items()]
        text += " {fields: " + "; ".join(parts) + "}"
    return text


def _placeholder(name: str, spec: dict[str, Any], defs: dict[str, Any]) -> str:
    kind = _type(spec, defs)
    if spec.get("enum"):
        return json.dumps(spec["enum"][0], ensure_ascii=False)
    if kind == "string":
        return json.dumps(f"<{name}>")
    if kind.startswith("list"):
        return "[...]"
    return "{...}" if kind == "object" else f"<{name}>"  # numbers and booleans are written bare


def describe(tool: BaseTool) -> str:
    """One tool as the catalog shows it: purpose, each argument, and an example call of it."""
    schema = schema_of(tool)
    defs = schema.get("$defs", schema.get("definitions", {}))
    props = {k: _resolve(v, defs) for k, v in (schema.get("properties") or {}).items()}
    required = [k for k in schema.get("required", []) if k in props]
    lines = [f"- {tool.name}: {' '.join(str(tool.description or '').split())}"]
    lines += [f"  {_argument(k, v, k in required, defs)}" for k, v in props.items()] or ["  (no arguments)"]
    example = ", ".join(f"{json.dumps(k)}: {_placeholder(k, props[k], defs)}" for k in required)
    lines.append(f'  example: [{{"name": {json.dumps(tool.name)}, "arguments": {{{example}}}}}]')
    return "\n".join(lines)


def catalog(tools: list[BaseTool]) -> str:
    """The instructions and every tool, as appended to the system prompt."""
    return INSTRUCTIONS + "\n\nTools:\n" + "\n".join(describe(t) for t in tools)


def fit_tools(tools: list[BaseTool], query: str, budget: int | None) -> tuple[list[BaseTool], list[str]]:
    """The tools whose catalog fits ``budget`` tokens: all if they fit, else the most relevant to ``query``.

    Relevance is the share of a tool's name and description words found in the message, so the cut needs no
    model call; the tools keep their order. Returns the kept tools and the names of those left out.
    """
    if budget is None or count(catalog(tools)) <= budget:
        return tools, []
    asked = set(_WORD.findall(query.lower()))

    def relevance(tool: BaseTool) -> float:
        words = set(_WORD.findall(f"{tool.name.replace('_', ' ')} {tool.description}".lower()))
        return len(words & asked) / (len(words) ** 0.5 or 1)

    ranked = sorted(tools, key=relevance, reverse=True)
    kept: list[BaseTool] = []
    used = count(INSTRUCTIONS) + 4
    for tool in ranked:
        size = count(describe(tool)) + 1
        if used + size <= budget or not kept:
            kept.append(tool)
            used += size
    return [t for t in tools if t in kept], [t.name for t in tools if t not in kept]


def coerce(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments with numbers, booleans and lists written as strings turned into what the schema declares.

    Small models quote numbers (``"20"``); a string that reads cleanly as the declared type is what was meant.
    Anything else is left alone for the tool's own validation to report.
    """
    props = schema.get("properties") or {}
    out = dict(args)
    for key, value in args.items():
        kind = _type(_resolve(props.get(key, {}), schema.get("$defs", {})), {})
        if not isinstance(value, str):
            continue
        text = value.strip()
        if kind == "integer" and re.fullmatch(r"-?\d+", text):
            out[key] = int(text)
        elif kind == "number" and re.fullmatch(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
            out[key] = float(text) if any(c in text for c in ".eE") else int(text)
        elif kind == "boolean" and text.lower() in ("true", "false"):
            out[key] = text.lower() == "true"
        elif kind.startswith("list") and text.startswith("["):
            try:
                out[key] = json.loads(text)
            except ValueError:
                pass
    return out


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
            well-formed calls of the offered tools; only for an endpoint that takes one.

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
        options.pop("extra_body")
        refused = " ".join(str(exc).split())[:300]
        response = await _ask(model, options, prompt)
    names = [t.name for t in offered]
    if response.response_metadata.get("finish_reason") == "length":
        return PromptedTurn(response, names, left_out, grammar_refused=refused)
    text = message_text(response)
    calls, invalid = parse_reply(text, {n: tuple(s.get("properties") or ()) for n, s in schemas.items()})
    if calls or invalid:
        calls, repeats = _once_each([{**c, "args": coerce(c["args"], schemas[c["name"]])} for c in calls])
        meta = {**response.response_metadata, "prompted_text": text}
        message = AIMessage(
            "", tool_calls=calls, invalid_tool_calls=invalid, id=response.id, response_metadata=meta
        )
        return PromptedTurn(message, names, left_out, grammar_refused=refused, repeats=repeats)
    if names_a_tool(text):
        plain = await model.ainvoke(request)
        return PromptedTurn(plain, names, left_out, retried=True, grammar_refused=refused)
    return PromptedTurn(response, names, left_out, grammar_refused=refused)


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


def with_catalog(messages: list[BaseMessage], tools: list[BaseTool]) -> list[BaseMessage]:
    """The request with the tool catalog appended to the system prompt."""
    if messages and isinstance(messages[0], SystemMessage):
        return [SystemMessage(message_text(messages[0]) + "\n\n" + catalog(tools)), *messages[1:]]
    return [SystemMessage(catalog(tools)), *messages]
