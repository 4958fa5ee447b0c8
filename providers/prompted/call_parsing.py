"""Every tool call in a reply written as text, read leniently.

Small models write their calls however they like: one JSON list, several objects one after another or one
per line, each in its own fenced block, a call nested under a key of the previous one, single quotes,
trailing commas, Python's ``True``/``None``. ``json.loads`` takes none of that and reads one value at most,
so a reply asking for three calls ran one (AnythingLLM's failure). Here the text is scanned for every
JSON-like value with a small forgiving parser that also remembers keys given twice: a call whose arguments
name a key twice is ambiguous (which value was meant?), so it becomes an invalid call whose error goes back
to the model, rather than one value silently winning.

The reply comes from a model, or from whatever a document or tool result steered it to write, and it is read
on the event loop: reading is linear in its length. Each position is read as a value at most once (the scan
that retries every ``[`` and ``{`` of a failed list reuses what the failed attempt read), nesting deeper than
``MAX_DEPTH`` is no value, and a reply longer than ``MAX_REPLY_CHARS`` is text without being read.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

ARG_KEYS = ("arguments", "parameters", "args", "params", "input")
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BARE = re.compile(r"[A-Za-z_$][\w$.-]*")
_SPACE = re.compile(r"[ \t\r\n]*")
_START = re.compile(r"[\[{]")
#: Replies longer than this are text, unread: about 8,000 tokens, twice the local model's whole window and
#: far above the reply budget a turn gives; reading one of this size costs well under a second.
MAX_REPLY_CHARS = 32_000
#: Lists and objects nested deeper than this are no value (no call nests so deep; recursion stays bounded).
MAX_DEPTH = 64
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}


class Obj(dict):
    """A parsed object: a dict (the last value of a repeated key wins) that keeps every pair it was given."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def repeated(self) -> list[str]:
        """Keys given more than once."""
        return _repeated(k for k, _ in self.pairs)


def _repeated(keys: Iterable[str]) -> list[str]:
    """The keys that occur more than once, sorted (counted once each, not by rescanning the list)."""
    return sorted(k for k, n in Counter(keys).items() if n > 1)


class _Reader:
    """A recursive-descent reader for JSON and the near-JSON small models write.

    One reader serves every attempt on a text: what was read at a position (a value and where it ended, or
    that none is there) is remembered, so an attempt from an inner ``[`` after an outer one failed costs
    nothing for the part already read. Without that, ``"[" * n`` took time quadratic in ``n``.
    """

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.depth = text, 0, 0
        self._read: dict[int, tuple[Any, int] | None] = {}

    def _space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]  # always matches

    def _peek(self) -> str:
        self._space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def value(self) -> Any:
        """The value at the current position (after whitespace); ``ValueError`` if there is none."""
        self._space()
        start = self.pos
        if start in self._read:
            found = self._read[start]
            if found is None:
                raise ValueError(f"no value at {start}")
            value, self.pos = found
            return value
        try:
            value = self._fresh()
        except ValueError:
            self._read[start] = None
            raise
        self._read[start] = (value, self.pos)
        return value

    def _fresh(self) -> Any:
        char = self._peek()
        if char == "{":
            return self._container("}", self._pair, Obj)
        if char == "[":
            return self._container("]", self.value, list)
        if char in "\"'":
            return self._string(char)
        number = _NUMBER.match(self.text, self.pos)
        if number:
            self.pos = number.end()
            raw = number.group()
            return float(raw) if any(c in raw for c in ".eE") else int(raw)
        word = _BARE.match(self.text, self.pos)
        if word and word.group() in _LITERALS:
            self.pos = word.end()
            return _LITERALS[word.group()]
        raise ValueError(f"no value at {self.pos}")

    def _container(self, close: str, item: Any, build: type) -> Any:
        if self.depth >= MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} at {self.pos}")
        self.depth += 1
        try:
            return self._items(close, item, build)
        finally:
            self.depth -= 1

    def _items(self, close: str, item: Any, build: type) -> Any:
        self.pos += 1
        items: list[Any] = []
        while True:
            char = self._peek()
            if char == close:
                self.pos += 1
                return build(items)
            if char == "":
                raise ValueError("unterminated")
            items.append(item())
            char = self._peek()
            if char == ",":
                self.pos += 1
            elif char != close:
                raise ValueError(f"expected , or {close} at {self.pos}")

    def _pair(self) -> tuple[str, Any]:
        char = self._peek()
        if char in "\"'":
            key = self._string(char)
        else:
            word = _BARE.match(self.text, self.pos)
            if not word:
                raise ValueError(f"no key at {self.pos}")
            key, self.pos = word.group(), word.end()
        if self._peek() != ":":
            raise ValueError(f"expected : at {self.pos}")
        self.pos += 1
        return key, self.value()

    def _string(self, quote: str) -> str:
        out: list[str] = []
        i, text = self.pos + 1, self.text
        while i < len(text):
            char = text[i]
            if char == quote:
                self.pos = i + 1
                return "".join(out)
            if char == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                out.append(_ESCAPES.get(nxt, "\\" + nxt))
                i += 2
                continue
            out.append(char)
            i += 1
        raise ValueError("unterminated string")


