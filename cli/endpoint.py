"""Which model a CLI session talks to: the configured endpoint, the embedded local model, or the demo.

The choice is made once, before the first turn, with a progress bar while the local model starts. Its
``ModelSettings`` are handed to the graph and to the context explicitly (``session``), so the scripted demo
server is used without touching the process's environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

from ..core.settings import ModelSettings, model_settings
from ..providers.chat.endpoint import endpoint_url

DEMO_MODEL = "scripted-demo"
DEMO_LABEL = "SCRIPTED DEMO SERVER — not a model: it echoes, and asks for the clock on 'time'"


@dataclass
class Endpoint:
    """The model a session chose: what the person is told about it, and the settings the graph gets.

    Attributes:
        label: One line naming the model and where it runs, shown in the chat's banner.
        settings: The chat model's settings, passed to ``build_graph`` and to the context.
        keep_alive: What must live as long as the session: the demo's scripted server.
    """

    label: str
    settings: ModelSettings
    keep_alive: object | None = None


def demo_settings(base_url: str) -> ModelSettings:
    """The settings of the scripted demo server at ``base_url``: the environment's, with its endpoint.

    The other settings (timeout, retries, ``NATIVE_TOOL_CALLING`` …) are the environment's, as for any
    configured endpoint; the key is ``OPENAI_API_KEY`` when it is set, else a placeholder.
    """
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "CHAT_MODEL": DEMO_MODEL}
    env.setdefault("OPENAI_API_KEY", "demo")
    return model_settings(env)


def choose_endpoint(progress: Callable[[int, int], None] | None = None, *, demo: bool = False) -> Endpoint:
    """Settle the model for a CLI session: start the local model now (with a progress bar), or the demo.

    The scripted demo server is used when asked for, or when no endpoint is configured and the local model
    is not installed, and is labelled as what it is: not a model.
    """
    if not demo:
        settings = model_settings()
        if settings.kind == "endpoint":
            return Endpoint(f"{settings.model} at {settings.base_url}", settings)
        from ..providers.local.model_file import LocalModelError

        try:
            url = endpoint_url(settings, progress)
        except (ImportError, LocalModelError) as exc:
            if "not installed" not in str(exc) and not isinstance(exc, ImportError):
                raise
        else:
            label = (
                f"embedded local model {settings.model} at {url} (llama.cpp, offline, "
                f"{settings.context_window} tokens; `workspace-agent model stop` frees it)"
            )
            return Endpoint(label, settings)
    from ..samples.scripted_model import ScriptedLLM

    scripted = ScriptedLLM().start()
    return Endpoint(DEMO_LABEL, demo_settings(scripted.base_url), scripted)


def prepare_endpoint(demo: bool, err: Console) -> Endpoint:
    """Choose the model before the first turn, showing on ``err`` how the local model's start goes."""
    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task("preparing the local model", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description="assembling the local model (once)")

        with err.status("starting the model…"):
            return choose_endpoint(progress, demo=demo)
