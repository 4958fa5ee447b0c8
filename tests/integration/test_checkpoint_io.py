"""What a turn's checkpoint I/O costs on PostgreSQL, and that threads do not queue behind each other for it.

The figures are in bench/turn_cost.py; these tests pin the mechanisms: a checkpoint or a task's writes is one
statement, a pooled saver lets another thread's read through while one write waits in the database, a quiet
pooled connection is handed out without a query, and routing runs on the event loop under ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import uuid
from collections import Counter
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.support.helpers import user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs import agent as agent_module
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply

_caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


def _count_statements(monkeypatch: pytest.MonkeyPatch, saver: Any, counts: Counter[str]) -> None:
    """Count the statements each saver call sends, one per row for ``executemany``."""
    execute, executemany = psycopg.AsyncCursor.execute, psycopg.AsyncCursor.executemany

    async def counted_execute(cur: Any, *args: Any, **kwargs: Any) -> Any:
        counts[f"statements {_caller.get()}"] += 1
        return await execute(cur, *args, **kwargs)

    async def counted_executemany(cur: Any, query: Any, rows: Any, **kwargs: Any) -> Any:
        rows = list(rows)
        counts[f"statements {_caller.get()}"] += len(rows)
        return await executemany(cur, query, rows, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.AsyncCursor, "executemany", counted_executemany)
    for name in ("aput", "aput_writes"):
        method = getattr(saver, name)

        async def call(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            counts[f"calls {_name}"] += 1
            token = _caller.set(_name)
            try:
                return await _method(*args, **kwargs)
            finally:
                _caller.reset(token)

        monkeypatch.setattr(saver, name, call)


async def test_each_checkpoint_and_each_tasks_writes_is_one_statement(
    llm, saver, workspace, thread, monkeypatch
):
    counts: Counter[str] = Counter()
    _count_statements(monkeypatch, saver, counts)
    llm.push(tool_reply(("current_datetime", {})), text_reply("It is noon."))
    graph = build_graph(checkpointer=saver)
    await graph.ainvoke(user_message("@agent what time is it?"), thread, context=Context(workspace=workspace))

    assert counts["calls aput"] >= 10 and counts["calls aput_writes"] >= 10  # every superstep was written
    assert counts["statements aput"] == counts["calls aput"]
    assert counts["statements aput_writes"] == counts["calls aput_writes"]
    state = await graph.aget_state(thread)  # and what was written reads back whole
    assert [m.type for m in state.values["messages"]] == ["human", "ai", "tool", "ai"]
    assert state.values["stop_reason"] == "answered"


async def test_a_write_waiting_in_the_database_does_not_hold_up_another_threads_read(saver, database_url):
    busy = {"configurable": {"thread_id": f"busy-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}
    other = {"configurable": {"thread_id": f"other-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    await saver.aput(busy, checkpoint, {}, {})
    await saver.aput(other, empty_checkpoint(), {}, {})

    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute(  # another session holds the busy thread's checkpoint row
            "SELECT 1 FROM checkpoints WHERE thread_id = %s FOR UPDATE", (busy["configurable"]["thread_id"],)
        )
        waiting = asyncio.create_task(saver.aput(busy, checkpoint, {"step": 1}, {}))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # the upsert waits for the row
        read = await asyncio.wait_for(saver.aget_tuple(other), timeout=5)
        assert read is not None and read.checkpoint["id"] is not None
        await holder.rollback()
    await asyncio.wait_for(waiting, timeout=10)


async def test_a_quiet_pooled_connection_is_handed_out_without_a_query(saver, monkeypatch):
    config = {"configurable": {"thread_id": f"q-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}
    await saver.aput(config, empty_checkpoint(), {}, {})
    for _ in range(3):  # the pool's connections have prepared the read (preparing is a round trip of its own)
        await asyncio.gather(saver.aget_tuple(config), saver.aget_tuple(config))
    waits = 0
    wait = psycopg.AsyncConnection.wait

    def network(gen: Any) -> Any:  # counts an exchange that needed the socket (a no-op commit does not)
        nonlocal waits
        try:
            state = next(gen)
        except StopIteration as stop:  # finished without I/O: not counted
            return stop.value
        waits += 1
        while True:
            sent = yield state
            try:
                state = gen.send(sent)
            except StopIteration as stop:
                return stop.value

    async def counted(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
        return await wait(conn, network(gen), *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "wait", counted)
    assert await saver.aget_tuple(config) is not None
    assert waits == 1  # the read itself; psycopg's own check would send an empty query first


async def test_routing_runs_on_the_event_loop_under_ainvoke(llm, saver, workspace, thread, monkeypatch):
    seen: dict[str, set[str]] = {}
    for name in ("route_uploads", "route_after_trim", "route_after_model", "route_tool_calls"):
        original = getattr(agent_module, name)

        def recording(state: Any, _name: str = name, _original: Any = original) -> Any:
            seen.setdefault(_name, set()).add(threading.current_thread().name)
            return _original(state)

        recording.__name__ = name
        monkeypatch.setattr(agent_module, name, recording)
    llm.push(tool_reply(("current_datetime", {})), text_reply("It is noon."))
    graph = build_graph(checkpointer=saver)
    await graph.ainvoke(user_message("@agent what time is it?"), thread, context=Context(workspace=workspace))

    assert set(seen) == {"route_uploads", "route_after_trim", "route_after_model", "route_tool_calls"}
    assert all(threads == {threading.main_thread().name} for threads in seen.values()), seen


async def test_a_long_threads_history_is_read_from_its_last_full_copy_not_a_1024_row_page(
    llm, saver, workspace, thread, monkeypatch
):
    """Reading ``messages`` walks back to its last full copy; past 1024 checkpoints langgraph's default
    page fetched 1024 rows on every read, so a turn's cost grew with the thread (bench/long_thread.py)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from workspace_agent.checkpoints.savers import DELTA_PAGE_ROWS

    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace)
    turns = 40  # about 11 checkpoints a turn: well past one page of DELTA_PAGE_ROWS
    for n in range(turns):
        llm.push(tool_reply(("current_datetime", {})), text_reply(f"answer {n}"))
        await graph.ainvoke(user_message(f"@agent question {n}"), thread, context=context)

    rows: list[int] = []
    ingest = AsyncPostgresSaver._ingest_stage1_page

    def counted(page: Any, *args: Any, **kwargs: Any) -> Any:
        rows.append(len(page))
        return ingest(page, *args, **kwargs)

    monkeypatch.setattr(AsyncPostgresSaver, "_ingest_stage1_page", staticmethod(counted))
    llm.push(tool_reply(("current_datetime", {})), text_reply("last answer"))
    await graph.ainvoke(user_message("@agent last question"), thread, context=context)

    assert len([c async for c in saver.alist(thread)]) > DELTA_PAGE_ROWS + 100
    assert rows and sum(rows) <= DELTA_PAGE_ROWS, rows  # one page, not the whole thread
    request = llm.requests[-1]["messages"]
    assert "question 39" in str(request) and "answer 39" in str(request)  # history still read whole
    shown = (await graph.aget_state(thread)).values["messages"]
    prompts = [m.content for m in shown if m.type == "human"]
    assert prompts[-2:] == ["@agent question 39", "@agent last question"]
