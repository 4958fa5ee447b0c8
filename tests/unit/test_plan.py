"""A plan trim writes is a ``Plan`` as checkpoints store it; ``assemble`` reads it back to one request."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import TypeAdapter

from workspace_agent.core.context import Context
from workspace_agent.core.plan import Plan, assemble
from workspace_agent.nodes.trim import build_prompt

CALLS = [{"name": "t", "args": {}, "id": f"c{i}", "type": "tool_call"} for i in range(2)]


def earlier(n: int, pad: str = "") -> list[BaseMessage]:
    return [m for i in range(n) for m in (HumanMessage(f"q{i}{pad}"), AIMessage(f"a{i}{pad}"))]


def shape(request: list[BaseMessage]) -> list[tuple]:
    return [(type(m).__name__, m.content, m.id, getattr(m, "tool_call_id", None)) for m in request]


BUILT = {
    "fits": (Context(context_window=8192), [*earlier(3), HumanMessage("now", id="u")]),
    "history cut": (
        Context(context_window=2000, reply_reserve=100),
        [*earlier(30, " filler" * 10), HumanMessage("word " * 1200, id="u")],
    ),
    "user alone": (Context(context_window=1000), [*earlier(5), HumanMessage("x y " * 3000, id="u")]),
    "tool results cut": (
        Context(context_window=3000),
        [
            *earlier(4),
            HumanMessage("go", id="u"),
            AIMessage("", tool_calls=CALLS),
            *[ToolMessage("z " * 3000, tool_call_id=f"c{i}") for i in range(2)],
        ],
    ),
}


@pytest.mark.parametrize("case", BUILT)
def test_a_built_plan_is_a_whole_plan_that_survives_its_checkpoint(case: str):
    ctx, messages = BUILT[case]
    plan, _ = build_prompt(ctx, messages, ["likes tea"], ["doc text"])
    assert set(plan) == Plan.__required_keys__ | Plan.__optional_keys__, "a built plan has every key"
    TypeAdapter(Plan).validate_python(plan, strict=True)
    stored = json.loads(json.dumps(plan))  # what a checkpoint gives back
    assert stored == plan
    assert shape(assemble(stored, messages)) == shape(assemble(plan, messages))


def test_assemble_reads_the_history_and_the_turn_from_messages_and_only_cuts_from_the_plan():
    messages = [
        HumanMessage("q0", id="h0"),
        AIMessage("a0", id="a0"),
        HumanMessage("q1", id="h1"),
        AIMessage("refused", id="a1", response_metadata={"excluded_from_history": True}),
        HumanMessage("@agent q2", id="h2"),
        AIMessage("a2", id="a2"),
        HumanMessage("@agent go", id="u"),
        AIMessage("", tool_calls=CALLS, id="ai"),
        ToolMessage("a long result", tool_call_id="c0", id="t0"),
        ToolMessage("short", tool_call_id="c1", id="t1"),
    ]
    plan: Plan = {
        "system": "S",
        "context": "C\n",
        "history": [["q0 cut", "a0 cut"], 1],
        "user": None,
        "tools": {"c0": "cut"},
        "history_limit": 2,
    }
    assert shape(assemble(plan, messages)) == [
        ("SystemMessage", "S", None, None),
        ("HumanMessage", "q0 cut", None, None),
        ("AIMessage", "a0 cut", None, None),
        ("HumanMessage", "q2", None, None),  # index 1 of the history: the refusal is never given back
        ("AIMessage", "a2", None, None),
        ("HumanMessage", "C\ngo", "u", None),
        ("AIMessage", "", "ai", None),
        ("ToolMessage", "cut", "t0", "c0"),
        ("ToolMessage", "short", "t1", "c1"),
    ]
    alone: Plan = {
        "system": None,
        "context": None,
        "history": [],
        "user": "g…o",
        "tools": {},
        "history_limit": 2,
    }
    request = assemble(alone, messages)
    assert not isinstance(request[0], SystemMessage) and request[0].content == "g…o"


def test_a_plan_checkpointed_before_history_limit_reads_the_whole_history():
    messages = [*earlier(3), HumanMessage("now", id="u")]
    old = {"system": "S", "context": "", "history": [0, 2], "user": None, "tools": {}}
    assert [m.content for m in assemble(old, messages)] == ["S", "q0", "a0", "q2", "a2", "now"]
