"""Retrieval quality on a real IR test collection: nDCG@10 and recall@100 of dense, full-text and hybrid.

The collection is Cranfield: 1,400 aeronautics abstracts, 225 queries, relevance judged on Cleverdon's
four grades (the classic test collection; files ``cran.all.1400``, ``cran.qry``, ``cranqrel``). Bring it
with the project's ``fetch`` from a public repository that holds it (``github:noramtboraas/information-
retrieval``), write the three files from that snapshot into a folder (``git show HEAD:<file>``) and pass the
folder as ``--data``. Each file's size and sha256 are checked before anything runs; nothing is downloaded.
BEIR SciFact, the set issue 35 names, cannot be had here: its corpus file (7.7 MB) is over the size the
snapshots carry (files of 4 MiB and more are left out) and no package ships it.

Every document goes through ``skills.documents.index_document`` (the ingest path: split, embedded by the
deployment's embedder, stored with its full-text words) into a workspace of the embedded PostgreSQL; a rerun
finds them stored and embeds nothing. Each query is embedded once; then ``DocumentStore.search`` is timed in
both modes the product has (``dense``; ``hybrid``, full text fused by reciprocal rank), and full text alone
with the same words expression, as the baseline a keyword engine would give. Scores come from
``pytrec_eval`` (trec_eval's own measures). Grades: Cleverdon's 1 (a complete answer) to 4 (minimum
interest) become gains 4 to 1; ``-1`` (no interest) is not relevant. Figures are printed against dense, the
product's default, measured in the same run.

Run: ``python bench/retrieval_quality.py --data DIR [--queries 225]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import common  # noqa: F401 - sets the bench environment
import pytrec_eval
from psycopg import sql

from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.db import connection, resolve_url
from workspace_agent.checkpoints.vectors import TEXT_SEARCH_CONFIG, words_query
from workspace_agent.skills.documents import embedder, index_document

#: The Cranfield files this bench reads: (bytes, sha256) as the snapshot holds them.
FILES = {
    "cran.all.1400": (1684117, "fbb8935a93263ab6c9fadefb507fd7cd5e101e7fbeb31c12e6bff6dd501315e8"),
    "cran.qry": (28957, "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f"),
    "cranqrel": (21377, "a90f56082cd44db70bf2c21ebca39a1a34e37c82ccb5ddf1bcc64f18795234c7"),
}
WORKSPACE = "bench-cranfield"
MEASURES = {"ndcg_cut.10", "recall.100"}
DEPTH = 100


@dataclass
class Collection:
    """Documents by id (title and text), queries by id, and graded judgements."""

    documents: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def fields(text: str) -> list[dict[str, str]]:
    """The records of a SMART-format file: ``.I id`` then fields ``.T .A .B .W``, each to the next marker."""
    records: list[dict[str, str]] = []
    field = ""
    for line in text.splitlines():
        if line.startswith(".I "):
            records.append({"I": line[3:].strip()})
            field = ""
        elif re.fullmatch(r"\.[A-Z]", line.strip()):
            field = line.strip()[1]
            records[-1][field] = ""
        elif records and field:
            records[-1][field] += line.strip() + " "
    return records


def checked(folder: Path) -> dict[str, str]:
    """The three files' texts, after their sizes and sha256 match the pinned ones."""
    texts = {}
    for name, (size, digest) in FILES.items():
        raw = (folder / name).read_bytes()
        got = hashlib.sha256(raw).hexdigest()
        if len(raw) != size or got != digest:
            sys.exit(f"{name}: {len(raw)} bytes, sha256 {got}; expected {size} bytes, {digest}")
        texts[name] = raw.decode("latin-1")
    return texts


def cranfield(texts: dict[str, str]) -> Collection:
    """Cranfield as the bench uses it: queries numbered 1..225 in file order, as ``cranqrel`` numbers them."""
    documents = {
        r["I"]: (r.get("T", "").strip(), r.get("W", "").strip()) for r in fields(texts["cran.all.1400"])
    }
    queries = {str(n): r.get("W", "").strip() for n, r in enumerate(fields(texts["cran.qry"]), start=1)}
    qrels: dict[str, dict[str, int]] = {}
    for line in texts["cranqrel"].splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in {"1", "2", "3", "4"}:
            qrels.setdefault(parts[0], {})[parts[1]] = 5 - int(parts[2])
    return Collection(documents, queries, qrels)


def scores(qrels: dict[str, dict[str, int]], run: dict[str, list[str]]) -> dict[str, float]:
    """nDCG@10 and recall@100, averaged over the judged queries, by trec_eval's measures."""
    ranked = {q: {doc: float(len(docs) - i) for i, doc in enumerate(docs)} for q, docs in run.items()}
    judged = {q: r for q, r in qrels.items() if q in ranked}
    per_query = pytrec_eval.RelevanceEvaluator(judged, MEASURES).evaluate(ranked)
    return {
        "ndcg@10": statistics.fmean(m["ndcg_cut_10"] for m in per_query.values()),
        "recall@100": statistics.fmean(m["recall_100"] for m in per_query.values()),
    }


