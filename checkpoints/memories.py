"""Long-term memories of a user: what recall and people (the CLI) do with them, plus the job's queries.

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

from collections.abc import Sequence
from typing import LiteralString

from .memory_job import (
    AlreadyProcessed,
    Applied,
    Change,
    Chat,
    ChatGroup,
    MemoryJob,
)
from .memory_tables import (
    COLUMNS,
    GLOBAL_LIMIT,
    INJECTED_WORKSPACE_LIMIT,
    WORKSPACE_LIMIT,
    Memory,
    Scope,
    memory_from_row,
    normalise,
    vector_literal,
)

__all__ = [
    "GLOBAL_LIMIT",
    "INJECTED_WORKSPACE_LIMIT",
    "WORKSPACE_LIMIT",
    "AlreadyProcessed",
    "Applied",
    "Change",
    "Chat",
    "ChatGroup",
    "Memory",
    "PostgresMemories",
    "Scope",
    "normalise",
    "vector_literal",
]


class PostgresMemories(MemoryJob):
    """Memories and the memory job's chat-log queries in the project's PostgreSQL."""

    # --- recall, at every turn -----------------------------------------------------------------------

    async def for_prompt(self, user_id: str, workspace: str) -> list[Memory]:
        """Every memory a turn may use, newest first, and a note that memories are enabled here.

        One round trip: the turn runs with memories enabled, so any opt-out recorded for this workspace
        and user is lifted in the same statement (a delete that matches nothing writes nothing).
        """
        async with self._conn() as conn:
            cur = await conn.execute(
                "WITH lifted AS (DELETE FROM memory_optouts WHERE user_id = %s AND workspace = %s)"
                f" SELECT {COLUMNS} FROM memories"
                " WHERE user_id = %s AND (workspace IS NULL OR workspace = %s)"
                " ORDER BY updated_at DESC, id DESC",
                (user_id, workspace, user_id, workspace),
            )
            return [memory_from_row(row) for row in await cur.fetchall()]

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
                f"SELECT {COLUMNS} FROM memories WHERE id = ANY(%s)"
                " AND (embedding IS NULL OR embedding_space IS DISTINCT FROM %s)",
                (list(ids), space),
            )
            return [memory_from_row(row) for row in await cur.fetchall()]

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
            return [row["id"] for row in await cur.fetchall()]

    # --- people managing their memories (CLI) --------------------------------------------------------

    async def list_memories(self, user_id: str | None = None, workspace: str | None = None) -> list[Memory]:
        """Memories, optionally of one user and of one workspace (its own and the user's global ones)."""
        # Constant conditions only, so the query stays a literal; the values go as parameters.
        where: list[LiteralString] = ["TRUE"]
        params: list[str] = []
        if user_id is not None:
            where.append("user_id = %s")
            params.append(user_id)
        if workspace is not None:
            where.append("(workspace IS NULL OR workspace = %s)")
            params.append(workspace)
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE {' AND '.join(where)}"
                " ORDER BY user_id, workspace NULLS FIRST, id",
                params,
            )
            return [memory_from_row(row) for row in await cur.fetchall()]

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
