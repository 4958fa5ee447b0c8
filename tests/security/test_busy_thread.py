"""Item 5: one turn at a time per thread, in-process and under the server; forks are forks.

Before, two turns sent at once on one thread both "answered" and the last writer won; and a resume naming
the checkpoint of an approval card the thread had moved past took the card's first answer again: a
"reject" sent there ran the approved tool a second time.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import httpx
import pytest
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.security.conftest import KEYS
from tests.support.helpers import user_message
from tests.support.tools import make_test_tools, recorded
from workspace_agent.checkpoints.turn_lock import ThreadBusy
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def slow_reply(text: str, seconds: float) -> dict:
    return {**text_reply(text), "delay": seconds}


async def until(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_second_turn_on_a_running_thread_is_refused(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, chat_mode="chat")
    llm.push(slow_reply("first answer", 1.5), text_reply("second answer"))
    first = asyncio.create_task(graph.ainvoke(user_message("first"), thread, context=context))
    await until(lambda: len(llm.requests) == 1)
    with pytest.raises(ThreadBusy, match="thread busy"):
        await graph.ainvoke(user_message("second"), thread, context=context)
    out = await first
    assert out["messages"][-1].content == "first answer"
    assert len(llm.requests) == 1, "the refused turn never reached the model"
    state = await graph.aget_state(thread)
    assert [m.content for m in state.values["messages"]] == ["first", "first answer"]

    again = await graph.ainvoke(user_message("second"), thread, context=context)
    assert again["messages"][-1].content == "second answer", "the thread takes the next turn once free"


async def test_a_turn_in_another_process_makes_the_thread_busy(llm, saver, workspace, thread, database_url):
    thread_id = thread["configurable"]["thread_id"]
    llm.push(slow_reply("from the other process", 2.0))
    env = {**os.environ, "DATABASE_URL": database_url}
    other = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.run_turn",
            "--thread",
            thread_id,
            "--message",
            "hi",
            "--context",
            f'{{"workspace": "{workspace}", "chat_mode": "chat"}}',
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await until(lambda: len(llm.requests) == 1)
        graph = build_graph(checkpointer=saver)
        with pytest.raises(ThreadBusy):
            await graph.ainvoke(
                user_message("me too"), thread, context=Context(workspace=workspace, chat_mode="chat")
            )
        out, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
    finally:
        if other.poll() is None:
            other.kill()
    assert len(llm.requests) == 1
    llm.push(text_reply("now"))
    out = await graph.ainvoke(
        user_message("me too"), thread, context=Context(workspace=workspace, chat_mode="chat")
    )
    assert out["messages"][-1].content == "now", "the lock went with the other process's turn"


async def test_other_threads_are_not_held_up(llm, saver, workspace):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, chat_mode="chat")
    llm.push(slow_reply("a", 0.5), slow_reply("b", 0.5))
    outs = await asyncio.gather(
        *(
            graph.ainvoke(
                user_message(n), {"configurable": {"thread_id": f"{workspace}-{n}"}}, context=context
            )
            for n in "ab"
        )
    )
    assert sorted(o["messages"][-1].content for o in outs) == ["a", "b"]


async def test_the_server_rejects_a_second_run_on_a_busy_thread(dev_server, llm, workspace):
    """The server's own multitask strategy (not this project's code): ``reject`` answers 409."""
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    context = {"workspace": workspace, "chat_mode": "chat"}
    llm.push(slow_reply("first", 2.0), text_reply("second"))
    first = await client.runs.create(thread["thread_id"], "agent", input=user_message("1"), context=context)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.runs.create(
            thread["thread_id"],
            "agent",
            input=user_message("2"),
            context=context,
            multitask_strategy="reject",
        )
    assert refused.value.response.status_code == 409
    await client.runs.join(thread["thread_id"], first["run_id"])
    state = await client.threads.get_state(thread["thread_id"])
    assert [m["content"] for m in state["values"]["messages"]] == ["1", "first"]


def d3(values: dict) -> list[dict]:
    return [d for d in values.get("decisions", []) if d["id"] == "D3"]


async def a_card(llm, saver, thread, tmp_path, context: Context, *replies: dict):
    """A thread stopped at an approval of ``repeat``: the graph, its tool record, the card's checkpoint."""
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("repeat", {"word": "a", "times": 1})), *replies)
    out = await graph.ainvoke(user_message("go"), thread, context=context)
    card = (await graph.aget_state(thread)).config["configurable"]["checkpoint_id"]
    return graph, record, card, out["__interrupt__"][0].value["action_requests"][0]["tool_call_id"]


