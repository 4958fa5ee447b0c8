"""Synchronous use: ``invoke``, ``stream`` and ``get_state`` behave like their async forms.

Every node is a coroutine; the compiled graphs give each a sync form (graphs/runnables.py), so a program
written like the LangGraph tutorials — ``graph.invoke`` with ``PostgresSaver`` or ``SqliteSaver`` — runs
the same turns, interrupts and resumes. The sync calls run in a worker thread, as a sync program's would.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langgraph.types import Command

from tests.integration.test_memory import memory_rule, seed
from tests.support.helpers import approve_edit_reject, decisions_of, three_calls, user_message
from tests.support.tools import make_test_tools, recorded
from workspace_agent.checkpoints.memories import PostgresMemories
from workspace_agent.checkpoints.savers import sync_postgres_saver, sync_sqlite_saver
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.ingest import IngestContext
from workspace_agent.graphs.ingest import build_graph as build_ingest
from workspace_agent.graphs.memory import MemoryContext
from workspace_agent.graphs.memory import build_graph as build_memory
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def approval_scenario(saver, llm, workspace: str, record) -> tuple[dict, dict, list[str], object]:
    """The approve + edit + reject turn, entirely through the sync API."""
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    thread = {"configurable": {"thread_id": f"sync-{uuid.uuid4().hex[:8]}"}}
    ask = three_calls()
    ids = [c["id"] for c in ask["tool_calls"]]
    llm.push(ask, text_reply("finished"))
    context = Context(workspace=workspace, auto_approved=[])
    first = graph.invoke(user_message("three"), thread, context=context)
    pending = graph.get_state(thread)
    assert pending.next == ("approve",) and pending.interrupts
    resume = approve_edit_reject(ids)
    updates = list(graph.stream(Command(resume=resume), thread, context=context, stream_mode="updates"))
    final = graph.get_state(thread)
    return first, {"updates": updates, "values": final.values, "next": final.next}, ids, graph


async def test_sync_approval_approve_edit_reject_on_postgres(llm, database_url, workspace, tmp_path):
    record = tmp_path / "runs.jsonl"

    def scenario():
        with sync_postgres_saver(database_url) as saver:
            return approval_scenario(saver, llm, workspace, record)

    first, done, ids, _ = await asyncio.to_thread(scenario)
    request = first["__interrupt__"][0].value
    assert request["type"] == "tool_approval"
    assert [a["tool_call_id"] for a in request["action_requests"]] == ids
    assert [sorted(u) for u in done["updates"]][-1] == ["finish"]
    assert done["next"] == ()
    values = done["values"]
    assert values["stop_reason"] == "answered" and values["messages"][-1].content == "finished"
    runs = recorded(record)
    assert sorted((r["args"]["word"], r["args"]["times"]) for r in runs) == [("w", 3), ("x", 1)]
    answers = {m["tool_call_id"]: m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"}
    assert answers[ids[0]] == "x" and answers[ids[1]] == "w w w" and "not z" in answers[ids[2]]
    person = [d["outcome"] for d in decisions_of(values, "D3")]
    assert {ids[0]: "approve"} in person and {ids[1]: "edit"} in person and {ids[2]: "reject"} in person


async def test_sync_and_async_forms_take_the_same_decisions(llm, saver, database_url, workspace, tmp_path):
    """The same script through ``invoke`` and ``ainvoke``: the same decision trace, the same answer."""

    def sync_run():
        with sync_postgres_saver(database_url) as sync_saver:
            return approval_scenario(sync_saver, llm, workspace, tmp_path / "sync.jsonl")

    _, sync_done, _, _ = await asyncio.to_thread(sync_run)
    llm.reset()
    graph = build_graph(checkpointer=saver, tools=make_test_tools(tmp_path / "async.jsonl"))
    thread = {"configurable": {"thread_id": f"async-{uuid.uuid4().hex[:8]}"}}
    ask = three_calls()
    ids = [c["id"] for c in ask["tool_calls"]]
    llm.push(ask, text_reply("finished"))
    context = Context(workspace=workspace, auto_approved=[])
    await graph.ainvoke(user_message("three"), thread, context=context)
    resume = approve_edit_reject(ids)
    async_values = await graph.ainvoke(Command(resume=resume), thread, context=context)

    def trace(values: dict) -> list[tuple[str, str]]:
        return [(d["id"], d["decided_by"]) for d in values["decisions"]]

    assert trace(sync_done["values"]) == trace(async_values)
    assert sync_done["values"]["messages"][-1].content == async_values["messages"][-1].content
    assert json.loads(json.dumps(recorded(tmp_path / "sync.jsonl"), default=str))[0]["tool"] == "repeat"


async def test_sync_interrupt_and_resume_on_sqlite(llm, workspace, tmp_path):
    record = tmp_path / "runs.jsonl"
    path = str(tmp_path / "threads.sqlite")
    thread = {"configurable": {"thread_id": "sqlite-1"}}
    context = Context(workspace=workspace, auto_approved=[])
    llm.push(tool_reply(("repeat", {"word": "hi", "times": 2})), text_reply("said it"))

    def ask():
        with sync_sqlite_saver(path) as saver:
            graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
            return graph.invoke(user_message("say hi twice"), thread, context=context)

    def approve():  # a new saver and graph: a program started again
        with sync_sqlite_saver(path) as saver:
            graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
            out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), thread, context=context)
            return out, graph.get_state(thread)

    first = await asyncio.to_thread(ask)
    assert first["__interrupt__"] and recorded(record) == []
    out, state = await asyncio.to_thread(approve)
    assert out["messages"][-1].content == "said it" and state.next == ()
    assert [r["args"] for r in recorded(record)] == [{"word": "hi", "times": 2}]


@pytest.fixture
def embed(monkeypatch, llm):
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


async def test_ingest_graph_invoke_and_stream(embed, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCUMENT_ROOTS", str(tmp_path))  # as a deployment sets it for its server
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Apples\n\nApples grow on trees in the orchard.")
    graph = build_ingest()
    context = IngestContext(workspace=workspace)
    out = await asyncio.to_thread(graph.invoke, {"paths": [str(folder)]}, context=context)
    assert len(out["added"]) == 1 and not out["failed"], out
    steps = await asyncio.to_thread(
        lambda: list(graph.stream({"paths": [str(folder)]}, context=context, stream_mode="values"))
    )
    assert len(steps[-1]["unchanged"]) == 1 and not steps[-1]["added"], steps[-1]


async def test_memory_graph_invoke(llm, database_url, workspace, monkeypatch):
    await seed(database_url, workspace, 6)
    monkeypatch.setattr(llm, "rule", memory_rule())
    graph = build_memory(memories=PostgresMemories(database_url))
    out = await asyncio.to_thread(graph.invoke, {}, context=MemoryContext(workspace=workspace))
    batches = [r for r in out["report"] if r["batch"] is not None]
    assert batches and batches[0]["read"] == 6 and batches[0]["marked"] == 6, out["report"]


async def test_sync_stream_delivers_tokens_as_they_come(llm, workspace, tmp_path):
    llm.push(text_reply("one two three four"))
    thread = {"configurable": {"thread_id": "sqlite-stream"}}

    def tokens() -> list[str]:
        with sync_sqlite_saver(str(tmp_path / "threads.sqlite")) as saver:
            graph = build_graph(checkpointer=saver)
            parts = graph.stream(
                user_message("count"), thread, context=Context(workspace=workspace), stream_mode="messages"
            )
            return [chunk.content for chunk, meta in parts if meta.get("langgraph_node") == "call_model"]

    pieces = [p for p in await asyncio.to_thread(tokens) if p]
    assert pieces == ["one ", "two ", "three ", "four"]
