"""Long-term memories of a user, and the chat-log queries of the memory job: plain tables in PostgreSQL.

Memories are a table of ours rather than LangGraph's store because the memory job must store a batch's
memories and mark the chats it read *in one transaction*: a crash then leaves either both or neither, never
chats marked whose memories were lost (AnythingLLM marks a group processed whatever happens). A user has at
most ``GLOBAL_LIMIT`` global memories and ``WORKSPACE_LIMIT`` per workspace, so recall reads them all with
one index scan; vectors sit in a pgvector column beside them, tagged with the vector space that made them,
and are computed lazily by recall when it first needs them.

A workspace whose turns run with ``memories_enabled = False`` is written to ``memory_optouts`` by recall,
and removed again by the next turn that runs with it enabled, so the memory job (which has no workspace
context of its own) leaves such groups alone.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from psycopg import AsyncConnection, errors

from workspace_agent.checkpoints import chatlog
from workspace_agent.checkpoints.db import connection, ensure_schema

GLOBAL_LIMIT = 5
"""Global memories a user may have: facts true in every workspace (AnythingLLM: 5)."""
WORKSPACE_LIMIT = 20
"""Memories a user may have per workspace (AnythingLLM: 20)."""
INJECTED_WORKSPACE_LIMIT = 5
"""Workspace memories put into one prompt, the most relevant first (AnythingLLM: 5)."""

Scope = Literal["global", "workspace"]

SCHEMA = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    """CREATE TABLE IF NOT EXISTS memories (
        id BIGSERIAL PRIMARY KEY,
        user_id TEXT NOT NULL,
        workspace TEXT,
        scope TEXT NOT NULL CHECK (scope IN ('global', 'workspace')),
        content TEXT NOT NULL,
        embedding vector,
        embedding_space TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CHECK ((scope = 'global') = (workspace IS NULL))
    )""",
    "CREATE INDEX IF NOT EXISTS memories_owner ON memories (user_id, workspace, updated_at DESC)",
    """CREATE TABLE IF NOT EXISTS memory_optouts (
        workspace TEXT NOT NULL, user_id TEXT NOT NULL, since TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (user_id, workspace)
    )""",
    # The job's scan: unprocessed, included chats of one user and workspace, oldest first.
    """CREATE INDEX IF NOT EXISTS chat_log_memory_pending ON chat_log (user_id, workspace, created_at, id)
        WHERE memory_processed_at IS NULL AND include""",
]


@dataclass
class Memory:
    """One remembered fact; ``workspace`` is ``None`` for a global memory."""

    id: int
    user_id: str
    workspace: str | None
    scope: Scope
    content: str
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass
class ChatGroup:
    """The unprocessed, included chats of one user in one workspace, summarised for the gates."""

    user_id: str
    workspace: str
    chats: int
    max_id: int
    idle_seconds: float
    enabled: bool


@dataclass
class Chat:
    """One chat-log exchange as the memory job reads it."""

    id: int
    prompt: str
    response: str
    created_at: datetime


@dataclass
class Change:
    """What the reflector wants done: a new memory, or new text for an existing one."""

    action: Literal["create", "update"]
    scope: Scope
    content: str
    update_id: int | None = None


@dataclass
class Applied:
    """What storing one batch did, in the same transaction as marking its chats."""

    created: int = 0
    updated: int = 0
    marked: int = 0
    dropped: list[str] = field(default_factory=list)


class AlreadyProcessed(RuntimeError):
    """Another run marked some of these chats first; this batch's transaction was rolled back."""


def normalise(text: str) -> str:
    """A memory's text for duplicate checks: lower case, words only."""
    return " ".join(re.findall(r"\w+", text.lower()))


def vector_literal(vector: Sequence[float]) -> str:
    """The text form of a pgvector value, so no type adapter has to be registered on pooled connections."""
    return "[" + ",".join(f"{v:.7g}" for v in vector) + "]"


def _memory(row: dict) -> Memory:
    return Memory(
        id=row["id"],
        user_id=row["user_id"],
        workspace=row["workspace"],
        scope=row["scope"],
        content=row["content"],
        created_at=row.get("created_at"),
        updated_at=row.get("updated_at"),
    )


_COLUMNS = "id, user_id, workspace, scope, content, created_at, updated_at"