def values(text: str) -> Iterator[Any]:
    """Every object or list in ``text``, outermost only, in order; prose and fences between are skipped.

    A text longer than ``MAX_REPLY_CHARS`` has none: it is not read.
    """
    if len(text) > MAX_REPLY_CHARS:
        return
    undoubled = text.replace("{{", "{").replace("}}", "}")
    for variant in (undoubled, text) if "{{" in text else (text,):  # "{{" is never JSON: a template habit
        found = list(_outermost(variant))
        if any(isinstance(v, dict) or (isinstance(v, list) and v) for v in found):
            yield from found
            return


def _outermost(text: str) -> Iterator[Any]:
    """The values read from each ``[`` or ``{`` on, skipping what a value read; one reader for all tries."""
    reader = _Reader(text)
    start = _START.search(text)
    while start:
        reader.pos = at = start.start()
        try:
            yield reader.value()
            start = _START.search(text, reader.pos)
        except ValueError:
            start = _START.search(text, at + 1)


def _whole(text: str) -> Iterator[Any]:
    """The one value ``text`` is (a list, an object, either in a ```json fence), or nothing.

    The call grammar's two branches: a reply opening a list, an object or a fence is calls and nothing
    else; any other reply is text, even when it quotes a call.
    """
    body = text.strip()
    if body.startswith("```json") and body.endswith("```") and len(body) >= 10:
        body = body[7:-3].strip()
    if len(body) > MAX_REPLY_CHARS or body[:1] not in ("[", "{"):
        return
    reader = _Reader(body)
    try:
        value = reader.value()
    except ValueError:
        return
    reader._space()
    if reader.pos == len(body):
        yield value


def _read(text: str, whole: bool) -> Iterator[Any]:
    """The values a reply's calls are read from: the reply as one value (``whole``), or every one in it."""
    return _whole(text) if whole else values(text)


def _lenient(text: str) -> Any:
    """One value from a string (arguments are sometimes sent as a JSON string)."""
    return next(values(text), None)


def _known(name: Any, tools: Mapping[str, Collection[str]]) -> str | None:
    """The tool a written name means: exact, else the one that differs only in case, dots or dashes."""
    if not isinstance(name, str):
        return None
    if name in tools:
        return name
    plain = re.sub(r"[._\-\s]", "", name).lower()
    return next((t for t in tools if re.sub(r"[._\-\s]", "", t).lower() == plain), None)


def _is_call(value: Any, tools: Mapping[str, Collection[str]]) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and (_known(value["name"], tools) is not None or any(k in value for k in ARG_KEYS))
    )


