"""A second message while a run is busy, under each of the dev server's multitask strategies.

Run 1 asks the (slow, scripted) model, which will answer with a ``save_note`` call that needs approval.
While the model is still thinking, run 2 sends another message with ``reject``, ``interrupt``, ``rollback``
or ``enqueue``. Whatever the strategy, the note is never saved unless a person approves it: a call whose
approval was abandoned (a new message came instead) or rolled back never runs, even when someone later
sends the approval it was waiting for.
"""

from __future__ import annotations

import asyncio

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError

from tests.support.helpers import user_message
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.samples.scripted_model import text_reply, tool_reply

SLOW = 3.0


@pytest.fixture
async def busy(dev_server, llm, workspace):
    """A thread whose run 1 is waiting for the model's ``save_note`` call; returns (client, ids...)."""
    client = get_client(url=dev_server)
    assistant = await client.assistants.create("agent", context={"workspace": workspace}, name=workspace)
    thread = await client.threads.create()
    slow_call = tool_reply(("save_note", {"text": "from run 1"})) | {"delay": SLOW}
    llm.push(slow_call, text_reply("second answer"))
    first = await client.runs.create(
        thread["thread_id"], assistant["assistant_id"], input=user_message("note this")
    )
    for _ in range(100):  # until run 1 is inside the model call
        if llm.requests:
            break
        await asyncio.sleep(0.05)
    assert llm.requests, "run 1 never reached the model"
    return client, assistant["assistant_id"], thread["thread_id"], first["run_id"]


async def second(client, assistant: str, thread: str, strategy: str) -> dict:
    return await client.runs.create(
        thread, assistant, input=user_message("something else"), multitask_strategy=strategy
    )


async def notes(database_url: str, workspace: str) -> list[str]:
    return await PostgresRecords(database_url).notes(workspace, "default")


async def late_approval_runs_nothing(client, assistant: str, thread: str, database_url, workspace) -> None:
    """Someone sends the approval run 1 was heading for: it must not save the note."""
    try:
        await client.runs.wait(thread, assistant, command={"resume": {"decisions": [{"type": "approve"}]}})
    except Exception:  # refusing the resume is as good as ignoring it; running the tool is not
        pass
    assert await notes(database_url, workspace) == []


async def test_reject_refuses_the_second_message_and_run_1_goes_on(busy, llm, database_url, workspace):
    client, assistant, thread, first = busy
    with pytest.raises(ConflictError):
        await second(client, assistant, thread, "reject")
    await client.runs.join(thread, first)
    state = await client.threads.get_state(thread)
    assert state["next"] == ["approve"]  # run 1 reached its approval, untouched
    assert [m["content"] for m in state["values"]["messages"] if m["type"] == "human"] == ["note this"]
    assert len(llm.requests) == 1 and await notes(database_url, workspace) == []


async def test_interrupt_stops_run_1_and_answers_the_second_message(busy, llm, database_url, workspace):
    client, assistant, thread, first = busy
    run2 = await second(client, assistant, thread, "interrupt")
    await client.runs.join(thread, run2["run_id"])
    assert (await client.runs.get(thread, first))["status"] == "interrupted"
    state = await client.threads.get_state(thread)
    assert state["next"] == [] and state["values"]["messages"][-1]["content"] == "second answer"
    assert await notes(database_url, workspace) == []
    await late_approval_runs_nothing(client, assistant, thread, database_url, workspace)


async def test_rollback_deletes_run_1_and_answers_the_second_message(busy, llm, database_url, workspace):
    client, assistant, thread, first = busy
    run2 = await second(client, assistant, thread, "rollback")
    await client.runs.join(thread, run2["run_id"])
    state = await client.threads.get_state(thread)
    assert state["values"]["messages"][-1]["content"] == "second answer"
    history = await client.threads.get_history(thread, limit=100)
    # adelete_for_runs removed every checkpoint run 1 wrote: nothing of it is left to resume or replay.
    assert any(h["metadata"].get("run_id") == run2["run_id"] for h in history)
    assert all(h["metadata"].get("run_id") != first for h in history), [h["metadata"] for h in history]
    assert "note this" not in str([h["values"] for h in history])
    assert await notes(database_url, workspace) == []
    await late_approval_runs_nothing(client, assistant, thread, database_url, workspace)


async def test_enqueue_runs_the_second_message_after_run_1_and_abandons_its_approval(
    busy, llm, database_url, workspace
):
    client, assistant, thread, first = busy
    run2 = await second(client, assistant, thread, "enqueue")
    await client.runs.join(thread, run2["run_id"])
    assert (await client.runs.get(thread, first))["status"] == "success"
    state = await client.threads.get_state(thread)
    values = state["values"]
    assert values["messages"][-1]["content"] == "second answer" and state["next"] == []
    abandoned = [d for d in values["decisions"] if d["id"] == "D3" and "abandoned" in str(d["outcome"])]
    assert abandoned, values["decisions"]
    assert await notes(database_url, workspace) == []
    await late_approval_runs_nothing(client, assistant, thread, database_url, workspace)


async def test_a_copied_thread_carries_the_whole_chain_and_its_pending_approval(
    dev_server, llm, workspace, database_url
):
    """The dev server's thread copy uses the saver's ``acopy_thread``: the copy can be resumed on its own."""
    client = get_client(url=dev_server)
    assistant = await client.assistants.create("agent", context={"workspace": workspace}, name=workspace)
    thread = await client.threads.create()
    llm.push(tool_reply(("save_note", {"text": "copied"})), text_reply("saved in the copy"))
    await client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=user_message("note it"))
    copy = await client.threads.copy(thread["thread_id"])
    original = await client.threads.get_history(thread["thread_id"], limit=100)
    copied = await client.threads.get_history(copy["thread_id"], limit=100)
    assert [h["checkpoint"]["checkpoint_id"] for h in copied] == [
        h["checkpoint"]["checkpoint_id"] for h in original
    ]
    assert (await client.threads.get_state(copy["thread_id"]))["next"] == ["approve"]
    out = await client.runs.wait(
        copy["thread_id"], assistant["assistant_id"], command={"resume": {"decisions": [{"type": "approve"}]}}
    )
    assert out["messages"][-1]["content"] == "saved in the copy"
    assert (await client.threads.get_state(thread["thread_id"]))["next"] == ["approve"]  # untouched
    assert await notes(database_url, workspace) == ["copied"]
