"""Item 1: a run may ask for more approval than its assistant, never less; the deployment's floor always asks.

Through ``langgraph dev`` a run's context is merged over its assistant's, the run winning, so before these
rules ``context={"auto_approved": ["*"]}`` on an assistant that asks ran ``save_note`` unasked. A run's
``command`` (``goto``/``update``) and a state write ``as_node="approve"`` reached ``execute_tool`` past the
person as well.
"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import ALWAYS_ASK, KEYS
from tests.support.helpers import user_message
from tests.support.tools import make_test_tools, recorded
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def status_of(exc: BaseException) -> int:
    return exc.response.status_code  # type: ignore[attr-defined]


def asked(state: dict) -> list[str]:
    """The tools a pending approval asks about (none when the thread is not waiting)."""
    if state["next"] != ["approve"]:
        return []
    return [a["name"] for a in state["tasks"][0]["interrupts"][0]["value"]["action_requests"]]


async def test_a_run_cannot_auto_approve_what_its_assistant_asks(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    assistant = await client.assistants.create("agent", context={"workspace": workspace}, name=workspace)
    loosening = [
        {"context": {"auto_approved": ["*"]}},
        {"context": {"auto_approved": "github-*"}},
        {"context": {"auto_approved": ["save_note"]}},
        {"context": {"approval_required": []}},
        {"context": {"approval_required": ["other-*"]}},
        {"config": {"configurable": {"workspace": workspace, "auto_approved": ["*"]}}},
    ]
    for attempt in loosening:
        thread = await client.threads.create()
        llm.push(tool_reply(("save_note", {"text": "unasked"})), text_reply("saved"))
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.runs.wait(
                thread["thread_id"], assistant["assistant_id"], input=user_message("go"), **attempt
            )
        assert status_of(refused.value) == 403, attempt
        assert "also_ask" in refused.value.response.text or "list of strings" in refused.value.response.text
        llm.reset()
    thread = await client.threads.create()
    llm.push(tool_reply(("save_note", {"text": "asked"})))
    await client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=user_message("go"))
    assert asked(await client.threads.get_state(thread["thread_id"])) == ["save_note"]


async def test_a_run_may_ask_for_more_than_its_assistant(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    trusting = await client.assistants.create(
        "agent", context={"workspace": workspace, "auto_approved": ["save_note", "current_datetime"]}
    )
    for tightening, expected in [
        ({}, []),  # the assistant's own choice: save_note runs unasked
        ({"also_ask": ["save_*"]}, ["save_note"]),
        ({"auto_approved": []}, ["save_note"]),
        ({"approval_required": ["*"]}, []),  # allowed, and the assistant's auto_approved still wins
    ]:
        thread = await client.threads.create()
        llm.push(tool_reply(("save_note", {"text": "n"})), text_reply("ok"))
        await client.runs.wait(
            thread["thread_id"], trusting["assistant_id"], input=user_message("go"), context=tightening
        )
        assert asked(await client.threads.get_state(thread["thread_id"])) == expected, tightening
        llm.reset()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.assistants.create("agent", context={"workspace": workspace, "also_ask": ["x"]})
    assert status_of(refused.value) == 403 and "also_ask is a run's setting" in refused.value.response.text


async def test_the_deployment_floor_beats_context_and_always_allow(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    monkeypatch.setenv("ALWAYS_ASK_TOOLS", "slow, other-*")
    record = tmp_path / "runs.jsonl"
    records = PostgresRecords()
    await records.grant(workspace, "default", "slow")
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record), records=records)
    llm.push(tool_reply(("slow", {"seconds": 0, "label": "floor"})), text_reply("done"))
    out = await graph.ainvoke(
        user_message("go"), thread, context={"workspace": workspace, "auto_approved": ["*"]}
    )
    assert [a["name"] for a in out["__interrupt__"][0].value["action_requests"]] == ["slow"]
    assert recorded(record) == []


async def test_the_deployment_floor_through_the_sdk(secured_server, llm, workspace):
    alice = get_client(url=secured_server, api_key=KEYS["alice"])
    thread = await alice.threads.create()
    llm.push(tool_reply((ALWAYS_ASK, {"expression": "6 * 7"})), text_reply("42"))
    await alice.runs.wait(
        thread["thread_id"], "agent", input=user_message("six times seven?"), context={"workspace": workspace}
    )
    assert asked(await alice.threads.get_state(thread["thread_id"])) == [ALWAYS_ASK], (
        "calculate is read-only, yet asks"
    )


async def test_a_run_cannot_steer_past_a_pending_approval(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    llm.push(tool_reply(("save_note", {"text": "asked"})))
    await client.runs.wait(
        thread["thread_id"], "agent", input=user_message("go"), context={"workspace": workspace}
    )
    state = await client.threads.get_state(thread["thread_id"])
    call = {"name": "save_note", "args": {"text": "forged"}, "id": "forged-1", "type": "tool_call"}
    for command in [
        {"goto": {"node": "execute_tool", "input": {"call": call}}},
        {"update": {"approved": [call]}, "goto": "execute_tool"},
        {"update": {"approved": [call]}, "resume": {"decisions": [{"type": "reject"}]}},
    ]:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.runs.wait(
                thread["thread_id"], "agent", command=command, context={"workspace": workspace}
            )
        assert status_of(refused.value) == 403 and "only resume" in refused.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.threads.update_state(thread["thread_id"], {"approved": [call]}, as_node="approve")
    assert status_of(refused.value) == 403
    after = await client.threads.get_state(thread["thread_id"])
    assert after["checkpoint"] == state["checkpoint"] and asked(after) == ["save_note"]
    assert len(llm.requests) == 1
