"""D3 without a graph: the policy and the matching of resume decisions to pending calls."""

from __future__ import annotations

import pytest

from workspace_agent.graphs.context import Context
from workspace_agent.nodes.approve import ResumeError, match_decisions, needs_approval

CALLS = [
    {"name": "a", "args": {}, "id": "1", "type": "tool_call"},
    {"name": "b", "args": {}, "id": "2", "type": "tool_call"},
]


def test_policy_auto_approved_wins_and_mcp_servers_can_be_trusted_whole():
    ctx = Context(approval_required=["*"], auto_approved=["files-*", "current_datetime"])
    assert needs_approval(ctx, "save_note")
    assert not needs_approval(ctx, "files-read")
    assert not needs_approval(ctx, "current_datetime")
    assert not needs_approval(Context(approval_required=["gmail-*"], auto_approved=[]), "calculate")


def test_decisions_match_by_id_whatever_their_order():
    got = match_decisions(
        {"decisions": [{"type": "reject", "tool_call_id": "2"}, {"type": "approve", "tool_call_id": "1"}]},
        CALLS,
    )
    assert got["1"]["type"] == "approve" and got["2"]["type"] == "reject"


def test_decisions_without_ids_match_by_position():
    got = match_decisions({"decisions": [{"type": "approve"}, {"type": "reject"}]}, CALLS)
    assert got["1"]["type"] == "approve" and got["2"]["type"] == "reject"


@pytest.mark.parametrize(
    "value, message",
    [
        (None, "resume with"),
        ({"decisions": {}}, "resume with"),
        ({"decisions": [{"type": "approve"}]}, "no decision for pending tool call(s): 2"),
        (
            {"decisions": [{"type": "approve", "tool_call_id": "9"}, {"type": "approve"}]},
            "no pending tool call '9'",
        ),
        (
            {
                "decisions": [
                    {"type": "approve", "tool_call_id": "1"},
                    {"type": "approve", "tool_call_id": "1"},
                ]
            },
            "answered twice",
        ),
        (
            {
                "decisions": [
                    {"type": "edit", "edited_action": {"name": "other", "args": {}}},
                    {"type": "approve"},
                ]
            },
            "cannot change which tool",
        ),
        ({"decisions": ["approve", "approve"]}, "type must be one of"),
    ],
)
def test_bad_resume_values_are_named(value, message):
    with pytest.raises(ResumeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        match_decisions(value, CALLS)
