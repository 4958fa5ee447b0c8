"""The offline embedding model: its vectors must be usable for retrieval, and bad files must be refused.

These run the real int8 ONNX model (about 0.4 s to load, milliseconds per call), because a fake could not
show that the tokenizer, pooling and normalisation fit the model's weights.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from workspace_agent.providers.embeddings.local import (
    EMBEDDING_DIMENSIONS,
    LocalEmbeddings,
    default_embedding_files,
    get_local_embeddings,
)
from workspace_agent.providers.local.local_model import ModelIntegrityError

# Each left sentence belongs with the right one at the same index and with no other.
RELATED_PAIRS = [
    ("How do I reset my password?", "Steps to change your account password."),
    ("The cat is sleeping on the sofa.", "A kitten naps on the couch."),
    ("What is the weather like in Paris today?", "Is it raining in Paris right now?"),
    ("Where are the chat checkpoints stored?", "Saved conversation state is kept in PostgreSQL."),
]
# Smallest gap wanted between the weakest related pair and the strongest unrelated one; measured: 0.30.
MARGIN = 0.2


@pytest.fixture(scope="module")
def embeddings() -> LocalEmbeddings:
    """Share one loaded model across the module; loading is the slow part."""
    return get_local_embeddings()


def _dot(left: list[float], right: list[float]) -> float:
    return sum(a * b for a, b in zip(left, right, strict=True))


def test_related_sentences_score_well_above_unrelated(embeddings: LocalEmbeddings) -> None:
    """Retrieval works only if a paraphrase outranks every off-topic text by a clear margin."""
    lefts = embeddings.embed_documents([left for left, _ in RELATED_PAIRS])
    rights = embeddings.embed_documents([right for _, right in RELATED_PAIRS])
    count = len(RELATED_PAIRS)
    related = [_dot(lefts[i], rights[i]) for i in range(count)]
    unrelated = [_dot(lefts[i], rights[j]) for i in range(count) for j in range(count) if i != j]
    assert min(related) - max(unrelated) >= MARGIN, (related, unrelated)


def test_vectors_are_384_dimensional_and_unit_length(embeddings: LocalEmbeddings) -> None:
    """Unit length lets cosine similarity be a dot product; the dimension must match the vector column."""
    texts = ["short", "", "a longer sentence " * 200]  # empty and over-long input must work too
    for vector in [*embeddings.embed_documents(texts), embeddings.embed_query("a query")]:
        assert len(vector) == EMBEDDING_DIMENSIONS
        assert math.isclose(math.sqrt(_dot(vector, vector)), 1.0, abs_tol=1e-5)


def test_batching_keeps_order_and_values(embeddings: LocalEmbeddings) -> None:
    """Sorting by length inside the batcher must not mix up results; batch size must not change them."""
    texts = [f"sentence number {i} " + "with padding words " * (i % 7) for i in range(11)]
    batched = embeddings.embed_documents(texts)
    small_batches = LocalEmbeddings(batch_size=3).embed_documents(texts)
    for text, vector, other in zip(texts, batched, small_batches, strict=True):
        single = embeddings.embed_query(text)
        assert _dot(vector, single) > 0.9999
        assert _dot(vector, other) > 0.9999


async def test_async_methods_match_sync(embeddings: LocalEmbeddings) -> None:
    """The async variants run the same model off the event loop and return the same vectors."""
    query = await embeddings.aembed_query("hello world")
    documents = await embeddings.aembed_documents(["hello world"])
    assert _dot(query, embeddings.embed_query("hello world")) > 0.9999
    assert _dot(documents[0], query) > 0.9999


def _corrupt_copy(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    with target.open("r+b") as handle:
        handle.seek(target.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return target


def test_changed_model_file_is_refused(tmp_path: Path) -> None:
    """A single flipped byte in the ONNX file must stop loading, naming the file and both hashes."""
    model, tokenizer = default_embedding_files()
    bad = _corrupt_copy(model, tmp_path / "model.onnx")
    with pytest.raises(ModelIntegrityError, match="sha256 mismatch") as caught:
        LocalEmbeddings(model_path=bad, tokenizer_path=tokenizer)
    assert caught.value.path == bad


def test_changed_tokenizer_file_is_refused(tmp_path: Path) -> None:
    """The tokenizer is pinned too: another vocabulary would silently produce meaningless vectors."""
    model, tokenizer = default_embedding_files()
    bad = _corrupt_copy(tokenizer, tmp_path / "tokenizer.json")
    with pytest.raises(ModelIntegrityError, match="sha256 mismatch"):
        LocalEmbeddings(model_path=model, tokenizer_path=bad)
