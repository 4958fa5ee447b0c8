"""Workspace documents and their embedded chunks: plain tables in PostgreSQL with pgvector.

Three tables. ``document_spaces`` records, per workspace, which embedding model made its vectors and their
dimension: a query or an ingest with another model is refused with a clear error instead of comparing
vectors from two spaces (which returns confident garbage). ``documents`` holds each document's full text
(pinned documents go into prompts whole), its content hash (re-ingesting an unchanged file does nothing) and
its pinned flag. ``chunks`` holds the embedded pieces.

How the vectors are indexed and searched (one HNSW index per dimension) is in ``vectors``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, LiteralString

from psycopg.types.json import Jsonb

from .db import DictConnection, connection, ensure_schema, resolve_url
from .vectors import (
    EF_SEARCH,
    HYBRID_DEPTH,
    TEXT_SEARCH_CONFIG,
    EmbeddingMismatch,
    Space,
    as_vector_text,
    ensure_hnsw_index,
    hybrid_search_sql,
    require_space,
    search_sql,
)

__all__ = ["ChunkHit", "Document", "DocumentStore", "EmbeddingMismatch", "Space", "require_space"]

SCHEMA: list[LiteralString] = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    """CREATE TABLE IF NOT EXISTS document_spaces (
        workspace TEXT PRIMARY KEY,
        embedding_id TEXT NOT NULL,
        dimension INT NOT NULL CHECK (dimension > 0),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE IF NOT EXISTS documents (
        id BIGSERIAL PRIMARY KEY,
        workspace TEXT NOT NULL,
        source TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        tokens INT NOT NULL DEFAULT 0,
        chunk_size INT NOT NULL,
        chunk_overlap INT NOT NULL,
        pinned BOOLEAN NOT NULL DEFAULT FALSE,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        UNIQUE (workspace, source)
    )""",
    "CREATE INDEX IF NOT EXISTS documents_pinned ON documents (workspace) WHERE pinned",
    # What a client said of a document beside its text (AnythingLLM's docAuthor, description, ...); added
    # after the table, so existing databases gain it with an empty object and nothing is re-embedded.
    "ALTER TABLE documents ADD COLUMN IF NOT EXISTS metadata JSONB NOT NULL DEFAULT '{}'::jsonb",
    """CREATE TABLE IF NOT EXISTS chunks (
        id BIGSERIAL PRIMARY KEY,
        document_id BIGINT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        workspace TEXT NOT NULL,
        ordinal INT NOT NULL,
        text TEXT NOT NULL,
        embedding vector NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document_id)",
    # Lets the planner answer a small workspace exactly (its rows, sorted) instead of walking a shared graph.
    "CREATE INDEX IF NOT EXISTS chunks_workspace ON chunks (workspace)",
    # The words of each chunk for full-text search (search_mode "hybrid"): generated, so PostgreSQL keeps it
    # in step with the text, and existing chunks gain it when the column is added, with nothing re-embedded.
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS words tsvector"
    f" GENERATED ALWAYS AS (to_tsvector('{TEXT_SEARCH_CONFIG}', text)) STORED",
    "CREATE INDEX IF NOT EXISTS chunks_words ON chunks USING gin (words)",
]

_COLUMNS = (
    "d.id, d.workspace, d.source, d.title, d.content_hash, d.tokens, d.chunk_size, d.chunk_overlap, d.pinned,"
    " d.metadata, d.created_at, d.updated_at,"
    " (SELECT count(*) FROM chunks c WHERE c.document_id = d.id) AS chunks"
)


@dataclass
class Document:
    """One document of a workspace; ``content`` is loaded only where a caller needs the full text."""

    id: int
    workspace: str
    source: str
    title: str
    content_hash: str
    tokens: int
    chunk_size: int
    chunk_overlap: int
    pinned: bool
    chunks: int = 0
    content: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass
class ChunkHit:
    """A chunk found by a vector search, with its document's title and source."""

    id: int
    document_id: int
    source: str
    title: str
    ordinal: int
    text: str
    distance: float

    @property
    def similarity(self) -> float:
        """Cosine similarity, 1 − cosine distance, clamped to 0..1 as AnythingLLM does."""
        return min(1.0, max(0.0, 1.0 - self.distance))


