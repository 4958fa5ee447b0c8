"""Retrieval over 100k chunks: p50 latency of the product's HNSW search and its recall@4 against exact search.

The chunks are synthetic 384-d vectors (the dimension of all-MiniLM-L6-v2) with the structure of real
sentence embeddings: documents about a few dozen topics, chunks close to their section and document,
so related passages are near each other and unrelated text is nearly orthogonal. ``--data uniform`` uses
i.i.d. random vectors instead: a worst case for any graph index, with no neighbourhood structure. Queries are
perturbed chunks, as a question is close to the passage answering it.

The search runs through ``DocumentStore.search``, the code the ``retrieve`` node and the agent's search
tool use, in a scratch database (dropped at the end; the project's database when it may not create one).
Exact top-4 comes from the same query with index scans switched off (a sequential scan and sort), in the
same run. Goals (DESIGN §4): p50 ≤ 10 ms, recall@4 ≥ 0.95.
Run: ``python bench/retrieval.py [--chunks 100000] [--queries 200] [--data clustered|uniform]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid

import common  # noqa: F401 - sets the bench environment
import numpy as np
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, errors
from psycopg.conninfo import make_conninfo

from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.db import pool
from workspace_agent.checkpoints.embedded import database_url
from workspace_agent.checkpoints.vectors import (
    EF_SEARCH,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    hnsw_index_ddl,
    search_sql,
)

DIM, TOP_N, CHUNKS_PER_DOC, SECTIONS, TOPICS = 384, 4, 100, 10, 40
EMBEDDING_ID = "bench:synthetic-384"


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def make_vectors(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    """``n`` unit vectors: clustered like sentence embeddings of a document collection, or uniform.

    Clustered: 40 topics; documents of 100 chunks about one topic each; sections of 10 chunks within a
    document. A chunk is nearest to its section, then its document, then its topic, as real passages are.
    """
    if kind == "uniform":
        return unit(rng.standard_normal((n, DIM))).astype(np.float32)
    docs = -(-n // CHUNKS_PER_DOC)

    def noise(rows: int) -> np.ndarray:
        return unit(rng.standard_normal((rows, DIM)))

    topics = noise(TOPICS)
    centres = unit(topics[rng.integers(0, TOPICS, docs)] + 1.0 * noise(docs))
    sections = unit(np.repeat(centres, SECTIONS, axis=0) + 0.7 * noise(docs * SECTIONS))
    chunks = np.repeat(sections, CHUNKS_PER_DOC // SECTIONS, axis=0)[:n]
    return unit(chunks + 0.7 * noise(n)).astype(np.float32)


async def scratch_database(url: str) -> tuple[str, str | None]:
    """A fresh database for the run, or the project's database when one may not be created."""
    name = f"wa_bench_{uuid.uuid4().hex[:8]}"
    try:
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'CREATE DATABASE "{name}"')
    except errors.InsufficientPrivilege:
        return url, None
    return make_conninfo(url, dbname=name), name


