"""Issue 36, item 1, in the graph: what makes a run a scheduled job's run (``Context.job``).

- no one is there, so ``ask_person`` is never offered, even where the workspace turns questions on;
- a call that needs approval leaves the run waiting on its card: nothing approves for the person;
- the job's tools (``only_tools``) narrow the workspace's and never widen them;
- past ``time_limit`` the run ends as ``timed_out``, keeps what it had done and says so in words;
- the run records itself under its job in the store, where ``jobs runs`` finds it.

The scripted model speaks through the real ``ChatOpenAI`` path; the checkpointer is the real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time

from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from tests.support.helpers import decisions_of, user_message
from workspace_agent.core.context import Context
from workspace_agent.core.jobs import run_key
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


@tool
async def slow_lookup(topic: str) -> str:
    """Look a topic up in the archive (slow)."""
    await asyncio.sleep(30)
    return f"found {topic}"


async def test_a_job_run_is_never_offered_a_question_and_waits_on_its_approval_card(
    llm, saver, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("save_note", {"text": "weekly report"})), text_reply("Saved."))
    context = Context(workspace=workspace, job="weekly", clarifying_questions=True)
    out = await graph.ainvoke(
        user_message("@agent save the weekly report as a note"), thread, context=context
    )
    assert "ask_person" not in offered(llm.requests[0]) and "save_note" in offered(llm.requests[0])
    card = out["__interrupt__"][0].value
    assert card["type"] == "tool_approval" and [a["name"] for a in card["action_requests"]] == ["save_note"]
    assert not [m for m in out["messages"] if isinstance(m, ToolMessage)], "nothing ran unasked"

    with_person = Context(workspace=workspace, clarifying_questions=True)
    llm.push(text_reply("Sure."))
    await build_graph(checkpointer=saver).ainvoke(
        user_message("@agent hello"),
        {"configurable": {"thread_id": f"{thread['configurable']['thread_id']}-b"}},
        context=with_person,
    )
    assert "ask_person" in offered(llm.requests[-1]), "the same workspace asks when a person is there"


async def test_a_jobs_tools_narrow_the_workspaces_and_never_widen_them(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    context = Context(
        workspace=workspace, tools=["calculate", "current_datetime"], only_tools=["calculate", "save_note"]
    )
    llm.push(tool_reply(("save_note", {"text": "x"})), text_reply("I cannot save notes here."))
    out = await graph.ainvoke(
        user_message("@agent what is 2+2, and save it as a note"), thread, context=context
    )
    assert offered(llm.requests[0]) == ["calculate"], "save_note is the job's but not the workspace's"
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert refused and "does not offer the tool 'save_note'" in refused[0].content
    assert "__interrupt__" not in out


async def test_past_its_time_limit_a_run_ends_timed_out_keeping_what_it_did(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver, tools=[slow_lookup])
    llm.push(
        tool_reply(("calculate", {"expression": "6 * 7"})),
        tool_reply(("slow_lookup", {"topic": "invoices"})),
        text_reply("never reached"),
    )
    context = Context(
        workspace=workspace, time_limit=2.0, auto_approved=["calculate", "slow_lookup"], tool_timeout=60
    )
    began = time.monotonic()
    out = await graph.ainvoke(user_message("@agent compute, then look up invoices"), thread, context=context)
    assert time.monotonic() - began < 20, "the hanging tool was given up at the run's limit, not its own"
    assert out["stop_reason"] == "timed_out"
    results = {m.name: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert results["calculate"].content == "42", "what the run had done is kept"
    assert results["slow_lookup"].status == "error" and "time limit (2 s)" in results["slow_lookup"].content
    last = out["messages"][-1]
    assert last.type == "ai" and "time limit of 2 s" in last.content and "calculate" in last.content
    assert decisions_of(out, "J1")[0]["outcome"] == "timed_out"
    assert len(llm.requests) == 2, "no model call after the limit"
    state = await graph.aget_state(thread)
    assert state.values["stop_reason"] == "timed_out" and not state.next, "the run ended; the thread is kept"


async def test_a_model_call_past_the_time_limit_is_cut_off(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push({**text_reply("too late"), "delay": 10})
    began = time.monotonic()
    out = await graph.ainvoke(
        user_message("@agent summarize the week"),
        thread,
        context=Context(workspace=workspace, time_limit=1.0),
    )
    assert time.monotonic() - began < 8
    assert out["stop_reason"] == "timed_out" and "too late" not in out["messages"][-1].content
    assert "time limit of 1 s" in out["messages"][-1].content and "no tool" in out["messages"][-1].content


async def test_a_job_run_records_itself_under_its_job(llm, saver, workspace, thread):
    store = InMemoryStore()
    graph = build_graph(checkpointer=saver, store=store)
    llm.push(text_reply("Done."))
    context = Context(workspace=workspace, job="daily-digest", user_id="alice")
    await graph.ainvoke(user_message("@agent digest"), thread, context=context)
    thread_id = thread["configurable"]["thread_id"]
    item = await store.aget(run_key("alice", "daily-digest"), thread_id)
    assert item is not None and item.value["thread_id"] == thread_id and item.value["job"] == "daily-digest"
    llm.push(text_reply("Hi."))
    other = {"configurable": {"thread_id": f"{thread_id}-plain"}}
    await graph.ainvoke(user_message("hello"), other, context=Context(workspace=workspace, user_id="alice"))
    assert len(await store.asearch(("users", "alice"))) == 1, "a run that is no job's records nothing"
