"""Built-in tools and workspace settings."""

from __future__ import annotations

import pytest

from workspace_agent.core.context import Context
from workspace_agent.core.conversation import message_text
from workspace_agent.skills.builtin import calculate


def test_calculate_does_arithmetic_and_nothing_else():
    assert calculate("(3 + 4) * 2") == "14"
    assert calculate("2 ** 10") == "1024"
    for bad in ["__import__('os')", "open('x')", "[1,2]", "2 ** 100000"]:
        with pytest.raises((ValueError, SyntaxError)):
            calculate(bad)


def test_calculate_takes_the_functions_a_model_writes_of_itself():
    assert calculate("sqrt(1764)") == "42", "the 1.5B wrote sqrt(1764) and was refused"
    assert calculate("round(1260 / 9 * 1.19, 2)") == "166.6" and calculate("abs(3 - 10)") == "7"
    assert calculate("max(3, 12 * 4, 7) - min(2, 5)") == "46"
    for bad in [
        "sqrt(-1)",
        "round(10 ** 3000, -1000000)",
        "sqrt(2, 3)",
        "round(2.5, ndigits=1)",
        "pow(2, 3)",
    ]:
        with pytest.raises(ValueError):
            calculate(bad)


def test_context_windows_and_validation(monkeypatch):
    # The family table applies to a configured endpoint; the embedded model's own window is its fact.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("CONTEXT_WINDOW", raising=False)
    assert Context(model="gpt-4o-mini").window == 128_000
    assert Context(model="something-local").window == 8192
    assert Context(model="x", context_window=4096).window == 4096
    for bad in [{"top_n": 0}, {"similarity_threshold": 1.5}, {"chat_mode": "shout"}, {"max_tool_calls": -1}]:
        with pytest.raises(ValueError):
            Context(**bad)


def test_every_context_field_is_described():
    assert all(f.description for f in Context.model_fields.values())


def test_content_blocks_are_joined_as_text():
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": "x"},
        {"type": "text", "text": "b"},
    ]
    assert message_text({"content": blocks}) == "a\nb"


def test_set_values_are_json_except_for_text_fields():
    from workspace_agent.core.context import ContextError, parse_assignments

    assert parse_assignments(
        ['auto_approved=["a-*"]', "history_limit=5", "workspace=2024", "model=gpt-4o"]
    ) == {
        "auto_approved": ["a-*"],
        "history_limit": 5,
        "workspace": "2024",
        "model": "gpt-4o",
    }
    assert parse_assignments(["history_limit=abc", "memories_enabled=no"]) == {
        "history_limit": "abc",
        "memories_enabled": "no",
    }, "nothing is converted to fit: Context names the field instead"
    with pytest.raises(ContextError, match="name=value"):
        parse_assignments(["history_limit"])


def test_optional_and_list_fields_take_exactly_their_types():
    from workspace_agent.core.context import ContextError

    assert Context(model="x", context_window=None, auto_approved=("a",), also_ask=[]).auto_approved == ["a"]
    for bad in [
        {"context_window": "4096"},
        {"also_ask": "x"},
        {"top_n": 2.0},
        {"user_id": ""},
        {"reply_reserve": 10**9},
    ]:
        with pytest.raises(ContextError):
            Context(model="x", **bad)


def test_a_result_is_written_as_a_person_writes_it_without_binary_float_error():
    assert calculate("(49 / 10) * 100") == "490", "not 490.00000000000006, which the model copied into a note"
    assert calculate("400 / 8") == "50" and calculate("7 / 2") == "3.5" and calculate("0.1 + 0.2") == "0.3"
    assert calculate("1 / 3") == "0.333333333333", "twelve significant digits"
    assert calculate("2 ** 70") == str(2**70), "integers stay exact"
    assert calculate("1e308 * 10") == "inf"
