"""Finding 19.3: the call parser ran in quadratic time, and it runs on the event loop.

Each ``[`` of a reply was parsed afresh up to Python's recursion limit, so ``"a" + "[" * 4000`` took 8-13 s
and froze every thread of the process. These replies are what a model (or a prompt injected into its
context) can write; each must be read in linear time. The bound is generous: it catches the blow-up, not a
slow machine, and a linear parser meets it by orders of magnitude.
"""

from __future__ import annotations

import time

import pytest

from workspace_agent.providers.prompted.call_parsing import MAX_REPLY_CHARS, names_a_tool, parse_reply

TOOLS = {"save_note": ("text",), "calculate": ("expression",)}
BOUND = 2.0  # seconds; a linear parser takes milliseconds for any of these
SIZE = 4000

PATHOLOGICAL = {
    "a then open lists": "a" + "[" * SIZE,
    "open lists": "[" * SIZE,
    "open objects": "{" * SIZE,
    "open keys": '{"a":' * SIZE,
    "list of open lists": "[1," * SIZE,
    "open lists before a long flat list": "[" * SIZE + "1," * SIZE + "x",
    "closed deep nesting": "[" * SIZE + "]" * SIZE,
    "unterminated string after lists": "[" * SIZE + '"' + "x" * SIZE,
    "strings opening lists": '["[' * SIZE,
    "mixed quotes": "[\"'[" * SIZE,
    "escaped quotes": '["\\"[' * SIZE,
    "doubled braces": "{{" * SIZE + "[" * SIZE,
    "calls never closed": '[{"name": "save_note", "arguments": {"text": "' * (SIZE // 10),
}


def _timed(text: str, tries: int = 1) -> float:
    """The shortest of ``tries`` readings of ``text``, as the prompted path reads it (calls, then names)."""
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        parse_reply(text, TOOLS)
        names_a_tool(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_a_pathological_reply_is_read_in_linear_time(name: str) -> None:
    text = PATHOLOGICAL[name]
    assert len(text) <= MAX_REPLY_CHARS, "the shape itself is parsed, not refused by the size cap"
    elapsed = _timed(text)
    assert elapsed < BOUND, f"{name}: {elapsed:.2f} s for {len(text)} characters"


def test_doubling_a_pathological_reply_does_not_quadruple_its_time() -> None:
    small, large = _timed("a" + "[" * 2000, tries=3), _timed("a" + "[" * 8000, tries=3)
    assert large < max(small, 0.005) * 12, f"2000: {small:.4f} s, 8000: {large:.4f} s (linear: 4x)"


def test_calls_are_still_read_from_a_reply_with_lists_left_open_before_them() -> None:
    call = '{"name": "calculate", "arguments": {"expression": "6*7"}}'
    calls, _ = parse_reply("[" * 300 + " " + call, TOOLS)
    assert [c["args"] for c in calls] == [{"expression": "6*7"}]


def test_a_reply_longer_than_the_cap_is_text() -> None:
    call = '[{"name": "calculate", "arguments": {"expression": "6*7"}}]'
    padded = call + " " * MAX_REPLY_CHARS
    start = time.perf_counter()
    assert parse_reply(padded, TOOLS) == ([], []) and not names_a_tool(padded)
    assert time.perf_counter() - start < BOUND
    assert parse_reply(call, TOOLS)[0], "the same call under the cap is read"