def at(thread: dict, checkpoint_id: str) -> dict:
    return {"configurable": {**thread["configurable"], "checkpoint_id": checkpoint_id}}


async def test_a_resume_at_an_older_checkpoint_forks_with_the_new_decision(
    llm, saver, workspace, thread, tmp_path
):
    """The original branch approved; a reject sent at the checkpoint of the card is a fork and is obeyed."""
    context = Context(workspace=workspace, auto_approved=[])
    graph, record, card, _ = await a_card(
        llm, saver, thread, tmp_path, context, text_reply("done"), text_reply("as you wish")
    )
    await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), thread, context=context)
    original_head = (await graph.aget_state(thread)).config["configurable"]["checkpoint_id"]
    assert len(recorded(record)) == 1

    out = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "reject", "message": "no"}]}),
        at(thread, card),
        context=context,
    )
    assert len(recorded(record)) == 1, "the fork obeyed the reject: the tool did not run again"
    [fork_decision] = d3(out)
    assert (
        list(fork_decision["outcome"].values()) == ["reject"]
        and f"on a fork of checkpoint {card}" in fork_decision["why"]
    )
    original = await graph.aget_state(at(thread, original_head))
    assert [list(d["outcome"].values()) for d in d3(original.values)] == [["approve"]]
    assert "fork" not in d3(original.values)[0]["why"], "the original branch keeps its own record"


async def test_an_approval_abandoned_on_the_original_branch_stays_never_run_there(
    llm, saver, workspace, thread, tmp_path
):
    context = Context(workspace=workspace, auto_approved=[])
    graph, record, card, call_id = await a_card(
        llm, saver, thread, tmp_path, context, text_reply("fine"), text_reply("ran it")
    )
    await graph.ainvoke(user_message("never mind"), thread, context=context)
    original_head = (await graph.aget_state(thread)).config["configurable"]["checkpoint_id"]

    out = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), at(thread, card), context=context
    )
    assert len(recorded(record)) == 1 and out["messages"][-1].content == "ran it"
    assert f"on a fork of checkpoint {card}" in d3(out)[0]["why"]
    original = await graph.aget_state(at(thread, original_head))
    assert [d["outcome"] for d in d3(original.values)] == [{"abandoned": [call_id]}]
    assert not any(getattr(m, "type", "") == "tool" for m in original.values["messages"]), "never run there"


async def test_a_fork_through_the_sdk_and_only_by_the_owner(secured_server, llm, workspace):
    alice = get_client(url=secured_server, api_key=KEYS["alice"])
    bob = get_client(url=secured_server, api_key=KEYS["bob"])
    thread_id = (await alice.threads.create())["thread_id"]
    context = {"workspace": workspace}
    llm.push(tool_reply(("save_note", {"text": "n"})), text_reply("saved"), text_reply("not saved"))
    await alice.runs.wait(thread_id, "agent", input=user_message("note it"), context=context)
    card = (await alice.threads.get_state(thread_id))["checkpoint"]["checkpoint_id"]
    await alice.runs.wait(
        thread_id, "agent", command={"resume": {"decisions": [{"type": "approve"}]}}, context=context
    )

    reject = {"resume": {"decisions": [{"type": "reject", "message": "changed my mind"}]}}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.runs.wait(thread_id, "agent", command=reject, checkpoint_id=card)
    assert refused.value.response.status_code == 404
    assert len(llm.requests) == 2, "bob's fork never ran"

    await alice.runs.wait(thread_id, "agent", command=reject, checkpoint_id=card, context=context)
    state = await alice.threads.get_state(thread_id)
    assert state["values"]["messages"][-1]["content"] == "not saved"
    [decision] = d3(state["values"])
    assert (
        list(decision["outcome"].values()) == ["reject"]
        and f"on a fork of checkpoint {card}" in decision["why"]
    )
    history = await alice.threads.get_history(thread_id, limit=50)
    assert any(d3(h["values"]) and "approve" in d3(h["values"])[0]["outcome"].values() for h in history)
