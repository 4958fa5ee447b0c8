"""Whether a prompted list of calls was closed too early, read from the model's own token probabilities.

Greedy decoding takes the likelier token at every step. Asked for several things at once ("the weather in
Boston and in San Francisco"), a small model often closes its list after the first call, although it gave
writing another call a real chance at that very token. On BFCL's live questions (76, grammar on, 0.5B), the
closing token's probability of a comma instead was 0.026 to 0.28 in 13 of the 21 replies that stopped
short, and at most 0.003 in every reply that wrote as many calls as were asked for. So a list closed while
the model gave another call at least ``CONTINUE_AT`` is reopened: the reply up to its last call and a comma
are given back to the model, which writes the next call under the grammar and closes the list again on its
own, checked the same way. The model still decides what the next call is and when to stop; only its own
near-tie at the close is resolved towards asking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

#: The probability of another call at the list's closing token from which the list is reopened.
CONTINUE_AT = 0.02
#: Reopenings per reply at most; every one costs a model call.
MAX_REOPENINGS = 4


@dataclass
class _Scan:
    """Reads a reply character by character and notes what follows each call of its top-level list.

    A note is ``(","|"]", index)``: after a call object closes inside the first top-level list, the next
    significant character either continues the list or closes it.
    """

    stack: list[str] = field(default_factory=list)
    in_string: bool = False
    escaped: bool = False
    after_call: bool = False
    closed: bool = False
    seen: int = 0
    notes: list[tuple[str, int]] = field(default_factory=list)

    def copy(self) -> _Scan:
        return replace(self, stack=list(self.stack), notes=list(self.notes))

    def feed(self, text: str) -> _Scan:
        for ch in text:
            self._step(ch)
            self.seen += 1
        return self

    def _step(self, ch: str) -> None:
        if self.closed:
            return
        if self.in_string:
            if self.escaped:
                self.escaped = False
            elif ch == "\\":
                self.escaped = True
            elif ch == '"':
                self.in_string = False
            return
        if ch.isspace():
            return
        in_list = self.stack == ["["]
        if in_list and self.after_call and ch in ",]":
            self.notes.append((ch, self.seen))
        if ch == '"':
            self.in_string = True
        elif ch in "[{":
            self.stack.append(ch)
        elif ch in "]}" and self.stack:
            opened = self.stack.pop()
            self.closed = opened == "[" and not self.stack
            self.after_call = opened == "{" and self.stack == ["["]
            return
        self.after_call = False


def closes(text: str) -> list[tuple[str, int]]:
    """What follows each call of the reply's top-level list: ``","`` or ``"]"``, with its index."""
    return _Scan().feed(text).notes


def more_probability(tokens: list[dict[str, Any]], prefix: str = "") -> float | None:
    """The model's probability of writing another call at the token that closed its list of calls.

    Args:
        tokens: The reply's tokens as OpenAI-compatible ``logprobs.content`` gives them, each with its
            ``top_logprobs`` alternatives.
        prefix: Text the reply continues (a reopened list), read before the tokens.

    Returns:
        The summed probability of the alternatives that would have continued the list at the token that
        closed it; ``None`` when the tokens never close a list after a call.

    """
    scan = _Scan().feed(prefix)
    found = None
    for token in tokens:
        before = scan.copy()
        count = len(before.notes)
        scan.feed(token.get("token", ""))
        if len(scan.notes) > count and scan.notes[count][0] == "]":
            more = 0.0
            for alt in token.get("top_logprobs") or []:
                notes = before.copy().feed(alt.get("token", "")).notes
                if len(notes) > count and notes[count][0] == ",":
                    more += math.exp(alt.get("logprob", -math.inf))
            found = more
        if scan.closed:
            break
    return found


def reopened(text: str) -> str | None:
    """The reply up to the end of its last call and a comma, for the model to go on; ``None`` if unclosed."""
    notes = closes(text)
    if not notes or notes[-1][0] != "]":
        return None
    return text[: notes[-1][1]].rstrip() + ","
