"""Issue 35, item 3: the retrieval quality bench's pipeline, on a slice of Cranfield kept in the tests.

``bench/retrieval_quality.py`` measures nDCG@10 and recall@100 of dense, full-text and hybrid search on the
whole collection (its figures are in ``bench/README.md``). Here its own functions run on 60 documents and 8
queries (``tests/fixtures/cranfield``): the SMART files are read as the bench reads them, the documents go
through the ingest path into the embedded PostgreSQL, and trec_eval's measures score each mode. A perfect
ranking scores 1 and a ranking without a judged document 0, so the scoring is wired as it claims.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from workspace_agent.checkpoints.chunks import DocumentStore

ROOT = Path(__file__).resolve().parents[2]
SLICE = ROOT / "tests" / "fixtures" / "cranfield"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The bench module, with ``bench/`` on the path as when it runs as a script."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("retrieval_quality")


def test_the_slice_is_read_as_the_collection_is(bench: ModuleType) -> None:
    texts = {name: (SLICE / name).read_text(encoding="latin-1") for name in bench.FILES}
    collection = bench.cranfield(texts)
    assert len(collection.documents) == 60 and len(collection.queries) == 8
    title, body = collection.documents["1"]
    assert title.startswith("experimental investigation of the aerodynamics") and "slipstream" in body
    assert collection.queries["1"].startswith("what similarity laws must be obeyed")
    assert collection.qrels["1"]["29"] == 3, "Cleverdon's grade 2 is gain 3"
    assert all(1 <= gain <= 4 for judged in collection.qrels.values() for gain in judged.values())


def test_scores_are_trec_evals(bench: ModuleType) -> None:
    qrels = {"1": {"a": 4, "b": 1}, "2": {"c": 2}}
    perfect = bench.scores(qrels, {"1": ["a", "b", "x"], "2": ["c"]})
    assert perfect == {"ndcg@10": pytest.approx(1.0), "recall@100": pytest.approx(1.0)}
    nothing = bench.scores(qrels, {"1": ["x", "y"], "2": ["z"]})
    assert nothing == {"ndcg@10": 0.0, "recall@100": 0.0}
    swapped = bench.scores(qrels, {"1": ["b", "a"], "2": ["c"]})
    assert 0.0 < swapped["ndcg@10"] < 1.0 and swapped["recall@100"] == pytest.approx(1.0)


async def test_each_mode_is_scored_on_the_slice(bench: ModuleType, database_url: str, workspace: str) -> None:
    texts = {name: (SLICE / name).read_text(encoding="latin-1") for name in bench.FILES}
    collection = bench.cranfield(texts)
    store = DocumentStore(database_url)
    assert await bench.ingest(store, workspace, collection) == 60
    assert await bench.ingest(store, workspace, collection) == 0, "a rerun embeds nothing again"
    queries = collection.queries
    figures, seconds = await bench.evaluate(store, database_url, workspace, collection.qrels, queries)
    assert set(figures) == {"dense", "full text", "hybrid"}
    for mode, got in figures.items():
        assert 0.2 < got["ndcg@10"] <= 1.0, (mode, got)
        assert got["recall@100"] > 0.5, (mode, got)
        assert len(seconds[mode]) == 8 and all(s > 0 for s in seconds[mode])
