"""Which embedding model turns text into vectors: an OpenAI-compatible endpoint, or the local embedder.

``EMBEDDING_MODEL`` names a model at ``EMBEDDING_BASE_URL`` (default: the chat model's ``OPENAI_BASE_URL``)
with ``EMBEDDING_API_KEY`` (default: ``OPENAI_API_KEY``). Without it, the embedded all-MiniLM-L6-v2 runs in
this process (the ``local`` extra), offline. ``embedding_id()`` names the vector space, so that vectors made
by one model are never compared with a query embedded by another.
"""

from __future__ import annotations

import os

from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from ..chat.loops import loop_local


class EmbeddingUnavailable(RuntimeError):
    """No embedding model is configured and the local one is not installed."""


def embedding_id() -> str:
    """The name of the configured vector space (model name; endpoint-qualified when remote)."""
    model = os.environ.get("EMBEDDING_MODEL")
    if model:
        return f"openai-compatible:{model}"
    from .local import EMBEDDING_MODEL_ID

    return f"local:{EMBEDDING_MODEL_ID}"


def _remote(model: str, base_url: str | None, api_key: str) -> Embeddings:
    from langchain_openai import OpenAIEmbeddings

    # Non-OpenAI servers want text, not tiktoken ids: length checking would send token arrays.
    return loop_local(
        ("embeddings", model, base_url, api_key),
        lambda: OpenAIEmbeddings(
            model=model,
            base_url=base_url,
            api_key=SecretStr(api_key),
            check_embedding_ctx_length=False,
            max_retries=1,
        ),
    )


def get_embeddings() -> Embeddings:
    """The embeddings client for the configured vector space."""
    model = os.environ.get("EMBEDDING_MODEL")
    if model:
        base_url = os.environ.get("EMBEDDING_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None
        api_key = os.environ.get("EMBEDDING_API_KEY") or os.environ.get("OPENAI_API_KEY") or "not-needed"
        return _remote(model, base_url, api_key)
    try:
        from .local import get_local_embeddings
    except ImportError as exc:
        raise EmbeddingUnavailable(
            "no embedding model: set EMBEDDING_MODEL (OpenAI-compatible) or install the local one: "
            "pip install -e '.[local]'"
        ) from exc
    return get_local_embeddings()
