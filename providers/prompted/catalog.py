"""The tool catalog of prompted calling: what a model without native tool calls is told about the tools.

Small local models copy what they are shown, so the catalog shows what a good reply looks like: one JSON list
with one object per call, numbers unquoted, required arguments marked, enum values and the fields of object
arguments spelled out, an example line per tool. Tools with a pydantic schema and tools with a plain JSON
schema (MCP) are described alike. When the catalog does not fit the window, the tools most relevant to the
message are kept. Strings a model wrote for numbers, booleans or lists are read as the declared type.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from ...core.context import READ_ONLY_BUILTINS
from ...core.conversation import message_text, turn_question, turn_start
from ...core.prompts import CATALOG_INSTRUCTIONS, REMINDER
from ..tokens import count

_WORD = re.compile(r"[a-z0-9]+")
#: A slot for a value: ``<name>`` in the catalog's example style, or a template's or shell's substitution
#: (``{{name}}``, ``${name}``, ``$(name ...)``), which the 1.5B wrote into a note in a bench run without the
#: example lines: "Today's weekday is: $(current_datetime | jq '.weekday')".
_SLOT = re.compile(
    r"<([A-Za-z_]\w*)>|\{\{\s*([A-Za-z_]\w*)[^{}]*\}\}|\$\{\s*([A-Za-z_]\w*)[^{}]*\}|\$\(\s*([A-Za-z_]\w*)[^()]*\)"
)
#: A result of one of the tools ``{names}`` read as a variable: ``current_datetime['year']``.
_RESULT_READ = r"\b(?:{names})\b\s*(?:\([^()]*\)\s*)?(?:\[[^\]]*\]|\.[A-Za-z_]\w*)+"
#: Words a model puts in angle brackets for a value it does not have yet, beside tool and argument names.
_SLOT_WORDS = {"result", "value", "output", "answer", "code", "number"}
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
    if isinstance(raw, dict):
        return dict(raw)
    if issubclass(raw, BaseModel):
        return raw.model_json_schema()
    raise TypeError(f"tool {tool.name!r}: a pydantic v1 argument schema is not supported")


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
    """The instructions and every tool, as appended to the system prompt.

    The instructions and the example lines stay under the call grammar too, though it enforces the shape
    they describe: without them the 1.5B answered "What is 52*27?" from its head, wrongly, in most
    one-call baselines of a bench run (``grammar_said``, tried and dropped in stop 54, bench/README.md).
    """
    return CATALOG_INSTRUCTIONS + "\n\nTools:\n" + "\n".join(describe(t) for t in tools)


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
    used = count(CATALOG_INSTRUCTIONS) + 4
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


def with_catalog(messages: list[BaseMessage], tools: list[BaseTool]) -> list[BaseMessage]:
    """The request with the tool catalog appended to the system prompt."""
    if messages and isinstance(messages[0], SystemMessage):
        return [SystemMessage(message_text(messages[0]) + "\n\n" + catalog(tools)), *messages[1:]]
    return [SystemMessage(catalog(tools)), *messages]


def with_reminder(messages: list[BaseMessage], given_with: bool = False) -> list[BaseMessage]:
    """The request with the catalog's rule said again after the user's message, when anything precedes it.

    A small model follows the pattern of the conversation it continues: after earlier exchanges answered in
    plain words it answers in plain words too and invents the result a tool would have given (1 of 6
    questions used a tool after two unrelated exchanges, 5 of 6 without). The rule said again where the
    model is about to write restores its choice; it goes after everything that stays the same from turn
    to turn, so the server's prompt cache is kept. Document context ``given_with`` the message stands
    between the catalog and the question as history does: after a thousand tokens of it, the 1.5B worked
    "4 installations of the Team plan" out in prose, wrongly, where with the rule said again it called
    ``calculate``.
    """
    user = turn_question(messages)
    if user is None:
        return messages
    last = turn_start(messages)
    if not given_with and not any(isinstance(m, AIMessage) for m in messages[:last]):
        return messages
    return [
        *messages[:last],
        user.model_copy(update={"content": message_text(user) + REMINDER}),
        *messages[last + 1 :],
    ]


def builtin(tool: BaseTool) -> bool:
    """Whether the tool is one of the program's own rather than an MCP server's (whose metadata says so)."""
    return not (tool.metadata or {}).get("mcp")


def acts(tool: BaseTool) -> bool:
    """Whether a call of the tool changes something (saves, writes, sends) rather than only looking it up.

    The built-ins say so by name (``READ_ONLY_BUILTINS``), MCP tools by their ``readOnlyHint`` annotation;
    any other tool is taken to act, so nothing is wrongly taken for a mere lookup.
    """
    if tool.name in READ_ONLY_BUILTINS:
        return False
    return (tool.metadata or {}).get("readOnlyHint") is not True


def placeholders(args: dict[str, Any], tools: dict[str, dict[str, Any]]) -> list[str]:
    """The ``<slots>`` a call's arguments hold where a value belongs, written for a result not yet had.

    Asked for two dependent steps at once, a small model writes both calls in one list and fills the second
    one's argument with a slot in the catalog's own example style: ``"3 * <secret_code>"``. Such a call asks
    for nothing that can run yet; it is sent back, to be written again once the first call's result is in.
    A slot counts only when it names an offered tool, an argument, or a word like ``result``, so text that
    merely contains angle brackets passes. An offered tool's result read as a variable is a slot too: in one
    list with ``current_datetime``, the 1.5B wrote ``calculate("2050 - (current_datetime['year'])")``.
    """
    known = {n.lower() for n in tools} | _SLOT_WORDS
    known |= {k.lower() for s in tools.values() for k in (s.get("properties") or {})}
    names = "|".join(re.escape(n) for n in sorted(tools, key=len, reverse=True))
    read = re.compile(_RESULT_READ.format(names=names)) if names else None
    found = []
    for value in strings(args):
        found += [m.group(0) for m in _SLOT.finditer(value) if _named(m).lower() in known]
        found += [m.group(0) for m in read.finditer(value)] if read else []
    return found


def _named(slot: re.Match[str]) -> str:
    """What a slot names, whichever of its forms it is written in."""
    return next(g for g in slot.groups() if g is not None)


def strings(value: Any) -> list[str]:
    """Every string inside a call's arguments, however deep: what a person reads on its card."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []
