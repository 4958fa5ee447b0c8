"""The prompted path's rules table agrees with the code, and switching a rule off really switches it off."""

import re
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from workspace_agent.providers.prompted import named_unused, rules

ROOT = Path(__file__).resolve().parents[2]


def _asked() -> set[str]:
    """Every rule name the product code asks ``on`` about."""
    found: set[str] = set()
    for folder in ("providers", "nodes"):
        for path in (ROOT / folder).rglob("*.py"):
            found |= set(re.findall(r"\bon\(\"([a-z_]+)\"\)", path.read_text()))
    return found


def test_every_steering_rule_has_a_switch_in_the_code_and_every_switch_a_row():
    steering = {r.name for r in rules.RULES if r.steers}
    asked = _asked()
    assert steering - asked == set(), "a steering rule the code never asks about cannot be measured off"
    assert asked - set(rules.BY_NAME) == set(), "the code asks about a rule the table does not list"


def test_every_rule_says_what_it_reacts_to_does_and_records():
    for rule in rules.RULES:
        assert rule.reacts_to and rule.does and rule.decision, rule.name


def test_nothing_is_switched_off_outside_a_bench():
    assert rules.off == set()


@tool
def save_note(text: str) -> str:
    """Save a note."""
    return "saved"


def test_a_rule_switched_off_does_nothing():
    question = "What is 2 + 3? Save the result as a note."
    turn = [
        HumanMessage(question),
        AIMessage("", tool_calls=[{"name": "calculate", "args": {"expression": "2 + 3"}, "id": "c1"}]),
        ToolMessage("5", tool_call_id="c1"),
    ]
    assert named_unused(question, turn, [save_note]) == ["save_note"]
    rules.off.add("named_unused")
    try:
        assert named_unused(question, turn, [save_note]) == []
    finally:
        rules.off.discard("named_unused")
