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
#: Full-text search: PostgreSQL's English configuration (stems, drops stop words; a code word like
#: ``PELICAN-42`` is kept whole and as its parts). Candidates taken from each ranking before fusing, and the
#: reciprocal rank fusion constant (60, as Cormack et al. and most hybrid engines use).
TEXT_SEARCH_CONFIG, HYBRID_DEPTH, RRF_K = "english", 50, 60
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


def query_vector(dimension: int) -> sql.Composed:
    """The ``%(query)s`` parameter cast to the indexed expression's type, so the HNSW index applies."""
    kind = "vector" if dimension <= MAX_VECTOR_INDEX_DIM else "halfvec"
    return sql.SQL("%(query)s::{}({})").format(sql.SQL(kind), sql.Literal(dimension))


def search_sql(dimension: int) -> sql.Composed:
    """The nearest-chunks query; it repeats the index expression and predicate so HNSW is used."""
    expr, query = vector_expression(dimension), query_vector(dimension)
    return sql.SQL(
        "SELECT c.id, c.document_id, c.ordinal, c.text, d.source, d.title, {expr} <=> {query} AS distance"
        " FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.workspace = %(workspace)s AND vector_dims(c.embedding) = {dim}"
        " AND NOT d.pinned"
        " ORDER BY {expr} <=> {query} LIMIT %(limit)s"
    ).format(expr=expr, query=query, dim=sql.Literal(dimension))


def words_query() -> sql.Composed:
    """The ``%(text)s`` parameter as a full-text query matching any of its words (stemmed, stop words out)."""
    return sql.SQL("replace(plainto_tsquery({config}, %(text)s)::text, ' & ', ' | ')::tsquery").format(
        config=sql.Literal(TEXT_SEARCH_CONFIG)
    )


def hybrid_search_sql(dimension: int) -> sql.Composed:
    """Dense and full-text rankings of a workspace's chunks fused by reciprocal rank, in one query.

    Each ranking keeps its ``depth`` best; a chunk scores ``1/(RRF_K + rank)`` in each it is in, and the
    sum orders the answer. Ranks rather than scores are fused because a cosine distance and ``ts_rank`` are
    on unrelated scales. The person's words are matched as alternatives (any of them, not all: a question
    names more words than a passage repeats), ranked by ``ts_rank``. The dense side repeats the HNSW
    index's expression, as ``search_sql`` does; every chunk's cosine distance is returned, so the
    workspace's similarity threshold applies in this mode too.
    """
    expr, query = vector_expression(dimension), query_vector(dimension)
    return sql.SQL(
        "WITH dense AS ("
        " SELECT id, row_number() OVER (ORDER BY distance, id) AS rank FROM ("
        "  SELECT c.id, {expr} <=> {query} AS distance"
        "  FROM chunks c JOIN documents d ON d.id = c.document_id"
        "  WHERE c.workspace = %(workspace)s AND vector_dims(c.embedding) = {dim} AND NOT d.pinned"
        "  ORDER BY {expr} <=> {query} LIMIT %(depth)s) nearest"
        "), asked AS (SELECT {words} AS q"
        "), lexical AS ("
        " SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ("
        "  SELECT c.id, ts_rank(c.words, asked.q) AS score"
        "  FROM chunks c JOIN documents d ON d.id = c.document_id, asked"
        "  WHERE c.workspace = %(workspace)s AND c.words @@ asked.q AND NOT d.pinned"
        "  ORDER BY score DESC, c.id LIMIT %(depth)s) matching"
        ")"
        " SELECT c.id, c.document_id, c.ordinal, c.text, d.source, d.title, {expr} <=> {query} AS distance"
        " FROM (SELECT id FROM dense UNION SELECT id FROM lexical) found"
        " JOIN chunks c ON c.id = found.id JOIN documents d ON d.id = c.document_id"
        " LEFT JOIN dense ON dense.id = c.id LEFT JOIN lexical ON lexical.id = c.id"
        " ORDER BY COALESCE(1.0 / ({k} + dense.rank), 0) + COALESCE(1.0 / ({k} + lexical.rank), 0) DESC,"
        " distance LIMIT %(limit)s"
    ).format(expr=expr, query=query, dim=sql.Literal(dimension), words=words_query(), k=sql.Literal(RRF_K))


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
