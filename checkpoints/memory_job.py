"""The memory job's side of the tables: which chats wait, reading them in batches, storing and marking.

A batch's memories are stored and its chats marked in one transaction (``apply``), so a crash leaves both or
neither. A group that passed the gates is recorded as admitted (``admit``), so chats a failed batch leaves
behind are finished by the next run even when fewer than ``min_chats`` of them remain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, LiteralString

from .memory_tables import (
    COLUMNS,
    GLOBAL_LIMIT,
    WORKSPACE_LIMIT,
    Memory,
    MemoryTables,
    Scope,
    memory_from_row,
    normalise,
)


@dataclass
class ChatGroup:
    """The unprocessed, included chats of one user in one workspace, summarised for the gates."""

    user_id: str
    workspace: str
    chats: int
    max_id: int
    idle_seconds: float
    enabled: bool
    admitted: int = 0
    """Of ``chats``, those of an earlier run that passed the gates and were left unmarked by a failure."""


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


class MemoryJob(MemoryTables):
    """The memory job's queries of the chat log and the memories."""

    async def pending_groups(
        self, workspace: str | None = None, user_id: str | None = None
    ) -> list[ChatGroup]:
        """Every (user, workspace) with unprocessed included chats, oldest group first.

        ``idle_seconds`` is measured by the database clock, the one that stamped ``created_at``.
        """
        # Constant conditions only, so the query stays a literal; the values go as parameters.
        where: list[LiteralString] = ["c.memory_processed_at IS NULL", "c.include"]
        params: list[str] = []
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
                " count(*) FILTER (WHERE c.memory_admitted_at IS NOT NULL) AS admitted,"
                " NOT EXISTS (SELECT 1 FROM memory_optouts o"
                "   WHERE o.user_id = c.user_id AND o.workspace = c.workspace) AS enabled"
                f" FROM chat_log c WHERE {' AND '.join(where)}"
                " GROUP BY c.user_id, c.workspace ORDER BY min(c.created_at)",
                params,
            )
            return [ChatGroup(**row) for row in await cur.fetchall()]

    async def admit(self, user_id: str, workspace: str, upto_id: int) -> int:
        """Record that a group's chats up to ``upto_id`` passed the gates; returns how many were recorded.

        Written before the group's first batch is read: if a batch then fails, its chats keep this mark,
        and the next run finishes them whatever their number (see ``ChatGroup.admitted``).
        """
        async with self._conn() as conn:
            cur = await conn.execute(
                "UPDATE chat_log SET memory_admitted_at = now() WHERE user_id = %s AND workspace = %s"
                " AND id <= %s AND memory_processed_at IS NULL AND include AND memory_admitted_at IS NULL",
                (user_id, workspace, upto_id),
            )
            return cur.rowcount

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
            return [Chat(**row) for row in await cur.fetchall()]

    async def known(self, user_id: str, workspace: str) -> list[Memory]:
        """The user's global memories and those of this workspace, oldest first."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE user_id = %s"
                " AND (workspace IS NULL OR workspace = %s) ORDER BY id",
                (user_id, workspace),
            )
            return [memory_from_row(row) for row in await cur.fetchall()]

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
                f"SELECT {COLUMNS} FROM memories"
                " WHERE user_id = %s AND (workspace IS NULL OR workspace = %s)",
                (user_id, workspace),
            )
            existing = {m.id: m for m in map(memory_from_row, await cur.fetchall())}
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
