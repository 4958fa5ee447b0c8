"""The durable record of conversations, approvals remembered, and notes: plain tables in PostgreSQL.

The chat log is the record of finished turns that the memory job reads (unprocessed chats by user and
workspace: an ordered, filtered query a table answers with one index scan); the model's history is the
thread's checkpointed state, not this log. ``MemoryRecords`` is the same contract kept in
process memory, for unit tests and for benchmarks that must measure orchestration without I/O.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, LiteralString, NamedTuple, Protocol

from .db import DictConnection, connection, ensure_schema

SCHEMA: list[LiteralString] = [
    """CREATE TABLE IF NOT EXISTS chat_log (
        id BIGSERIAL PRIMARY KEY,
        workspace TEXT NOT NULL,
        user_id TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        prompt TEXT NOT NULL,
        response TEXT NOT NULL,
        sources JSONB NOT NULL DEFAULT '[]',
        route TEXT NOT NULL,
        stop_reason TEXT NOT NULL,
        include BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        memory_processed_at TIMESTAMPTZ
    )""",
    "CREATE INDEX IF NOT EXISTS chat_log_thread ON chat_log (workspace, user_id, thread_id, id DESC)",
    # A turn is its user message and its answer: finish run twice (a crash after the insert, before the
    # checkpoint) finds its row already there. Rows written before these columns existed keep NULLs.
    "ALTER TABLE chat_log ADD COLUMN IF NOT EXISTS message_id TEXT",
    "ALTER TABLE chat_log ADD COLUMN IF NOT EXISTS answer_id TEXT",
    "CREATE UNIQUE INDEX IF NOT EXISTS chat_log_turn ON chat_log (thread_id, message_id, answer_id)",
    """CREATE TABLE IF NOT EXISTS approval_grants (
        workspace TEXT NOT NULL, user_id TEXT NOT NULL, tool TEXT NOT NULL,
        granted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, user_id, tool)
    )""",
    """CREATE TABLE IF NOT EXISTS notes (
        id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, user_id TEXT NOT NULL, text TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    # The tool call that saved a note, in its thread: a call run again after a crash finds its note instead
    # of adding one. Call ids repeat across threads (endpoints number them per reply), so the key is both;
    # notes saved outside any thread have the thread ''. Databases keyed by the call alone lose that index.
    "ALTER TABLE notes ADD COLUMN IF NOT EXISTS call_id TEXT",
    "ALTER TABLE notes ADD COLUMN IF NOT EXISTS thread_id TEXT NOT NULL DEFAULT ''",
    "CREATE UNIQUE INDEX IF NOT EXISTS notes_thread_call ON notes (thread_id, call_id)",
    "DROP INDEX IF EXISTS notes_call",
]


class NoteKey(NamedTuple):
    """What makes a note's saving run once: the call, within its thread ('' outside any thread)."""

    thread_id: str
    call_id: str


class NoteConflict(Exception):
    """A call whose thread and id already saved a different note: this one was not saved."""


def _conflict(key: NoteKey) -> NoteConflict:
    return NoteConflict(
        f"not saved: call {key.call_id} of this thread already saved a different note;"
        " ask again with a new call"
    )


@dataclass
class Exchange:
    """One finished turn: a user prompt and the answer it got."""

    workspace: str
    user_id: str
    thread_id: str
    prompt: str
    response: str
    route: str
    stop_reason: str
    sources: list[dict[str, Any]] = field(default_factory=list)
    include: bool = True
    message_id: str | None = None
    answer_id: str | None = None
    id: int | None = None
    created_at: datetime | None = None
    memory_processed_at: datetime | None = None


class Records(Protocol):
    """What the agent graph reads and writes besides its checkpoints."""

    async def log_exchange(self, exchange: Exchange) -> int:
        """Store a finished turn once; returns its id (the first row's, when the turn was logged before)."""
        ...

    async def is_granted(self, workspace: str, user_id: str, tool: str) -> bool:
        """Whether the person said "always allow" for this tool."""
        ...

    async def grant(self, workspace: str, user_id: str, tool: str) -> None:
        """Remember "always allow"."""
        ...

    async def add_note(self, workspace: str, user_id: str, text: str, key: NoteKey | None = None) -> int:
        """Save a note (the side-effecting built-in tool), once per ``key`` when given; returns its id.

        The same ``key`` again (a crash replay) returns the note it saved.

        Raises:
            NoteConflict: That key saved a different note (other text, workspace or user):
                nothing is saved, and no one else's note id is handed out.
        """
        ...

    async def notes(self, workspace: str, user_id: str) -> list[str]:
        """The notes saved in a workspace."""
        ...