class DocumentStore:
    """Documents and chunks of all workspaces in the project's PostgreSQL; every query names a workspace."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[DictConnection]:
        url = await resolve_url(self.url)
        await ensure_schema("documents", SCHEMA, url)
        async with connection(url) as conn:
            yield conn

    @staticmethod
    async def _lock(conn: DictConnection, workspace: str) -> None:
        """Serialise a workspace's writes, so removing its last document never races a new one's space."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('documents:' || %s))", (workspace,))

    async def space(self, workspace: str) -> Space | None:
        """The embedding space of a workspace; ``None`` while it has no documents."""
        async with self._conn() as conn:
            return await self._space(conn, workspace)

    @staticmethod
    async def _space(conn: DictConnection, workspace: str) -> Space | None:
        cur = await conn.execute(
            "SELECT embedding_id, dimension FROM document_spaces WHERE workspace = %s", (workspace,)
        )
        row = await cur.fetchone()
        return Space(row["embedding_id"], row["dimension"]) if row else None

    async def check_space(self, workspace: str, embedding_id: str) -> Space | None:
        """The workspace's space, after checking it was made by ``embedding_id``.

        Raises:
            EmbeddingMismatch: The workspace's vectors came from another model.
        """
        space = await self.space(workspace)
        if space is not None:
            require_space(workspace, space, embedding_id)
        return space

    async def _claim_space(
        self, conn: DictConnection, workspace: str, embedding_id: str, dimension: int
    ) -> Space:
        await conn.execute(
            "INSERT INTO document_spaces (workspace, embedding_id, dimension) VALUES (%s, %s, %s)"
            " ON CONFLICT (workspace) DO NOTHING",
            (workspace, embedding_id, dimension),
        )
        space = await self._space(conn, workspace)
        assert space is not None
        require_space(workspace, space, embedding_id, dimension)
        return space

    async def get_document(self, workspace: str, source: str) -> Document | None:
        """A document by its source (path or identifier) within a workspace, without its content."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM documents d WHERE workspace = %s AND source = %s",
                (workspace, source),
            )
            row = await cur.fetchone()
        return Document(**row) if row else None

    async def store_document(
        self,
        workspace: str,
        *,
        source: str,
        title: str,
        content: str,
        content_hash: str,
        chunks: Sequence[tuple[str, Sequence[float]]],
        embedding_id: str,
        chunk_size: int,
        chunk_overlap: int,
        tokens: int = 0,
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[Document, bool]:
        """Add a document with its embedded chunks, or replace an earlier version of the same source.

        All in one transaction, so a search never sees a document half replaced. A replaced document keeps
        its id and pinned flag. Returns the document and whether it replaced an earlier version.

        Raises:
            EmbeddingMismatch: The workspace's vectors came from another model or have another dimension.
        """
        if not chunks:
            raise ValueError("a document needs at least one chunk")
        dimension = len(chunks[0][1])
        if any(len(vector) != dimension for _, vector in chunks):
            raise ValueError("the chunks' vectors differ in dimension")
        async with self._conn() as conn:
            await ensure_hnsw_index(conn, await resolve_url(self.url), dimension)
            async with conn.transaction():
                await self._lock(conn, workspace)
                await self._claim_space(conn, workspace, embedding_id, dimension)
                cur = await conn.execute(
                    "SELECT id FROM documents WHERE workspace = %s AND source = %s FOR UPDATE",
                    (workspace, source),
                )
                row = await cur.fetchone()
                replaced = row is not None
                values = (
                    title,
                    content,
                    content_hash,
                    tokens,
                    chunk_size,
                    chunk_overlap,
                    Jsonb(dict(metadata or {})),
                )
                if row is not None:
                    document_id = row["id"]
                    await conn.execute("DELETE FROM chunks WHERE document_id = %s", (document_id,))
                    await conn.execute(
                        "UPDATE documents SET title = %s, content = %s, content_hash = %s, tokens = %s,"
                        " chunk_size = %s, chunk_overlap = %s, metadata = %s, updated_at = now()"
                        " WHERE id = %s",
                        (*values, document_id),
                    )
                else:
                    cur = await conn.execute(
                        "INSERT INTO documents (workspace, source, title, content, content_hash, tokens,"
                        " chunk_size, chunk_overlap, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        " RETURNING id",
                        (workspace, source, *values),
                    )
                    inserted = await cur.fetchone()
                    assert inserted is not None, "INSERT ... RETURNING returns its row"
                    document_id = inserted["id"]
                async with conn.cursor().copy(
                    "COPY chunks (document_id, workspace, ordinal, text, embedding) FROM STDIN"
                ) as copy:
                    for ordinal, (text, vector) in enumerate(chunks):
                        await copy.write_row((document_id, workspace, ordinal, text, as_vector_text(vector)))
                cur = await conn.execute(f"SELECT {_COLUMNS} FROM documents d WHERE id = %s", (document_id,))
                stored = await cur.fetchone()
                assert stored is not None, "the document was written in this transaction"
                document = Document(**stored)
        document.content = content
        return document, replaced

    async def copy_document(
        self, source_space: str, source: str, workspace: str
    ) -> tuple[Document, bool] | None:
        """Copy a document with its chunks and vectors from one workspace key to another; ``None`` if absent.

        Nothing is embedded again: the vectors are the same model's, which the target's space is checked
        against (a target with vectors of another model refuses them). A document the target already holds
        under that source is replaced in place and keeps its id and pinned flag, as ``store_document`` does.

        Raises:
            EmbeddingMismatch: The target's vectors came from another model or have another dimension.
        """
        async with self._conn() as conn, conn.transaction():
            await self._lock(conn, workspace)
            cur = await conn.execute(
                "SELECT id, title, content, content_hash, tokens, chunk_size, chunk_overlap, metadata"
                " FROM documents WHERE workspace = %s AND source = %s",
                (source_space, source),
            )
            original = await cur.fetchone()
            space = await self._space(conn, source_space)
            if original is None or space is None:
                return None
            await self._claim_space(conn, workspace, space.embedding_id, space.dimension)
            values = [original[k] for k in ("title", "content", "content_hash", "tokens", "chunk_size")]
            values += [original["chunk_overlap"], Jsonb(original["metadata"])]
            cur = await conn.execute(
                "INSERT INTO documents (workspace, source, title, content, content_hash, tokens, chunk_size,"
                " chunk_overlap, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (workspace, source) DO UPDATE SET title = EXCLUDED.title,"
                " content = EXCLUDED.content, content_hash = EXCLUDED.content_hash, tokens = EXCLUDED.tokens,"
                " chunk_size = EXCLUDED.chunk_size, chunk_overlap = EXCLUDED.chunk_overlap,"
                " metadata = EXCLUDED.metadata, updated_at = now()"
                " RETURNING id, (xmax <> 0) AS replaced",
                (workspace, source, *values),
            )
            row = await cur.fetchone()
            assert row is not None, "INSERT ... RETURNING returns its row"
            await conn.execute("DELETE FROM chunks WHERE document_id = %s", (row["id"],))
            await conn.execute(
                "INSERT INTO chunks (document_id, workspace, ordinal, text, embedding)"
                " SELECT %s, %s, ordinal, text, embedding FROM chunks WHERE document_id = %s"
                " ORDER BY ordinal",
                (row["id"], workspace, original["id"]),
            )
            cur = await conn.execute(f"SELECT {_COLUMNS} FROM documents d WHERE id = %s", (row["id"],))
            stored = await cur.fetchone()
            assert stored is not None, "the document was written in this transaction"
            return Document(**stored), bool(row["replaced"])

    async def holders(self, workspaces: Sequence[str], sources: Sequence[str]) -> list[Document]:
        """The documents of any of ``workspaces`` whose source is one of ``sources``, without contents."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM documents d WHERE workspace = ANY(%s) AND source = ANY(%s)"
                " ORDER BY d.id",
                (list(workspaces), list(sources)),
            )
            return [Document(**row) for row in await cur.fetchall()]

    async def list_documents(self, workspace: str) -> list[Document]:
        """Every document of a workspace with its chunk count, oldest first, without contents."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM documents d WHERE workspace = %s ORDER BY d.id", (workspace,)
            )
            return [Document(**row) for row in await cur.fetchall()]

    async def openings(self, workspace: str, chars: int) -> dict[int, str]:
        """The first ``chars`` characters of each document of a workspace, by id: enough to describe it."""
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT id, left(content, %s) AS opening FROM documents WHERE workspace = %s",
                (chars, workspace),
            )
            return {row["id"]: row["opening"] or "" for row in await cur.fetchall()}

    async def pinned_documents(self, workspace: str) -> list[Document]:
        """The pinned documents of a workspace with their full text, in the order they were added."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS}, d.content FROM documents d WHERE workspace = %s AND pinned"
                " ORDER BY d.id",
                (workspace,),
            )
            return [Document(**row) for row in await cur.fetchall()]

    async def documents_with_content(self, workspace: str, ids: Iterable[int]) -> list[Document]:
        """Documents of a workspace by id with their full text, in the order they were added."""
        async with self._conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS}, d.content FROM documents d WHERE workspace = %s AND d.id = ANY(%s)"
                " ORDER BY d.id",
                (workspace, list(ids)),
            )
            return [Document(**row) for row in await cur.fetchall()]

    async def remove_documents(self, workspace: str, ids: Iterable[int]) -> int:
        """Delete documents (and their chunks); the workspace forgets its embedding model when emptied."""
        async with self._conn() as conn, conn.transaction():
            await self._lock(conn, workspace)
            cur = await conn.execute(
                "DELETE FROM documents WHERE workspace = %s AND id = ANY(%s)", (workspace, list(ids))
            )
            removed = cur.rowcount
            await conn.execute(
                "DELETE FROM document_spaces s WHERE workspace = %s"
                " AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.workspace = s.workspace)",
                (workspace,),
            )
            return removed

    async def set_pinned(self, workspace: str, ids: Iterable[int], pinned: bool) -> int:
        """Pin or unpin documents; returns how many changed."""
        async with self._conn() as conn:
            cur = await conn.execute(
                "UPDATE documents SET pinned = %s WHERE workspace = %s AND id = ANY(%s) AND pinned <> %s",
                (pinned, workspace, list(ids), pinned),
            )
            return cur.rowcount

    async def search(
        self,
        workspace: str,
        vector: Sequence[float],
        top_n: int,
        *,
        embedding_id: str,
        space: Space | None = None,
        ef_search: int = EF_SEARCH,
        text: str | None = None,
    ) -> list[ChunkHit]:
        """The ``top_n`` chunks of a workspace nearest to ``vector`` by cosine distance, nearest first.

        Chunks of pinned documents (which go into the prompt whole) are filtered inside the scan, so they
        never take one of the ``top_n`` places. ``space``: the workspace's, when the caller has just read it.
        With ``text`` (search mode ``hybrid``) the nearest chunks and the chunks whose words best match the
        text are fused by reciprocal rank (``vectors.hybrid_search_sql``), best first, in one query.

        Raises:
            EmbeddingMismatch: The workspace's vectors came from another model or have another dimension.
        """
        async with self._conn() as conn:
            space = space or await self._space(conn, workspace)
            if space is None:
                return []
            require_space(workspace, space, embedding_id, len(vector))
            # Never a prepared statement: a generic plan would pick one index for every workspace, while a
            # small workspace is best answered exactly (its rows, sorted) and a large one by the HNSW index.
            async with conn.pipeline():
                await conn.execute(
                    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false),"
                    " set_config('hnsw.ef_search', %s, false)",
                    (str(max(ef_search, top_n)),),
                )
                params = {"query": as_vector_text(vector), "workspace": workspace, "limit": top_n}
                statement = search_sql(space.dimension)
                if text is not None:
                    statement = hybrid_search_sql(space.dimension)
                    params |= {"text": text, "depth": max(HYBRID_DEPTH, top_n)}
                cur = await conn.execute(statement, params, prepare=False)
                rows = await cur.fetchall()
        hits = [ChunkHit(**row) for row in rows]
        if text is not None:
            return hits  # the fused order
        return sorted(hits, key=lambda h: h.distance)  # relaxed order: the scan may return near-ties swapped
