"""A llama.cpp grammar that lets a prompted reply be plain text or well-formed calls, nothing in between.

A small model writing calls as free text invents argument names, copies catalog lines in as keys, quotes
numbers, nests the next call inside the last and sometimes repeats itself to the token limit. llama.cpp can
constrain sampling to a grammar (GBNF, the ``grammar`` field of its chat endpoint). This one has two
branches, chosen by the reply's first character:

- ``[`` or ``{`` (also after a fenced ```` ```json ```` opener): a list of calls, or one call, each naming
  an offered tool and giving its arguments as the tool's JSON schema describes them, required arguments
  first, in the schema's order, each key at most once;
- anything else: free text, so an answer is never forced into JSON.

Only the shape is constrained: whether to call, which tool and how many calls stay the model's choice.
Schemas beyond what is translated here (``$ref`` cycles, ``patternProperties``…) fall back to any JSON
value, so the grammar never forbids a call the schema allows.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.tools import BaseTool

#: Whitespace between JSON tokens, bounded so the grammar cannot be satisfied by endless blank lines. A
#: string never ends in whitespace: the 1.5B, meaning to join a value it did not have to its text
#: (``"Today's date is " + ...``), closed the string there and saved "Today's date is " as the note; kept
#: from closing it, it goes on and writes the value, or a slot for it (``catalog.placeholders``).
_BASE_RULES = r"""ws ::= [ \t\n]{0,8}
string ::= "\"" ( char{0,599} last )? "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
last ::= [^"\\\x00-\x20] | "\\" (["\\/] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ([0-9] | [1-9] [0-9]{1,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value ){0,30} )? ws "}"
array ::= "[" ws ( value ( ws "," ws value ){0,50} )? ws "]"
text ::= [^\[{`\x00] [^\x00]* | "`" ( [^`\x00] [^\x00]* )? | "``" ( [^`\x00] [^\x00]* )? | "```" fence-other
fence-other ::= ( [^j\x00] | "j" [^s\x00] | "js" [^o\x00] | "jso" [^n\x00] ) [^\x00]*
"""
_PRIMITIVES = {"string", "integer", "number", "boolean", "null"}


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _not_null(spec: Any) -> Any:
    """An optional argument's schema without its ``null`` branch: leaving it out says the same."""
    options = spec.get("anyOf") if isinstance(spec, dict) else None
    if not options:
        return spec
    kept = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
    rest = {k: v for k, v in spec.items() if k != "anyOf"}
    return {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept or options}


class _Grammar:
    """Rules collected while the schemas are walked; each distinct body gets one rule."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self.names: dict[str, str] = {}

    def rule(self, hint: str, body: str) -> str:
        if body in self.names:
            return self.names[body]
        base = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        name, n = base, 1
        while name in self.rules:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        self.names[body] = name
        return name

    def value(self, spec: Any, defs: dict[str, Any], hint: str, depth: int = 0) -> str:
        """The rule (or inline expression) for a value the schema ``spec`` allows."""
        if not isinstance(spec, dict) or depth > 6:
            return "value"
        if "$ref" in spec:
            target = defs.get(str(spec["$ref"]).rsplit("/", 1)[-1])
            return self.value(target, defs, hint, depth + 1) if target else "value"
        if "const" in spec:
            return _literal(json.dumps(spec["const"], ensure_ascii=False))
        if spec.get("enum"):
            choices = " | ".join(_literal(json.dumps(v, ensure_ascii=False)) for v in spec["enum"])
            return self.rule(f"{hint}-enum", choices)
        options = spec.get("anyOf") or spec.get("oneOf")
        if options:
            parts = [self.value(o, defs, hint, depth + 1) for o in options]
            return "value" if "value" in parts else self.rule(f"{hint}-any", " | ".join(dict.fromkeys(parts)))
        kind = spec.get("type")
        if isinstance(kind, list):
            parts = [self.value({**spec, "type": k}, defs, hint, depth + 1) for k in kind]
            return self.rule(f"{hint}-any", " | ".join(dict.fromkeys(parts)))
        if kind in _PRIMITIVES:
            return str(kind)
        if kind == "array":
            items = self.value(spec.get("items"), defs, f"{hint}-item", depth + 1)
            return self.rule(f"{hint}-list", f'"[" ws ( {items} ( ws "," ws {items} ){{0,50}} )? ws "]"')
        if kind == "object" or "properties" in spec:
            props = spec.get("properties")
            if not isinstance(props, dict) or not props:
                return "object"
            return self.obj(props, spec.get("required") or [], defs, hint, depth)
        return "value"

    def obj(
        self, props: dict[str, Any], required: list[str], defs: dict[str, Any], hint: str, depth: int
    ) -> str:
        """An object with these properties: required ones first in order, then any of the others in order."""
        needed = [k for k in props if k in set(required)]
        pairs = {
            key: f'{_literal(json.dumps(key, ensure_ascii=False))} ws ":" ws '
            + self.value(spec if key in needed else _not_null(spec), defs, f"{hint}-{key}", depth + 1)
            for key, spec in props.items()
        }
        optional = [k for k in props if k not in set(required)]

        def tail(start: int) -> str:  # the optional pairs from ``start`` on, each optional, comma-led
            return " ".join(f'( ws "," ws {pairs[k]} )?' for k in optional[start:])

        if needed:
            body = ' ws "," ws '.join(pairs[k] for k in needed)
            body = f"{body} {tail(0)}".strip()
        else:  # the first pair written has no comma before it: one alternative per optional pair
            firsts = [f"{pairs[k]} {tail(i + 1)}".strip() for i, k in enumerate(optional)]
            body = "( " + " | ".join(f"( {f} )" for f in firsts) + " )?"
        return self.rule(f"{hint}-obj", f'"{{" ws {body} ws "}}"')


def call_grammar(
    tools: list[BaseTool],
    schemas: dict[str, dict[str, Any]],
    *,
    reopened: bool = False,
    calls_only: bool = False,
) -> str:
    """The GBNF grammar for a reply to a prompted call: plain text, or calls of these tools.

    Args:
        tools: The tools offered in the catalog.
        schemas: Each tool's arguments as JSON schema, by tool name.
        reopened: The reply goes on from a list reopened after its last call and a comma
            (``providers.prompted.more_calls``): the next call, any further ones, and the list's close.
        calls_only: The reply is calls, no text: the model's own last reply left a call waiting for a result
            that is now in (``catalog.placeholders``), so this round writes it.

    Returns:
        The grammar text, rule ``root`` first.

    """
    grammar = _Grammar()
    calls = []
    for tool in tools:
        schema = schemas.get(tool.name) or {}
        defs = schema.get("$defs", schema.get("definitions", {}))
        props = schema.get("properties")
        if isinstance(props, dict) and props:
            arguments = grammar.obj(props, schema.get("required") or [], defs, tool.name, 0)
        else:
            arguments = '"{" ws "}"'
        name = _literal(json.dumps(tool.name, ensure_ascii=False))
        keys = f'"\\"name\\"" ws ":" ws {name} ws "," ws "\\"arguments\\"" ws ":" ws {arguments}'
        body = f'"{{" ws {keys} ws "}}"'
        calls.append(grammar.rule(f"call-{tool.name}", body))
    head = [
        'root ::= ws call ( ws "," ws call ){0,14} ws "]" ( ws "```" )?'
        if reopened
        else 'root ::= calls | "```json" ws calls ws "```"' + ("" if calls_only else " | text"),
        'calls ::= "[" ws call ( ws "," ws call ){0,15} ws "]" | call',
        "call ::= " + (" | ".join(calls) if calls else "object"),
    ]
    own = [f"{name} ::= {body}" for name, body in grammar.rules.items()]
    return "\n".join([*head, *own]) + "\n" + _BASE_RULES


#: The grammar of a reply that must be an answer (the turn's tool budget is spent): text that does not open
#: a list, an object or a fenced JSON block, so a call cannot be written at all.
TEXT_GRAMMAR = "root ::= text\n" + _BASE_RULES