class PostgresMemories:
    """Memories and the memory job's chat-log queries in the project's PostgreSQL."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[AsyncConnection]:
        await ensure_schema("chat_log", chatlog.SCHEMA, self.url)
        try:
            await ensure_schema("memories", SCHEMA, self.url)
        except (errors.UniqueViolation, errors.DuplicateObject):
            # Another part (document chunks) created the vector extension under its own lock at the same
            # moment, as recall and retrieve run side by side on a fresh database; it exists now.
            await ensure_schema("memories", SCHEMA, self.url)
        async with connection(self.url) as conn:
            yield conn

    # --- the memory job ------------------------------------------------------------------------------

    async def pending_groups(
        self, workspace: str | None = None, user_id: str | None = None
    ) -> list[ChatGroup]:
        """Every (user, workspace) with unprocessed included chats, oldest group first.

        ``idle_seconds`` is measured by the database clock, the one that stamped ``created_at``.
        """
        where, params = ["c.memory_processed_at IS NULL", "c.include"], []
        if workspace is not None:
            where.append("c.workspace = %s")
            params.append(workspace)
        if user_id is not None:
            where.append("c.user_id = %s")
            params.append(user_id)
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT c.user_id, c.workspace, count(*) AS chats, max(c.id) AS max_id,"
                " extract(epoch FROM now() - max(c.created_at))::float8 AS idle_seconds,"
                " NOT EXISTS (SELECT 1 FROM memory_optouts o"
                "   WHERE o.user_id = c.user_id AND o.workspace = c.workspace) AS enabled"
                f" FROM chat_log c WHERE {' AND '.join(where)}"
                " GROUP BY c.user_id, c.workspace ORDER BY min(c.created_at)",
                params,
            )
            return [ChatGroup(**row) for row in await cur.fetchall()]  # type: ignore[arg-type]

    async def read_batch(
        self, user_id: str, workspace: str, upto_id: int, after: tuple[str, int] | None, limit: int
    ) -> list[Chat]:
        """The next ``limit`` unprocessed included chats of a group, oldest first.

        Args:
            user_id: The group's user.
            workspace: The group's workspace.
            upto_id: The highest id the run saw when it selected the group: chats logged later wait for the
                next run (their user is active again, the idle gate would not have let them through).
            after: ``(created_at ISO, id)`` of the last chat this run read, so a batch left unmarked by a
                failure is not read twice in one run.
            limit: Batch size.
        """
        sql = (
            "SELECT id, prompt, response, created_at FROM chat_log WHERE user_id = %s AND workspace = %s"
            " AND memory_processed_at IS NULL AND include AND id <= %s"
        )
        params: list = [user_id, workspace, upto_id]
        if after is not None:
            sql += " AND (created_at, id) > (%s::timestamptz, %s)"
            params += [after[0], after[1]]
        sql += " ORDER BY created_at, id LIMIT %s"
        async with self._conn() as conn:
            cur = await conn.execute(sql, [*params, limit])
            return [Chat(**row) for row in await cur.fetchall()]  # type: ignore[arg-type]

    async def known(self, user_id: str, workspace: str) -> list[Memory]:
        """The user's global memories and those of this workspace, oldest first."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s"
                " AND (workspace IS NULL OR workspace = %s) ORDER BY id",
                (user_id, workspace),
            )
            return [_memory(row) for row in await cur.fetchall()]  # type: ignore[arg-type]

    async def apply(
        self, user_id: str, workspace: str, changes: Sequence[Change], chat_ids: Sequence[int]
    ) -> Applied:
        """Store a batch's memories and mark exactly its chats processed, in one transaction.

        Limits and duplicates are enforced here, under a per-user lock, whatever the model proposed: the
        reflector saw the memories as they were before its call, and another group of the same user (global
        memories are shared) may have stored some since.

        Raises:
            AlreadyProcessed: Some chat was marked by another run meanwhile; nothing was stored or marked.
        """
        out = Applied()
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('memories:' || %s))", (user_id,))
            cur = await conn.execute(
                "UPDATE chat_log SET memory_processed_at = now()"
                " WHERE id = ANY(%s) AND memory_processed_at IS NULL RETURNING id",
                (list(chat_ids),),
            )
            out.marked = len(await cur.fetchall())
            if out.marked != len(set(chat_ids)):
                raise AlreadyProcessed(
                    f"{len(set(chat_ids)) - out.marked} of {len(chat_ids)} chats were already processed "
                    "by another run; this batch was not stored"
                )
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM memories"
                " WHERE user_id = %s AND (workspace IS NULL OR workspace = %s)",
                (user_id, workspace),
            )
            existing = {m.id: m for m in map(_memory, await cur.fetchall())}  # type: ignore[arg-type]
            seen = {normalise(m.content) for m in existing.values()}
            count = {
                "global": sum(m.scope == "global" for m in existing.values()),
                "workspace": sum(m.scope == "workspace" for m in existing.values()),
            }
            limit = {"global": GLOBAL_LIMIT, "workspace": WORKSPACE_LIMIT}
            for change in changes:
                key = normalise(change.content)
                if not key or key in seen:
                    out.dropped.append(f"duplicate: {change.content[:60]}")
                    continue
                if change.action == "update":
                    target = existing.get(change.update_id or -1)
                    if target is None:
                        out.dropped.append(f"update of unknown memory {change.update_id}")
                        continue
                    await conn.execute(
                        "UPDATE memories SET content = %s, updated_at = now(), embedding = NULL,"
                        " embedding_space = NULL WHERE id = %s",
                        (change.content, target.id),
                    )
                    seen.discard(normalise(target.content))
                    out.updated += 1
                elif count[change.scope] >= limit[change.scope]:
                    out.dropped.append(f"{change.scope} memories full ({limit[change.scope]})")
                    continue
                else:
                    await conn.execute(
                        "INSERT INTO memories (user_id, workspace, scope, content) VALUES (%s, %s, %s, %s)",
                        (
                            user_id,
                            workspace if change.scope == "workspace" else None,
                            change.scope,
                            change.content,
                        ),
                    )
                    count[change.scope] += 1
                    out.created += 1
                seen.add(key)
        return out

    # --- recall, at every turn -----------------------------------------------------------------------

    async def for_prompt(self, user_id: str, workspace: str) -> list[Memory]:
        """Every memory a turn may use, newest first, and a note that memories are enabled here.

        One round trip: the turn runs with memories enabled, so any opt-out recorded for this workspace
        and user is lifted in the same statement (a delete that matches nothing writes nothing).
        """
        async with self._conn() as conn:
            cur = await conn.execute(
                "WITH lifted AS (DELETE FROM memory_optouts WHERE user_id = %s AND workspace = %s)"
                f" SELECT {_COLUMNS} FROM memories"
                " WHERE user_id = %s AND (workspace IS NULL OR workspace = %s)"
                " ORDER BY updated_at DESC, id DESC",
                (user_id, workspace, user_id, workspace),
            )
            return [_memory(row) for row in await cur.fetchall()]  # type: ignore[arg-type]

    async def opt_out(self, user_id: str, workspace: str) -> None:
        """Record that this workspace runs with memories disabled: the job will skip it."""
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO memory_optouts (user_id, workspace) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (user_id, workspace),
            )

    async def missing_embeddings(self, ids: Sequence[int], space: str) -> list[Memory]:
        """Those of ``ids`` without a vector in ``space``."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ANY(%s)"
                " AND (embedding IS NULL OR embedding_space IS DISTINCT FROM %s)",
                (list(ids), space),
            )
            return [_memory(row) for row in await cur.fetchall()]  # type: ignore[arg-type]

    async def set_embeddings(self, vectors: dict[int, Sequence[float]], space: str) -> None:
        """Keep the vectors recall computed, so each memory is embedded once per vector space."""
        async with self._conn() as conn, conn.transaction():
            for memory_id, vector in vectors.items():
                await conn.execute(
                    "UPDATE memories SET embedding = %s::vector, embedding_space = %s WHERE id = %s",
                    (vector_literal(vector), space, memory_id),
                )

    async def nearest(self, ids: Sequence[int], query: Sequence[float], space: str, k: int) -> list[int]:
        """The ``k`` of ``ids`` closest to ``query`` by cosine distance, in ``space``."""
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT id FROM memories WHERE id = ANY(%s) AND embedding_space = %s"
                " ORDER BY embedding <=> %s::vector, id DESC LIMIT %s",
                (list(ids), space, vector_literal(query), k),
            )
            return [row["id"] for row in await cur.fetchall()]  # type: ignore[index]

    # --- people managing their memories (CLI) --------------------------------------------------------

    async def list_memories(self, user_id: str | None = None, workspace: str | None = None) -> list[Memory]:
        """Memories, optionally of one user and of one workspace (its own and the user's global ones)."""
        where, params = ["TRUE"], []
        if user_id is not None:
            where.append("user_id = %s")
            params.append(user_id)
        if workspace is not None:
            where.append("(workspace IS NULL OR workspace = %s)")
            params.append(workspace)
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(where)}"
                " ORDER BY user_id, workspace NULLS FIRST, id",
                params,
            )
            return [_memory(row) for row in await cur.fetchall()]  # type: ignore[arg-type]

    async def edit(self, memory_id: int, content: str) -> bool:
        """Replace a memory's text; False when there is no such memory."""
        if not content.strip():
            raise ValueError("a memory cannot be empty")
        async with self._conn() as conn:
            cur = await conn.execute(
                "UPDATE memories SET content = %s, updated_at = now(), embedding = NULL,"
                " embedding_space = NULL WHERE id = %s RETURNING id",
                (content.strip(), memory_id),
            )
            return await cur.fetchone() is not None

    async def delete(self, memory_id: int) -> bool:
        """Forget a memory; False when there is no such memory."""
        async with self._conn() as conn:
            cur = await conn.execute("DELETE FROM memories WHERE id = %s RETURNING id", (memory_id,))
            return await cur.fetchone() is not None
