"""The chat model: any OpenAI-compatible endpoint through ``ChatOpenAI``.

One client per endpoint and model is kept for the process, so its HTTP connection pool is reused across turns.
"""

from __future__ import annotations

import os
from functools import lru_cache

from langchain_openai import ChatOpenAI


@lru_cache(maxsize=32)
def _client(base_url: str | None, api_key: str, model: str) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=base_url, api_key=api_key, model=model, temperature=0, max_retries=1, timeout=600
    )


def chat_model(model: str) -> ChatOpenAI:
    """The client for ``model`` at ``OPENAI_BASE_URL`` with ``OPENAI_API_KEY`` (any value for local ones)."""
    return _client(
        os.environ.get("OPENAI_BASE_URL") or None, os.environ.get("OPENAI_API_KEY") or "not-needed", model
    )
