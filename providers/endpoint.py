"""Which model the CLI talks to: a configured endpoint, else the embedded local model, else the demo server.

Everything goes through the same ``ChatOpenAI`` path; this only decides the URL. The scripted demo server
is used solely when neither a configured endpoint nor the local model is available, and is labelled as what
it is: not a model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Endpoint:
    """The chosen model endpoint and how to describe it to a person."""

    label: str
    native_tool_calling: bool
    keep_alive: object | None = None
    context_window: int | None = None


def choose_endpoint(progress: Callable[[int, int], None] | None = None, *, demo: bool = False) -> Endpoint:
    """Set ``OPENAI_BASE_URL`` and ``CHAT_MODEL`` for this process and say what was chosen."""
    if os.environ.get("OPENAI_BASE_URL") and not demo:
        model = os.environ.get("CHAT_MODEL", "local")
        native = os.environ.get("NATIVE_TOOL_CALLING", "true").lower() not in ("0", "false", "no")
        return Endpoint(f"{model} at {os.environ['OPENAI_BASE_URL']}", native)
    if not demo:
        try:
            from workspace_agent.providers.local_model import ensure_local_model_server

            server = ensure_local_model_server(progress)
        except ImportError:
            server = None
        if server is not None:
            os.environ["OPENAI_BASE_URL"] = server.base_url
            os.environ["CHAT_MODEL"] = server.model_name
            os.environ.setdefault("OPENAI_API_KEY", "local")
            label = f"embedded local model {server.model_name} (llama.cpp, offline, {server.n_ctx} tokens)"
            return Endpoint(label, False, server, server.n_ctx)
    from workspace_agent.providers.scripted import ScriptedLLM

    scripted = ScriptedLLM().start()
    os.environ["OPENAI_BASE_URL"] = scripted.base_url
    os.environ["CHAT_MODEL"] = "scripted-demo"
    os.environ.setdefault("OPENAI_API_KEY", "demo")
    return Endpoint(
        "SCRIPTED DEMO SERVER — not a model: it echoes, and asks for the clock on 'time'", True, scripted
    )
