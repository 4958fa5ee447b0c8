"""Reconnect: after the embedded PostgreSQL restarts, a long-lived graph's next turn succeeds.

Before the savers and the project's pools checked their connections, every turn after a restart failed with
"the connection is closed", even with the database back. Both the checkpointer (pool-backed
``AsyncPostgresSaver`` / ``PostgresSaver``) and the project's own pool (chat log, documents) are exercised:
a turn reads history and writes the chat log through the latter.
"""

from __future__ import annotations

import asyncio
import os
import time

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from tests.support.helpers import user_message
from tests.support.outage import Door
from workspace_agent.checkpoints import db
from workspace_agent.checkpoints.embedded import start_embedded, stop_embedded
from workspace_agent.checkpoints.liveness import RECONNECT_MAX_DELAY
from workspace_agent.checkpoints.savers import sync_postgres_saver
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply


@pytest.fixture
def embedded(database_url):
    """Only the embedded server can be restarted by the test."""
    if database_url != start_embedded():
        pytest.skip("DATABASE_URL names an external server")
    return database_url


async def restart(url: str) -> None:
    assert await asyncio.to_thread(stop_embedded)
    assert await asyncio.to_thread(start_embedded) == url


async def test_the_first_turn_after_a_restart_succeeds(llm, saver, embedded, workspace, thread):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace)
    llm.push(text_reply("one"))
    first = await graph.ainvoke(user_message("first"), thread, context=context)
    assert first["messages"][-1].content == "one"

    await restart(embedded)

    llm.push(text_reply("two"))
    second = await graph.ainvoke(user_message("second"), thread, context=context)
    assert second["messages"][-1].content == "two"
    state = await graph.aget_state(thread)
    assert state.values["messages"][-1].content == "two"
    # The history the model was given came through the project's pool, across the restart.
    assert "first" in str(llm.requests[-1]["messages"])


async def test_the_sync_saver_reconnects_too(llm, embedded, workspace):
    thread = {"configurable": {"thread_id": f"sync-reconnect-{os.getpid()}-{workspace}"}}
    context = Context(workspace=workspace)

    def turn(text: str) -> str:
        return graph.invoke(user_message(text), thread, context=context)["messages"][-1].content

    with sync_postgres_saver(embedded) as saver:
        graph = build_graph(checkpointer=saver)
        llm.push(text_reply("one"))
        assert await asyncio.to_thread(turn, "first") == "one"
        await restart(embedded)
        llm.push(text_reply("two"))
        assert await asyncio.to_thread(turn, "second") == "two"


async def test_a_pool_that_failed_during_an_outage_serves_within_seconds_of_the_database_returning(
    database_url,
):
    """psycopg_pool doubles its reconnect delay (1, 2, 4, 8 s…): without a cap, a pool that failed for 8 s
    makes its next attempt about 7 s after the database is back, and a turn waiting for it can time out."""
    door = Door(database_url)
    await door.open()
    pool = await db.pool(door.url)
    try:
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
        await door.shut()
        away = time.monotonic()
        while time.monotonic() - away < 8:  # clients keep asking while the database is away
            with pytest.raises((PoolTimeout, psycopg.OperationalError)):
                async with pool.connection(timeout=0.5) as conn:
                    await conn.execute("SELECT 1")
            await asyncio.sleep(0.5)
        await door.open()
        back = time.monotonic()
        async with pool.connection(timeout=30) as conn:
            await conn.execute("SELECT 1")
        waited = time.monotonic() - back
        assert waited < RECONNECT_MAX_DELAY + 1.5, f"served {waited:.1f} s after the database returned"
    finally:
        await door.shut()
