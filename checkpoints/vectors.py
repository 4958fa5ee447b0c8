"""How chunks' vectors are kept apart, indexed and searched in pgvector.

Each workspace's vectors belong to one embedding space (model and dimension), recorded in
``document_spaces``: comparing vectors of two spaces returns confident garbage, so mixing is refused.

Workspaces may use models of different dimensions, so ``chunks.embedding`` is an untyped ``vector`` and each
dimension gets its own partial HNSW index over the expression ``embedding::vector(d)`` with cosine ops;
queries repeat that expression and the partial predicate so the planner can use the index. An HNSW scan
applies the workspace filter after the index, so pgvector's iterative scan is switched on (a workspace
sharing an index with larger ones still gets its ``top_n`` hits), and a btree on the workspace lets the
planner answer a small workspace exactly instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgvector import Vector
from psycopg import sql

from .db import DictConnection

#: HNSW graph: pgvector's default ``m``, twice its default ``ef_construction`` (64); candidates kept per scan
#: (``hnsw.ef_search``, default 40). Measured by ``bench/retrieval.py`` (100k chunks, 384-d): recall@4
#: 0.97-0.99 for 3-5 ms a query; pgvector's defaults give 0.91-0.94, below the 0.95 goal.
HNSW_M, HNSW_EF_CONSTRUCTION, EF_SEARCH = 16, 128, 160
#: pgvector indexes ``vector`` up to 2000 dimensions and ``halfvec`` up to 4000.
MAX_VECTOR_INDEX_DIM, MAX_HALFVEC_INDEX_DIM = 2000, 4000
_indexed: set[tuple[str, int]] = set()


class EmbeddingMismatch(ValueError):
    """The workspace's vectors were made by another embedding model (or have another dimension)."""


@dataclass
class Space:
    """The embedding model and dimension of a workspace's vectors."""

    embedding_id: str
    dimension: int


def vector_expression(dimension: int) -> sql.Composable:
    """The indexed expression for one dimension: the column cast to a typed vector (halfvec above 2000)."""
    kind = "vector" if dimension <= MAX_VECTOR_INDEX_DIM else "halfvec"
    return sql.SQL("(embedding::{}({}))").format(sql.SQL(kind), sql.Literal(dimension))


def hnsw_index_ddl(dimension: int) -> sql.Composed:
    """The partial HNSW index (cosine) serving every workspace whose vectors have this dimension."""
    ops = "vector_cosine_ops" if dimension <= MAX_VECTOR_INDEX_DIM else "halfvec_cosine_ops"
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {} ON chunks USING hnsw ({} {}) WITH (m = {}, ef_construction = {})"
        " WHERE vector_dims(embedding) = {}"
    ).format(
        sql.Identifier(f"chunks_hnsw_{dimension}"),
        vector_expression(dimension),
        sql.SQL(ops),
        sql.Literal(HNSW_M),
        sql.Literal(HNSW_EF_CONSTRUCTION),
        sql.Literal(dimension),
    )


def search_sql(dimension: int) -> sql.Composed:
    """The nearest-chunks query; it repeats the index expression and predicate so HNSW is used."""
    expr = vector_expression(dimension)
    kind = "vector" if dimension <= MAX_VECTOR_INDEX_DIM else "halfvec"
    query = sql.SQL("%(query)s::{}({})").format(sql.SQL(kind), sql.Literal(dimension))
    return sql.SQL(
        "SELECT c.id, c.document_id, c.ordinal, c.text, d.source, d.title, {expr} <=> {query} AS distance"
        " FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.workspace = %(workspace)s AND vector_dims(c.embedding) = {dim}"
        " AND NOT d.pinned"
        " ORDER BY {expr} <=> {query} LIMIT %(limit)s"
    ).format(expr=expr, query=query, dim=sql.Literal(dimension))


def as_vector_text(values: Sequence[float]) -> str:
    """A vector as pgvector's text literal (sent as text and cast in SQL, so no adapter is needed)."""
    return Vector(list(values)).to_text()


def require_space(workspace: str, space: Space, embedding_id: str, dimension: int | None = None) -> None:
    """Refuse to mix vector spaces: ``embedding_id`` (and ``dimension``, when known) must be the workspace's.

    Raises:
        EmbeddingMismatch: With both models named and what to do about it.
    """
    if space.embedding_id == embedding_id and dimension in (None, space.dimension):
        return
    got = f"{embedding_id}" + (f" ({dimension} dimensions)" if dimension is not None else "")
    raise EmbeddingMismatch(
        f"workspace {workspace!r} holds vectors of {space.embedding_id} ({space.dimension} dimensions), but "
        f"the configured embedding model is {got}: configure {space.embedding_id} again, or remove the "
        "workspace's documents and ingest them anew with the new model"
    )


async def ensure_hnsw_index(conn: DictConnection, url: str, dimension: int) -> None:
    """Create the HNSW index of a dimension once; checked first, since CREATE INDEX blocks writers."""
    if (url, dimension) in _indexed:
        return
    if dimension > MAX_HALFVEC_INDEX_DIM:
        raise ValueError(f"pgvector cannot index {dimension}-dimensional vectors (at most 4000)")
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (f"chunks_hnsw_{dimension}",))
    row = await cur.fetchone()
    assert row is not None, "SELECT without FROM returns one row"
    if not row["present"]:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('chunks_hnsw'))")
            await conn.execute(hnsw_index_ddl(dimension))
    _indexed.add((url, dimension))