class PostgresRecords:
    """``Records`` in the project's PostgreSQL."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[DictConnection]:
        await ensure_schema("chat_log", SCHEMA, self.url)
        async with connection(self.url) as conn:
            yield conn

    async def log_exchange(self, exchange: Exchange) -> int:
        """Store a finished turn once; the commit does not wait for its own disk flush.

        finish writes this row, then the turn's last checkpoint writes commit with a flush, and PostgreSQL
        flushes its log in order: with the checkpoints in the same database (the default) the row is on disk
        no later than the checkpoint that ends the turn (else the server's WAL writer flushes it within a
        fraction of a second), and it is visible to every reader at once. Waiting for a flush of its own
        cost one more disk sync per turn. A crash of the process loses nothing committed; a crash of the
        machine before that checkpoint loses both, and finish then runs again on resume, which finds or
        writes the row once.
        """
        async with self._conn() as conn:
            async with conn.pipeline():  # the four statements in one round trip (the pipeline's sync)
                await conn.execute("BEGIN")
                await conn.execute("SET LOCAL synchronous_commit = off")
                cur = await conn.execute(
                    "INSERT INTO chat_log (workspace, user_id, thread_id, prompt, response, sources, route,"
                    " stop_reason, include, message_id, answer_id)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (thread_id, message_id, answer_id) DO NOTHING RETURNING id",
                    (
                        exchange.workspace,
                        exchange.user_id,
                        exchange.thread_id,
                        exchange.prompt,
                        exchange.response,
                        json.dumps(exchange.sources, default=str),
                        exchange.route,
                        exchange.stop_reason,
                        exchange.include,
                        exchange.message_id,
                        exchange.answer_id,
                    ),
                )
                await conn.execute("COMMIT")
            row = await cur.fetchone()
            if row is None:  # logged before: this is finish run again after a crash
                cur = await conn.execute(
                    "SELECT id FROM chat_log WHERE thread_id = %s AND message_id = %s AND answer_id = %s",
                    (exchange.thread_id, exchange.message_id, exchange.answer_id),
                )
                row = await cur.fetchone()
                assert row is not None, "the conflicting row the insert skipped is there"
            return int(row["id"])

    async def is_granted(self, workspace: str, user_id: str, tool: str) -> bool:  # noqa: D102
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT 1 FROM approval_grants WHERE workspace = %s AND user_id = %s AND tool = %s",
                (workspace, user_id, tool),
            )
            return await cur.fetchone() is not None

    async def grant(self, workspace: str, user_id: str, tool: str) -> None:  # noqa: D102
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO approval_grants (workspace, user_id, tool) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (workspace, user_id, tool),
            )

    async def add_note(self, workspace: str, user_id: str, text: str, key: NoteKey | None = None) -> int:  # noqa: D102
        note = (workspace, user_id, text)
        async with self._conn() as conn:
            cur = await conn.execute(
                "INSERT INTO notes (workspace, user_id, text, thread_id, call_id) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (thread_id, call_id) DO NOTHING RETURNING id",
                (*note, *(key or ("", None))),
            )
            if row := await cur.fetchone():
                return int(row["id"])
            assert key is not None, "a note without a key (its call_id NULL) is always inserted"
            # Its key saved a note before (committed, or the insert would have waited): is it this one?
            cur = await conn.execute(
                "SELECT id, workspace, user_id, text FROM notes WHERE thread_id = %s AND call_id = %s", key
            )
            row = await cur.fetchone()
        if row is None or (row["workspace"], row["user_id"], row["text"]) != note:
            raise _conflict(key)
        return int(row["id"])

    async def notes(self, workspace: str, user_id: str) -> list[str]:  # noqa: D102
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT text FROM notes WHERE workspace = %s AND user_id = %s ORDER BY id",
                (workspace, user_id),
            )
            return [row["text"] for row in await cur.fetchall()]


@dataclass
class MemoryRecords:
    """``Records`` in process memory: unit tests and no-I/O benchmarks only (nothing survives the process)."""

    exchanges: list[Exchange] = field(default_factory=list)
    grants: set[tuple[str, str, str]] = field(default_factory=set)
    saved_notes: list[tuple[str, str, str]] = field(default_factory=list)
    note_calls: dict[NoteKey, int] = field(default_factory=dict)

    async def log_exchange(self, exchange: Exchange) -> int:  # noqa: D102
        key = (exchange.thread_id, exchange.message_id, exchange.answer_id)
        known = [e for e in self.exchanges if (e.thread_id, e.message_id, e.answer_id) == key]
        if exchange.message_id is not None and known:
            return known[0].id or 0
        exchange.id = len(self.exchanges) + 1
        exchange.created_at = datetime.now(UTC)
        self.exchanges.append(exchange)
        return exchange.id

    async def is_granted(self, workspace: str, user_id: str, tool: str) -> bool:  # noqa: D102
        return (workspace, user_id, tool) in self.grants

    async def grant(self, workspace: str, user_id: str, tool: str) -> None:  # noqa: D102
        self.grants.add((workspace, user_id, tool))

    async def add_note(self, workspace: str, user_id: str, text: str, key: NoteKey | None = None) -> int:  # noqa: D102
        note = (workspace, user_id, text)
        if key is not None and (known := self.note_calls.get(key)) is not None:
            if self.saved_notes[known - 1] != note:
                raise _conflict(key)
            return known
        self.saved_notes.append(note)
        if key is not None:
            self.note_calls[key] = len(self.saved_notes)
        return len(self.saved_notes)

    async def notes(self, workspace: str, user_id: str) -> list[str]:  # noqa: D102
        return [t for w, u, t in self.saved_notes if (w, u) == (workspace, user_id)]
