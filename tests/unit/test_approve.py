"""D3 without a graph: the policy, the steps of ``approve``, its request and the matching of resumes."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.core.context import Context
from workspace_agent.nodes.approve import (
    ResumeError,
    approval_request,
    check_budget,
    check_grants,
    check_policy,
    check_validity,
    in_call_order,
    match_decisions,
    needs_approval,
)
from workspace_agent.nodes.services import Toolset

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


def _tool(name: str, metadata: dict | None = None) -> StructuredTool:
    tool = StructuredTool.from_function(lambda **kw: "", name=name, description=f"{name} it")
    tool.metadata = metadata
    return tool


TOOLSET = Toolset(
    tools={
        "save_note": _tool("save_note"),
        "calculate": _tool("calculate"),
        "gh-issue": _tool("gh-issue", {"server": "gh", "tool": "issue", "mcp": True}),
    },
    unchosen={"web_search"},
)


def _call(name: str, id: str, **args) -> dict:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def test_the_approval_request_on_the_wire_is_langchains_shape_plus_ids_mcp_names_and_error():
    calls = [_call("save_note", "1", text="t"), _call("gh-issue", "2", title="x")]
    assert json.dumps(approval_request(calls, TOOLSET, None)) == json.dumps(
        {
            "type": "tool_approval",
            "action_requests": [
                {
                    "tool_call_id": "1",
                    "name": "save_note",
                    "args": {"text": "t"},
                    "description": "save_note it",
                },
                {
                    "tool_call_id": "2",
                    "name": "gh-issue",
                    "args": {"title": "x"},
                    "description": "gh-issue it",
                    "server": "gh",
                    "tool": "issue",
                },
            ],
            "review_configs": [
                {"action_name": "save_note", "allowed_decisions": ["approve", "edit", "reject"]},
                {"action_name": "gh-issue", "allowed_decisions": ["approve", "edit", "reject"]},
            ],
        }
    )
    again = approval_request(calls[:1], TOOLSET, "resume with ...")
    assert list(again) == ["type", "action_requests", "review_configs", "error"]


def test_what_validity_and_budget_answer_comes_back_in_the_order_of_the_calls():
    ai = AIMessage(
        "",
        tool_calls=[
            _call("calculate", "1"),
            _call("save_note", "2"),
            _call("nope", "3"),
            _call("web_search", "4"),
        ],
        invalid_tool_calls=[
            {"name": "calculate", "args": "{", "id": "0", "error": None, "type": "invalid_tool_call"}
        ],
    )
    valid = check_validity(ai, [HumanMessage("go"), ai], TOOLSET)
    budget = check_budget(valid.rest, 1)
    assert [c["id"] for c in budget.rest] == ["1"]
    merged = in_call_order(ai.tool_calls, valid, budget)
    assert [m.tool_call_id for m in merged.answered] == ["0", "2", "3", "4"]
    assert "budget" in merged.answered[1].content and "no tool named 'nope'" in merged.answered[2].content
    assert [(d["id"], d["outcome"]) for d in merged.notes] == [("D3", {"4": "not chosen"})]


async def test_policy_and_remembered_grants_approve_in_the_order_of_the_calls():
    records = MemoryRecords()
    await records.grant("w", "default", "save_note")
    ctx = Context(workspace="w", approval_required=["*"], auto_approved=["calculate"])
    calls = [_call("save_note", "1"), _call("calculate", "2"), _call("gh-issue", "3")]
    policy = check_policy(calls, ctx, TOOLSET)
    grants = await check_grants(policy.rest, ctx, TOOLSET, records)
    assert [c["id"] for c in grants.rest] == ["3"], "no grant for gh-issue: a person is asked"
    merged = in_call_order(calls, policy, grants)
    assert [c["id"] for c in merged.run] == ["1", "2"]
    assert [d["why"] for d in merged.notes] == [
        "always allow save_note was chosen",
        "calculate is auto-approved",
    ]
    floored = await check_grants(policy.rest, Context(workspace="w", also_ask=["save_*"]), TOOLSET, records)
    assert [c["id"] for c in floored.rest] == ["1", "3"], "a run's also_ask is not waived by a grant"
