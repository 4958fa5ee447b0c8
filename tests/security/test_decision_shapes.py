"""A malformed approval decision loses nothing (issue 40, finding 4).

A ``tool_call_id`` that is an object or a list, a message that is a number, two decisions for one call or
an edit whose arguments are no object raised ``TypeError`` in ``match_decisions``: the run failed, the pending
call was gone, and the proper approve sent next failed too. Every decision is now checked by shape first,
on every path: a bad one is named, the approval stays pending, and the right decision sent next runs the
call exactly once. Attacked three ways: any JSON value against the matcher (hypothesis), fuzzed resumes
against a real graph on PostgreSQL, and the reported values through ``langgraph_sdk`` and ``/api/v1``.
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.support.helpers import user_message
from tests.support.tools import make_test_tools, recorded
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.nodes.approve import ResumeError, match_decisions
from workspace_agent.samples.scripted_model import text_reply, tool_reply

CALLS = [
    {"name": "save_note", "args": {"text": "a"}, "id": "call_1", "type": "tool_call"},
    {"name": "calculate", "args": {"expression": "1+1"}, "id": "call_2", "type": "tool_call"},
]
#: What the reviewer sent: an id that is an object or a list, one call answered twice, edited args no object.
REPORTED = [
    {"decisions": [{"type": "approve", "tool_call_id": {"id": "call_1"}}, {"type": "approve"}]},
    {"decisions": [{"type": "approve", "tool_call_id": ["call_1"]}, {"type": "approve"}]},
    {
        "decisions": [
            {"type": "approve", "tool_call_id": "call_1"},
            {"type": "approve", "tool_call_id": "call_1"},
        ]
    },
    {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "save_note", "args": ["x"]}},
            {"type": "approve"},
        ]
    },
    {"decisions": [{"type": "reject", "message": {"why": 1}}, {"type": "approve"}]},
    {"decisions": [{"type": "approve", "always_allow": "yes"}, {"type": "approve"}]},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
#: Decisions built from the contract's own field names, with values of any JSON type.
decision_values = st.dictionaries(
    st.sampled_from(["type", "tool_call_id", "edited_action", "message", "always_allow", "extra"]),
    st.sampled_from(["approve", "edit", "reject", "call_1", "call_2"])
    | json_values
    | st.fixed_dictionaries({"name": json_values, "args": json_values}),
    max_size=5,
)
resume_values = (
    json_values
    | st.fixed_dictionaries({"decisions": st.lists(decision_values, max_size=3)})
    | st.fixed_dictionaries({"decisions": json_values})
)


@given(resume_values)
@settings(max_examples=600, deadline=None)
def test_any_resume_value_is_matched_or_named_never_a_type_error(value) -> None:
    try:
        matched = match_decisions(value, CALLS)
    except ResumeError as exc:
        assert str(exc)
        return
    assert set(matched) == {"call_1", "call_2"}
    for decision in matched.values():
        assert decision["type"] in ("approve", "edit", "reject")
        if decision["type"] == "edit":
            assert isinstance(decision["edited_action"]["args"], dict)


@pytest.mark.parametrize("value", REPORTED)
def test_the_reported_decisions_are_named(value) -> None:
    with pytest.raises(ResumeError, match=r"decision [01]: "):
        match_decisions(value, CALLS)


@pytest.fixture
async def pending(llm, saver, workspace, tmp_path):
    """A graph waiting on one approval of the test tool ``repeat``; it records every run of the tool."""
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    context = Context(workspace=workspace, auto_approved=[])

    async def start() -> dict:
        config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
        llm.reset()
        llm.push(tool_reply(("repeat", {"word": "a", "times": 1})), text_reply("done"))
        out = await graph.ainvoke(user_message("go"), config, context=context)
        assert out["__interrupt__"], "the call waits for a person"
        return config

    return graph, context, record, start


@given(value=st.sampled_from(REPORTED) | resume_values)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
async def test_a_fuzzed_resume_keeps_the_approval_and_the_next_right_one_runs_it_once(pending, value) -> None:
    graph, context, record, start = pending
    config = await start()
    before = len(recorded(record))
    try:
        out = await graph.ainvoke(Command(resume=value), config, context=context)
    except Exception:
        # LangGraph refuses some values before any node runs: None (its loop fails on it), {} (a resume map
        # naming no interrupt), an int beyond 64 bits (the checkpoint serializer)
        out = {"__interrupt__": (await graph.aget_state(config)).interrupts}
    if "__interrupt__" in out:
        assert out["__interrupt__"], "the approval is still pending"
        assert len(recorded(record)) == before, "nothing ran"
        out = await graph.ainvoke(
            Command(resume={"decisions": [{"type": "approve"}]}), config, context=context
        )
        assert len(recorded(record)) == before + 1, "the approval stayed answerable and ran once"
    assert out["stop_reason"] == "answered"
    assert len(recorded(record)) <= before + 1


@pytest.mark.parametrize("value", REPORTED)
async def test_a_reported_resume_is_asked_again_with_its_error(pending, value) -> None:
    graph, context, record, start = pending
    config = await start()
    single = {"decisions": value["decisions"][:1]} if value is not REPORTED[2] else value
    out = await graph.ainvoke(Command(resume=single), config, context=context)
    assert "decision " in out["__interrupt__"][0].value["error"]
    assert recorded(record) == []


async def test_a_malformed_resume_through_the_sdk_keeps_the_approval(dev_server, llm, workspace) -> None:
    client = get_client(url=dev_server)
    assistant = await client.assistants.create(
        "agent", context={"workspace": workspace, "auto_approved": []}, name=workspace
    )
    thread = await client.threads.create()
    llm.reset()
    llm.push(tool_reply(("save_note", {"text": "sdk note"})), text_reply("saved"))
    await client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=user_message("@agent note"))
    for bad in REPORTED[:2] + REPORTED[3:4]:
        single = {"decisions": bad["decisions"][:1]}
        await client.runs.wait(thread["thread_id"], assistant["assistant_id"], command={"resume": single})
        state = await client.threads.get_state(thread["thread_id"])
        (interrupt,) = [i for t in state["tasks"] for i in t["interrupts"]]
        assert interrupt["value"]["type"] == "tool_approval" and "decision 0: " in interrupt["value"]["error"]
    done = await client.runs.wait(
        thread["thread_id"],
        assistant["assistant_id"],
        command={"resume": {"decisions": [{"type": "approve"}]}},
    )
    assert done["stop_reason"] == "answered" and done["messages"][-1]["content"] == "saved"
    notes = [m for m in done["messages"] if m["type"] == "tool" and m["name"] == "save_note"]
    assert len(notes) == 1 and notes[0]["status"] == "success"


async def test_a_malformed_decision_on_api_v1_is_a_400_and_the_approval_stays(
    dev_server, llm, workspace
) -> None:
    client = get_client(url=dev_server)
    await client.assistants.create(
        "agent", context={"workspace": workspace, "auto_approved": []}, name=workspace
    )
    llm.reset()
    llm.push(tool_reply(("save_note", {"text": "api note"})), text_reply("saved"))
    async with httpx.AsyncClient(base_url=f"{dev_server}/api/v1", timeout=120) as api:
        asked = await api.post(
            f"/workspace/{workspace}/chat", json={"message": "@agent note", "sessionId": "s"}
        )
        call = asked.json()["pendingApproval"]["calls"][0]
        for bad in (
            [{"type": "approve", "tool_call_id": {"id": call["id"]}}],
            [{"type": "approve", "tool_call_id": [call["id"]]}],
            [{"type": "edit", "tool_call_id": call["id"], "edited_action": {"args": "text=x"}}],
        ):
            refused = await api.post(
                f"/workspace/{workspace}/chat", json={"sessionId": "s", "decisions": bad}
            )
            assert refused.status_code == 400 and "decision 0: " in refused.json()["error"], refused.text
        twice = [{"type": "approve", "tool_call_id": call["id"]}] * 2
        refused = await api.post(f"/workspace/{workspace}/chat", json={"sessionId": "s", "decisions": twice})
        assert refused.status_code == 400 and "answered twice" in refused.json()["error"], refused.text
        assert refused.json()["pendingApproval"]["calls"][0]["id"] == call["id"], "still pending"
        right = [{"type": "approve", "tool_call_id": call["id"]}]
        answered = await api.post(f"/workspace/{workspace}/chat", json={"sessionId": "s", "decisions": right})
        assert answered.status_code == 200 and answered.json()["textResponse"] == "saved", answered.text
    saves = [r for r in llm.requests if any(m.get("role") == "tool" for m in r["messages"])]
    assert len(saves) == 1, "the note was saved once, after the right decision"


def test_the_cli_asks_again_for_edited_arguments_until_they_are_an_object(monkeypatch) -> None:
    from workspace_agent.cli import chat

    typed = iter(["e", "{not json", '["x"]', '{"text": "fixed"}'])
    monkeypatch.setattr(chat.Prompt, "ask", lambda *_a, **_k: next(typed))
    request = {"action_requests": [{"tool_call_id": "call_1", "name": "save_note", "args": {"text": "a"}}]}
    decisions = chat._ask_person(request)["decisions"]
    assert decisions == [
        {
            "tool_call_id": "call_1",
            "type": "edit",
            "edited_action": {"name": "save_note", "args": {"text": "fixed"}},
        }
    ]
    assert match_decisions({"decisions": decisions}, CALLS[:1])["call_1"]["type"] == "edit"