async def load(url: str, workspace: str, vectors: np.ndarray) -> float:
    """COPY the chunks in binary, then build the HNSW index the product uses; returns the build seconds."""
    store = DocumentStore(url)
    await store.list_documents(workspace)  # creates the schema
    docs = -(-len(vectors) // CHUNKS_PER_DOC)
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        await register_vector_async(conn)
        await conn.execute(
            "INSERT INTO document_spaces (workspace, embedding_id, dimension) VALUES (%s, %s, %s)",
            (workspace, EMBEDDING_ID, DIM),
        )
        cur = await conn.execute(
            "INSERT INTO documents (workspace, source, title, content, content_hash, chunk_size,"
            " chunk_overlap) SELECT %s, 'doc-' || i, 'Document ' || i, '', md5(i::text), 1000, 20"
            " FROM generate_series(1, %s) i RETURNING id",
            (workspace, docs),
        )
        ids = [row[0] for row in await cur.fetchall()]
        async with conn.cursor().copy(
            "COPY chunks (document_id, workspace, ordinal, text, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["int8", "text", "int4", "text", "vector"])
            for i, vector in enumerate(vectors):
                await copy.write_row(
                    (ids[i // CHUNKS_PER_DOC], workspace, i % CHUNKS_PER_DOC, f"chunk {i}", vector)
                )
        started = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute(hnsw_index_ddl(DIM))
        built = time.perf_counter() - started
        await conn.execute("ANALYZE documents")
        await conn.execute("ANALYZE chunks")
        await conn.execute("RESET maintenance_work_mem")
    return built


async def exact_top(url: str, workspace: str, queries: np.ndarray) -> tuple[list[list[int]], list[float]]:
    """Exact nearest chunks and query times: the product's query with index scans off (scan and sort).

    This is the baseline both recall and latency are measured against.
    """
    out, times = [], []
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET enable_indexscan = off")
        await conn.execute("SET enable_bitmapscan = off")
        for q in queries:
            params = {"query": str(q.tolist()), "workspace": workspace, "limit": TOP_N}
            t = time.perf_counter()
            cur = await conn.execute(search_sql(DIM), params)
            out.append([row[0] for row in await cur.fetchall()])
            times.append(time.perf_counter() - t)
    return out, times


async def plan(url: str, workspace: str, query: np.ndarray) -> str:
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        params = {"query": str(query.tolist()), "workspace": workspace, "limit": TOP_N}
        cur = await conn.execute(b"EXPLAIN " + search_sql(DIM).as_bytes(conn), params)
        return "\n".join(row[0] for row in await cur.fetchall())


async def main(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    base = os.environ.get("DATABASE_URL") or await asyncio.to_thread(database_url)
    url, scratch = await scratch_database(base)
    workspace = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        started = time.perf_counter()
        vectors = make_vectors(args.chunks, args.data, rng)
        picks = rng.integers(0, len(vectors), args.queries)
        queries = unit(vectors[picks] + 0.6 * unit(rng.standard_normal((args.queries, DIM))))
        built = await load(url, workspace, vectors)
        print(
            f"{args.chunks} chunks ({args.data}, {DIM}-d) loaded in {time.perf_counter() - started:.1f} s,"
            f" HNSW index built in {built:.1f} s ({'scratch database' if scratch else 'project database'})"
        )
        shown = await plan(url, workspace, queries[0])
        used = "chunks_hnsw_384" in shown
        print(f"plan uses the HNSW index: {used}")
        if not used:
            print(shown)

        store = DocumentStore(url)
        for q in queries[: min(20, len(queries))]:  # warm up: pool, prepared statements, index pages
            await store.search(workspace, q.tolist(), TOP_N, embedding_id=EMBEDDING_ID, ef_search=args.ef)
        samples, found = [], []
        for q in queries:
            vector = q.tolist()
            t = time.perf_counter()
            hits = await store.search(workspace, vector, TOP_N, embedding_id=EMBEDDING_ID, ef_search=args.ef)
            samples.append(time.perf_counter() - t)
            found.append([h.id for h in hits])
        exact, exact_times = await exact_top(url, workspace, queries)
        recall = statistics.mean(len(set(a) & set(e)) / len(e) for a, e in zip(found, exact, strict=True))
        p50 = statistics.median(samples) * 1000
        p95 = sorted(samples)[int(0.95 * len(samples)) - 1] * 1000
        print(
            f"search top-{TOP_N}, {args.queries} queries; HNSW m {HNSW_M}, ef_construction"
            f" {HNSW_EF_CONSTRUCTION}, ef_search {args.ef}, iterative scan:"
        )
        print(
            f"  p50 latency {p50:6.2f} ms   (p95 {p95:.2f} ms)   goal <= 10 ms   "
            f"{'ok' if p50 <= 10 else 'MISSED'}"
        )
        print(
            f"  recall@{TOP_N}   {recall:6.3f}                           goal >= 0.95   "
            f"{'ok' if recall >= 0.95 else 'MISSED'}"
        )
        exact_p50 = statistics.median(exact_times) * 1000
        print(
            f"  exact search (sequential scan, same run): p50 {exact_p50:.1f} ms -> HNSW takes "
            f"{p50 / exact_p50:.3f}x of it ({exact_p50 / p50:.0f}x faster)"
        )
    finally:
        await (await pool(url)).close()
        if scratch:
            async with await AsyncConnection.connect(base, autocommit=True) as conn:
                await conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        else:
            await DocumentStore(url).remove_documents(
                workspace, [d.id for d in await DocumentStore(url).list_documents(workspace)]
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", choices=["clustered", "uniform"], default="clustered")
    parser.add_argument("--ef", type=int, default=EF_SEARCH, help="hnsw.ef_search (default: the product's)")
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