def documents_of(sources: list[str]) -> list[str]:
    """Document ids in the order their first chunk came (a document is as good as its best chunk)."""
    seen: dict[str, None] = {}
    for source in sources:
        seen.setdefault(source.removeprefix("cran:"), None)
    return list(seen)


async def ingest(store: DocumentStore, workspace: str, collection: Collection) -> int:
    """Index every document not yet stored with this text; returns how many were embedded now."""
    embedded = 0
    for doc_id, (title, body) in collection.documents.items():
        text = f"{title}\n\n{body}".strip()
        if not text:
            continue  # two Cranfield records (471, 995) hold no text at all
        digest = hashlib.sha256(text.encode()).hexdigest()
        known = await store.get_document(workspace, f"cran:{doc_id}")
        if known is None or known.content_hash != digest:
            await index_document(
                store, workspace, source=f"cran:{doc_id}", title=title, text=text, digest=digest
            )
            embedded += 1
    return embedded


async def full_text(url: str, workspace: str, query: str) -> list[str]:
    """Full-text search alone: the chunks matching any of the query's words, by ``ts_rank``."""
    statement = sql.SQL(
        "SELECT d.source FROM chunks c JOIN documents d ON d.id = c.document_id, (SELECT {words} AS q) asked"
        " WHERE c.workspace = %(workspace)s AND c.words @@ asked.q"
        " ORDER BY ts_rank(c.words, asked.q) DESC, c.id LIMIT %(depth)s"
    ).format(words=words_query())
    async with connection(url) as conn:
        cur = await conn.execute(statement, {"workspace": workspace, "text": query, "depth": DEPTH})
        return [row["source"] for row in await cur.fetchall()]


Run = dict[str, dict[str, list[str]]]


async def evaluate(
    store: DocumentStore, url: str, workspace: str, qrels: dict[str, dict[str, int]], queries: dict[str, str]
) -> tuple[dict[str, dict[str, float]], dict[str, list[float]]]:
    """Each mode's scores, and the seconds of its searches (a warming pass first, then the timed one)."""
    embeddings, embedding_id = await embedder()
    vectors = {q: await embeddings.aembed_query(text) for q, text in queries.items()}
    space = await store.space(workspace)
    runs: Run = {"dense": {}, "full text": {}, "hybrid": {}}
    seconds: dict[str, list[float]] = {mode: [] for mode in runs}
    for _ in range(2):
        for q, text in queries.items():
            for mode in runs:
                began = time.perf_counter()
                if mode == "full text":
                    sources = await full_text(url, workspace, text)
                else:
                    words = text if mode == "hybrid" else None
                    hits = await store.search(
                        workspace, vectors[q], DEPTH, embedding_id=embedding_id, space=space, text=words
                    )
                    sources = [h.source for h in hits]
                seconds[mode].append(time.perf_counter() - began)
                runs[mode][q] = documents_of(sources)
    timed = {mode: values[len(queries) :] for mode, values in seconds.items()}
    return {mode: scores(qrels, run) for mode, run in runs.items()}, timed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding the three Cranfield files")
    parser.add_argument("--queries", type=int, default=225, help="the first N queries")
    options = parser.parse_args()
    collection = cranfield(checked(options.data))
    store, url = DocumentStore(), await resolve_url(None)
    started = time.perf_counter()
    embedded = await ingest(store, WORKSPACE, collection)
    took = time.perf_counter() - started
    print(f"{len(collection.documents)} documents ({embedded} embedded now, {took:.0f} s)")
    queries = dict(list(collection.queries.items())[: options.queries])
    figures, seconds = await evaluate(store, url, WORKSPACE, collection.qrels, queries)
    base = figures["dense"]
    base_p50 = statistics.median(seconds["dense"])
    print(
        f"Cranfield, {len(queries)} queries, {TEXT_SEARCH_CONFIG} full text; ratios against dense, same run"
    )
    print(
        f"{'mode':<10} {'nDCG@10':>8} {'x dense':>8} {'R@100':>7} {'x dense':>8} {'p50 ms':>7} {'p95 ms':>7}"
    )
    for mode, got in figures.items():
        timed = sorted(seconds[mode])
        p50, p95 = statistics.median(timed) * 1000, timed[int(0.95 * (len(timed) - 1))] * 1000
        print(
            f"{mode:<10} {got['ndcg@10']:>8.3f} {got['ndcg@10'] / base['ndcg@10']:>8.2f}"
            f" {got['recall@100']:>7.3f} {got['recall@100'] / base['recall@100']:>8.2f}"
            f" {p50:>7.1f} {p95:>7.1f}  ({p50 / 1000 / base_p50:.2f}x dense p50)"
        )


if __name__ == "__main__":
    asyncio.run(main())
