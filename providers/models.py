"""The chat model: any OpenAI-compatible endpoint through ``ChatOpenAI``.

One client per endpoint and model is kept, so its HTTP connection pool is reused across turns — per event
loop, because the async HTTP client belongs to the loop that first used it.
"""

from __future__ import annotations

import os

from langchain_openai import ChatOpenAI

from workspace_agent.providers.loops import loop_local


def _client(base_url: str | None, api_key: str, model: str) -> ChatOpenAI:
    return loop_local(
        ("chat", base_url, api_key, model),
        lambda: ChatOpenAI(
            base_url=base_url, api_key=api_key, model=model, temperature=0, max_retries=1, timeout=600
        ),
    )


def chat_model(model: str) -> ChatOpenAI:
    """The client for ``model`` at ``OPENAI_BASE_URL`` with ``OPENAI_API_KEY`` (any value for local ones)."""
    return _client(
        os.environ.get("OPENAI_BASE_URL") or None, os.environ.get("OPENAI_API_KEY") or "not-needed", model
    )
