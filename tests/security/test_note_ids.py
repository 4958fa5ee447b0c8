"""Issue 19 item 6: ``save_note`` never loses a note, and never reports another's note as saved.

Notes were unique by tool-call id across the whole database. Tool-call ids repeat (endpoints that number
them per reply, an edited call on a fork), so a second call with an id already used saved nothing and
replied "Saved note 158": another user's note. The run-once key is now the thread and the call.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from langgraph.types import Command
from psycopg.conninfo import make_conninfo

from tests.support.helpers import user_message
from workspace_agent.checkpoints.chatlog import MemoryRecords, NoteKey, PostgresRecords, Records
from workspace_agent.checkpoints.db import close_pools, connection
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply
from workspace_agent.skills.builtin import builtin_tools

#: The id an endpoint that numbers calls per reply gives every first call.
SAME_ID = "call_0"


def save_note_reply(text: str, call_id: str = SAME_ID) -> dict:
    """A model reply asking for one ``save_note`` call with a fixed id."""
    return {
        "content": "",
        "tool_calls": [{"id": call_id, "name": "save_note", "arguments": {"text": text}}],
        "finish_reason": "tool_calls",
    }


def saved_id(reply: str) -> int:
    """The note id a ``save_note`` reply reports."""
    found = re.fullmatch(r"Saved note (\d+)\.", reply)
    assert found, reply
    return int(found.group(1))


async def note_row(database_url: str, note_id: int) -> tuple[str, str, str]:
    """Workspace, user and text of a stored note."""
    async with connection(database_url) as conn:
        cur = await conn.execute("SELECT workspace, user_id, text FROM notes WHERE id = %s", (note_id,))
        row = await cur.fetchone()
    assert row is not None, f"note {note_id} does not exist"
    return row["workspace"], row["user_id"], row["text"]  # type: ignore[index]


async def test_two_users_whose_calls_share_an_id_each_get_their_own_note(llm, saver, database_url, workspace):
    graph = build_graph(checkpointer=saver)
    reported: dict[str, int] = {}
    for user in ("alice", "bob"):
        thread = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
        llm.reset()
        llm.push(save_note_reply(f"{user}'s note"), text_reply("noted"))
        context = Context(workspace=workspace, user_id=user, auto_approved=["save_note"])
        out = await graph.ainvoke(user_message("@agent note this"), thread, context=context)
        assert out["stop_reason"] == "answered"
        [answer] = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
        reported[user] = saved_id(answer["content"])
    assert reported["alice"] != reported["bob"]
    for user, note_id in reported.items():
        assert await note_row(database_url, note_id) == (workspace, user, f"{user}'s note")
    records = PostgresRecords(database_url)
    assert await records.notes(workspace, "alice") == ["alice's note"]
    assert await records.notes(workspace, "bob") == ["bob's note"]


async def test_an_approved_call_resumed_twice_in_its_thread_saves_once(llm, saver, database_url, workspace):
    """The same thread and call run again (a crash replay) finds its note instead of adding one."""
    graph = build_graph(checkpointer=saver)
    thread = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    context = Context(workspace=workspace, user_id="carol")
    llm.push(save_note_reply("carol's note"), text_reply("noted"))
    await graph.ainvoke(user_message("@agent note this"), thread, context=context)
    pending = await graph.aget_state(thread)
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    out = await graph.ainvoke(approve, thread, context=context)
    assert out["stop_reason"] == "answered"
    [first] = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    # Replay the same approval from the checkpoint before it: the call runs again in its thread.
    llm.push(text_reply("noted again"))
    replay = await graph.ainvoke(approve, pending.config, context=context)
    assert replay["stop_reason"] == "answered"
    [again] = [m for m in llm.requests[2]["messages"] if m["role"] == "tool"]
    assert saved_id(again["content"]) == saved_id(first["content"])
    assert await PostgresRecords(database_url).notes(workspace, "carol") == ["carol's note"]


@pytest.mark.parametrize("kind", ["postgres", "memory"])
async def test_the_key_is_the_thread_and_the_call_and_a_clash_is_never_reported_as_saved(
    database_url, workspace, kind
):
    records: Records = PostgresRecords(database_url) if kind == "postgres" else MemoryRecords()
    [alice_save] = [t for t in builtin_tools(workspace, "alice", records) if t.name == "save_note"]
    [bob_save] = [t for t in builtin_tools(workspace, "bob", records) if t.name == "save_note"]
    call = {"type": "tool_call", "name": "save_note", "id": f"call-{uuid.uuid4().hex[:6]}"}
    in_thread = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    first = await alice_save.ainvoke({**call, "args": {"text": "milk"}}, in_thread)
    again = await alice_save.ainvoke({**call, "args": {"text": "milk"}}, in_thread)
    assert again.content == first.content, "run again in its thread: the same note"
    elsewhere = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    other = await bob_save.ainvoke({**call, "args": {"text": "eggs"}}, elsewhere)
    assert saved_id(other.content) != saved_id(first.content), "another thread's call is another note"
    with pytest.raises(Exception, match="not saved"):
        # Bob's call in Alice's thread with the same id: it saved nothing, so it must not say it did.
        await bob_save.ainvoke({**call, "args": {"text": "eggs"}}, in_thread)
    assert await records.notes(workspace, "alice") == ["milk"]
    assert await records.notes(workspace, "bob") == ["eggs"]


#: The notes table as databases made before the change have it: one note per call id, whatever the thread.
OLD_NOTES = [
    """CREATE TABLE notes (
        id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, user_id TEXT NOT NULL, text TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(), call_id TEXT
    )""",
    "CREATE UNIQUE INDEX notes_call ON notes (call_id)",
    "INSERT INTO notes (workspace, user_id, text, call_id) VALUES ('ws', 'erin', 'old', 'call-x')",
]


@pytest.fixture
async def old_database(database_url: str) -> AsyncIterator[str]:
    """A database of its own on the same server, holding the old notes table."""
    name = f"old_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(database_url, dbname=name)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for statement in OLD_NOTES:
            await conn.execute(statement)
    yield url
    await close_pools()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def test_an_old_database_keyed_by_the_call_alone_gets_the_new_key(old_database):
    records = PostgresRecords(old_database)
    first = await records.add_note("ws", "dan", "one", NoteKey("t-1", "call-x"))
    second = await records.add_note("ws", "dan", "two", NoteKey("t-2", "call-x"))
    assert len({first, second}) == 2
    assert await records.notes("ws", "dan") == ["one", "two"]
    assert await records.notes("ws", "erin") == ["old"], "the old note is kept"
