"""The memories table and its schema: what a remembered fact is, and how rows become ``Memory`` objects.

Shared by the memory job (``checkpoints.memory_job``) and by recall and the CLI (``checkpoints.memories``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, LiteralString

from psycopg import errors

from . import chatlog
from .db import DictConnection, connection, ensure_schema

GLOBAL_LIMIT = 5
"""Global memories a user may have: facts true in every workspace (AnythingLLM: 5)."""
WORKSPACE_LIMIT = 20
"""Memories a user may have per workspace (AnythingLLM: 20)."""
INJECTED_WORKSPACE_LIMIT = 5
"""Workspace memories put into one prompt, the most relevant first (AnythingLLM: 5)."""

Scope = Literal["global", "workspace"]

SCHEMA: list[LiteralString] = [
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
    # When a group passed the memory job's gates: its chats left unmarked by a failed batch are finished by
    # the next run even if fewer than min_chats remain (they were admitted once already).
    "ALTER TABLE chat_log ADD COLUMN IF NOT EXISTS memory_admitted_at TIMESTAMPTZ",
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


def normalise(text: str) -> str:
    """A memory's text for duplicate checks: lower case, words only."""
    return " ".join(re.findall(r"\w+", text.lower()))


def vector_literal(vector: Sequence[float]) -> str:
    """The text form of a pgvector value, so no type adapter has to be registered on pooled connections."""
    return "[" + ",".join(f"{v:.7g}" for v in vector) + "]"


def memory_from_row(row: dict) -> Memory:
    """A ``Memory`` from a row selected with ``COLUMNS``."""
    return Memory(
        id=row["id"],
        user_id=row["user_id"],
        workspace=row["workspace"],
        scope=row["scope"],
        content=row["content"],
        created_at=row.get("created_at"),
        updated_at=row.get("updated_at"),
    )


COLUMNS = "id, user_id, workspace, scope, content, created_at, updated_at"


class MemoryTables:
    """A connection to the project's PostgreSQL with the chat log's and the memories' schema in place."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[DictConnection]:
        await ensure_schema("chat_log", chatlog.SCHEMA, self.url)
        try:
            await ensure_schema("memories", SCHEMA, self.url)
        except (errors.UniqueViolation, errors.DuplicateObject):
            # Another part (document chunks) created the vector extension under its own lock at the same
            # moment, as recall and retrieve run side by side on a fresh database; it exists now.
            await ensure_schema("memories", SCHEMA, self.url)
        async with connection(self.url) as conn:
            yield conn