def _calls_in(value: Any, tools: Mapping[str, Collection[str]]) -> Iterator[tuple[str, Any, list[str]]]:
    """``(name, arguments, repeated keys)`` for every call in a parsed value, nested ones split out."""
    if isinstance(value, list):
        for item in value:
            yield from _calls_in(item, tools)
        return
    if not isinstance(value, dict):
        return
    if isinstance(value.get("function"), dict) and "name" in value["function"]:
        yield from _calls_in(value["function"], tools)
        return
    if not _is_call(value, tools):
        only = list(value.items())
        if len(only) == 1 and _known(only[0][0], tools) and isinstance(only[0][1], dict):
            yield from _calls_in({"name": only[0][0], "arguments": only[0][1]}, tools)
            return
        for item in value.values():  # {"tool_calls": [...]}, {"calls": [...]}, ...
            yield from _calls_in(item, tools)
        return
    name = value["name"]
    params = tools.get(_known(name, tools) or "", ())
    pairs = value.pairs if isinstance(value, Obj) else list(value.items())
    arg_pairs = [(k, v) for k, v in pairs if k in ARG_KEYS]
    nested = [v for k, v in pairs if k not in ARG_KEYS and k not in ("name", "type", "id")]
    repeated = [k for k in ARG_KEYS if sum(1 for key, _ in arg_pairs if key == k) > 1]
    args = arg_pairs[0][1] if arg_pairs else {}
    if isinstance(args, str):
        args = _lenient(args) if args.strip() else {}
    args_pairs = args.pairs if isinstance(args, Obj) else list(args.items()) if isinstance(args, dict) else []
    kept = []
    for key, item in args_pairs:
        inner = item if isinstance(item, list) else [item]
        if key not in params and inner and all(_is_call(i, tools) for i in inner):
            nested.append(item)  # a call written inside another one's arguments
        else:
            kept.append((key, item))
    repeated += _repeated(k for k, _ in kept)
    yield name, Obj(kept), repeated
    for item in nested:
        yield from _calls_in(item, tools)


def parse_reply(
    text: str, tools: Mapping[str, Collection[str]], *, whole: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tool calls a reply asks for, and the ones it wrote ambiguously (a key given twice).

    Args:
        text: The model's reply.
        tools: Tool name → its parameter names (a parameter whose value happens to look like a call is kept).
        whole: The reply was written under the call grammar: only a reply that is calls asks for any, and a
            call quoted in prose (an example, a call a document told the model to write) is text. Without
            it a model may wrap its calls in prose, and every call in the reply counts.

    Returns:
        LangChain tool calls for known tools, and invalid tool calls whose ``error`` tells the model what to
        fix. Calls naming no known tool are left out (see ``names_a_tool``).

    """
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for value in _read(text, whole):
        for name, args, repeated in _calls_in(value, tools):
            tool = _known(name, tools)
            if tool is None:
                continue
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            if repeated:
                error = (
                    f"the key {', '.join(map(repr, repeated))} is given more than once in one call; "
                    "write one call per set of arguments, each key once"
                )
                raw = "{" + ", ".join(f"{json.dumps(k)}: {_dump(v)}" for k, v in args.pairs) + "}"
                invalid.append(
                    {"name": tool, "args": raw, "id": call_id, "error": error, "type": "invalid_tool_call"}
                )
                continue
            calls.append({"name": tool, "args": _plain(args), "id": call_id, "type": "tool_call"})
    return calls, invalid


def _plain(value: Any) -> Any:
    """Parsed values as plain dicts and lists (the ``Obj`` bookkeeping stays here)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _dump(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=False)


def names_a_tool(text: str, *, whole: bool = False) -> bool:
    """Whether a reply is shaped like a call at all, known tool or not (``whole``: see ``parse_reply``)."""
    return any(True for value in _read(text, whole) for _ in _calls_in(value, {}))
