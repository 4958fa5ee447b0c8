"""Issue 13 item 8: exactly one chat-log row per turn, even when the process dies right after writing it.

``finish`` writes the chat-log row and then its checkpoint. A crash between the two re-runs ``finish`` on
resume; the row is keyed by the turn's user message and answer, so the second write finds the first.
"""

from __future__ import annotations

from psycopg.rows import dict_row

from tests.support.helpers import user_message
from workspace_agent.checkpoints import chatlog
from workspace_agent.checkpoints.chatlog import Exchange, PostgresRecords
from workspace_agent.checkpoints.db import connection, ensure_schema
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply


class Crash(Exception):
    """The process dying after the chat-log insert committed, before finish's checkpoint."""


class CrashAfterInsert(PostgresRecords):
    """The real chat log, with a crash right after the first row is written."""

    async def log_exchange(self, exchange: Exchange) -> int:
        row = await super().log_exchange(exchange)
        raise Crash(f"crashed after writing chat-log row {row}")


async def rows(database_url: str, workspace: str) -> list[dict]:
    await ensure_schema("chat_log", chatlog.SCHEMA, database_url)
    async with connection(database_url) as conn:
        conn.row_factory = dict_row
        cur = await conn.execute("SELECT * FROM chat_log WHERE workspace = %s ORDER BY id", (workspace,))
        return await cur.fetchall()


async def test_finish_run_again_after_a_crash_leaves_one_row(llm, saver, database_url, workspace, thread):
    context = Context(workspace=workspace, chat_mode="chat")
    llm.push(text_reply("the answer"))
    crashing = build_graph(checkpointer=saver, records=CrashAfterInsert(database_url))
    try:
        await crashing.ainvoke(user_message("the question"), thread, context=context)
    except Crash:
        pass
    else:
        raise AssertionError("the crash did not happen")
    assert len(await rows(database_url, workspace)) == 1
    graph = build_graph(checkpointer=saver, records=PostgresRecords(database_url))
    assert (await graph.aget_state(thread)).next == ("finish",), "the turn resumes at finish"
    out = await graph.ainvoke(None, thread, context=context)
    assert out["stop_reason"] == "answered"
    logged = await rows(database_url, workspace)
    assert [(r["prompt"], r["response"]) for r in logged] == [("the question", "the answer")]
    assert len(llm.requests) == 1, "the model answered once"


async def test_two_turns_with_the_same_words_are_two_rows(llm, saver, database_url, workspace, thread):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, chat_mode="chat")
    for _ in range(2):
        llm.push(text_reply("same answer"))
        await graph.ainvoke(user_message("same question"), thread, context=context)
    logged = await rows(database_url, workspace)
    assert [(r["prompt"], r["response"]) for r in logged] == [("same question", "same answer")] * 2
    assert len({r["message_id"] for r in logged}) == 2
