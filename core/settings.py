"""The chat model the project talks to and what it can do, resolved from the deployment's environment.

Every entry point resolves the settings once and passes them down: ``build_graph`` when it builds a graph
(under ``langgraph dev`` and Aegra, when the server imports it), the CLI when it chooses its model. Nothing
reads the environment per call, and nothing here changes it.

- ``OPENAI_BASE_URL`` set: that OpenAI-compatible endpoint, model ``CHAT_MODEL``, key ``OPENAI_API_KEY``.
  It is assumed to call tools natively, and its window is looked up by model family.
- only ``OPENAI_API_KEY`` set: OpenAI's own API, model ``CHAT_MODEL`` (default ``gpt-4o-mini``).
- neither: the embedded local model (llama.cpp on loopback), started on first use and shared by every
  process of the checkout (see ``model_server``). It writes tool calls as JSON text, not natively, and its
  window is the one its server was started with (4096), not its family's nominal 32k.

``NATIVE_TOOL_CALLING`` and ``CONTEXT_WINDOW`` override those facts for a model the project cannot know;
``CALL_GRAMMAR`` says whether the endpoint takes a llama.cpp grammar for prompted calls (``call_grammar``):
on for the embedded model, off for other endpoints unless they are llama.cpp servers and it is set;
``MODEL_TIMEOUT`` (seconds, default 120; 300 for the embedded model) and ``MODEL_MAX_RETRIES`` (default 1)
bound how long a hung endpoint can hold a turn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

OPENAI_API = "https://api.openai.com/v1"
DEFAULT_TIMEOUT = 120.0
#: The embedded model's default: on two cores the 1.5B reads a full 4096-token window in about a minute, and
#: in two when the machine is busy, before it writes a token; a prompted reply is not streamed.
LOCAL_TIMEOUT = 300.0


class LocalModelError(RuntimeError):
    """The embedded model cannot be chosen, assembled or served; the message says what to do."""


#: The pinned local models by short name: the name each is served under. Their files, sizes and checksums
#: are the provider's (``providers/local/model_file.PINS``); the settings need only which one is chosen.
LOCAL_MODELS = {"0.5b": "qwen2.5-coder-0.5b-instruct", "1.5b": "qwen2.5-coder-1.5b-instruct"}
DEFAULT_PIN = "1.5b"
#: Environment variable choosing a pinned model (``0.5b`` or ``1.5b``).
MODEL_ENV = "LOCAL_MODEL"
#: Environment variable naming any GGUF to serve instead of a pinned model.
MODEL_PATH_ENV = "LOCAL_MODEL_PATH"
#: Environment variable setting the window the shared local server is started with.
CONTEXT_ENV = "LOCAL_MODEL_CONTEXT"
#: The window the local server is started with: what the model is trained for at this size, and what 2 cores
#: can fill in reasonable time. It is the provider's fact that trimming uses (not the family's 32k).
DEFAULT_CONTEXT = 4096


def local_model_key() -> str:
    """The short name of the pinned model ``LOCAL_MODEL`` chooses, by short or served name.

    Raises:
        LocalModelError: ``LOCAL_MODEL`` names no pinned model; the message lists them.

    """
    wanted = os.environ.get(MODEL_ENV, "").strip().lower() or DEFAULT_PIN
    for key, name in LOCAL_MODELS.items():
        if wanted in (key, name):
            return key
    choices = ", ".join(f"{key} ({name})" for key, name in LOCAL_MODELS.items())
    raise LocalModelError(f"{MODEL_ENV}={wanted!r} is not a pinned model: choose one of {choices}")


def context_size() -> int:
    """The window the shared server is started with (``LOCAL_MODEL_CONTEXT`` or 4096)."""
    raw = os.environ.get(CONTEXT_ENV) or str(DEFAULT_CONTEXT)
    try:
        size = int(raw)
    except ValueError:
        raise LocalModelError(f"{CONTEXT_ENV}={raw!r} is not a number of tokens") from None
    if size < 512:
        raise LocalModelError(f"{CONTEXT_ENV}={size} is too small: the model needs at least 512 tokens")
    return size


def _env_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean: use true or false")


def _env_number(
    environ: Mapping[str, str], name: str, kind: type[int] | type[float], default: float | None, low: float
) -> float | None:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return value


@dataclass(frozen=True)
class ModelSettings:
    """Where the chat model is and the facts about it that the graphs apply.

    Attributes:
        kind: ``local`` (the embedded model, started on first use) or ``endpoint``.
        base_url: The endpoint's URL; ``None`` for the local model until its server is found or started.
        api_key: The endpoint's key (never shown in a repr).
        setting: The environment variable a person changes to point somewhere else.
        native_tool_calling: Whether the model returns tool calls natively (A3 uses the agent only then).
        context_window: Tokens the model accepts; ``None`` means "look up the model family".
        call_grammar: Whether prompted calls are sent with a llama.cpp grammar (``prompted.call_grammar``)
            that keeps a reply either plain text or well-formed calls of the offered tools.

    """

    kind: Literal["local", "endpoint"]
    base_url: str | None
    api_key: str = field(repr=False)
    model: str
    native_tool_calling: bool
    context_window: int | None
    timeout: float
    max_retries: int
    call_grammar: bool = False
    setting: str = "OPENAI_BASE_URL"


def model_settings(environ: Mapping[str, str] | None = None) -> ModelSettings:
    """The chat model's settings from the environment, with the provider's facts as defaults.

    Args:
        environ: The variables to read; the process's environment unless given (the CLI's demo passes
            its own endpoint this way). The embedded model's own settings (``LOCAL_MODEL``,
            ``LOCAL_MODEL_CONTEXT``, ``LOCAL_MODEL_PATH``) are its server's and always the process's.

    Raises:
        ValueError: An environment variable has a value of the wrong kind; the message names it.

    """
    env = os.environ if environ is None else environ
    base_url = env.get("OPENAI_BASE_URL") or None
    api_key = env.get("OPENAI_API_KEY") or None
    endpoint = bool(base_url or api_key)
    default = DEFAULT_TIMEOUT if endpoint else LOCAL_TIMEOUT
    timeout = float(_env_number(env, "MODEL_TIMEOUT", float, default, 0.1) or default)
    retries = int(_env_number(env, "MODEL_MAX_RETRIES", int, 1, 0) or 0)
    window = _env_number(env, "CONTEXT_WINDOW", int, None, 512)
    if endpoint:
        return ModelSettings(
            kind="endpoint",
            base_url=base_url or OPENAI_API,
            api_key=api_key or "not-needed",
            model=env.get("CHAT_MODEL") or ("local" if base_url else "gpt-4o-mini"),
            native_tool_calling=_env_bool(env, "NATIVE_TOOL_CALLING", True),
            context_window=int(window) if window else None,
            timeout=timeout,
            max_retries=retries,
            call_grammar=_env_bool(env, "CALL_GRAMMAR", False),
        )
    custom = os.environ.get(MODEL_PATH_ENV)
    return ModelSettings(
        kind="local",
        base_url=None,
        api_key="local",
        model=Path(custom).stem if custom else LOCAL_MODELS[local_model_key()],
        native_tool_calling=_env_bool(env, "NATIVE_TOOL_CALLING", False),
        context_window=int(window) if window else context_size(),
        timeout=timeout,
        max_retries=retries,
        call_grammar=_env_bool(env, "CALL_GRAMMAR", True),
        setting="OPENAI_BASE_URL (unset: the embedded local model)",
    )
