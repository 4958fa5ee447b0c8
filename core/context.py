"""Workspace settings: the per-run context of every graph.

The fields and defaults follow AnythingLLM's workspace settings, so a workspace moved from there behaves the
same. Every field carries a description because LangGraph Studio's assistant panel and the
``/assistants/{id}/schemas`` endpoint show them: clients that send no context per run (Agent Chat UI) get a
workspace's settings from an assistant created with this context.

The model's fields (``model``, ``native_tool_calling``, ``context_window``) default to what the deployment's
model is and can do. A graph is built for one ``ModelSettings`` and makes its runs' contexts with
``context_for(settings)``, which fills them from those; a context made outside a graph (a program's, a
test's) reads the environment's settings once, when it is made.
"""

from __future__ import annotations

import json
import math
import os
import re
import types
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from ..core.settings import ModelSettings, model_settings
from .prompts import DEFAULT_SYSTEM_PROMPT

#: How documents are cut and embedded unless a workspace says otherwise (AnythingLLM's defaults).
DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP, DEFAULT_BATCH_SIZE = 1000, 20, 64
QUERY_REFUSAL = "There is no relevant information in this workspace to answer your query."
#: The user of a local install: authentication off, no ``--user``. Their workspaces keep their bare names.
LOCAL_USER = "default"


def document_scope(user_id: str, workspace: str) -> str:
    """The key a user's workspace keeps its documents under: each user has a namespace of workspaces.

    With API keys on, ``user_id`` is always the key's user (``server/auth.py`` overwrites the context), so
    a stranger naming someone's workspace reaches a workspace of that name in their own namespace: empty,
    or theirs. Nothing tells the two apart, so a refusal can never reveal that another's exists. The local
    user keeps the bare name, so a single-user install and its existing documents work as before. ``/``
    cannot occur in a slug, so no two (user, workspace) pairs share a key.
    """
    return workspace if user_id == LOCAL_USER else f"{user_id}/{workspace}"


READ_ONLY_BUILTINS = [
    "current_datetime",
    "calculate",
    "search_documents",
    "list_documents",
    "summarize_document",
]
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# Inclusive bounds of the numeric settings; tool_timeout must also be above 0. The upper bounds keep a
# typo from reaching PostgreSQL (a LIMIT beyond bigint) or holding a tool for days.
RANGES: dict[str, tuple[float, float]] = {
    "history_limit": (0, 10_000),
    "top_n": (1, 1_000),
    "similarity_threshold": (0.0, 1.0),
    "context_window": (1, 10_000_000),
    "reply_reserve": (0, 1_000_000),
    "max_tokens": (1, 1_000_000),
    "temperature": (0.0, 2.0),
    "max_tool_calls": (0, 1_000),
    "tool_timeout": (0.0, 86_400.0),
}

# Context windows of well-known model families; anything else falls back to 8192 (DESIGN §2).
KNOWN_WINDOWS = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "qwen2.5-coder": 32_768,
    "llama3": 8_192,
}


def _meta(description: str) -> dict[str, str]:
    return {"description": description}


class _Deployment:
    """The value of a model field nobody set, until the context fills it from its model settings."""

    def __repr__(self) -> str:
        return "<the deployment's>"


#: What a model field holds between the dataclass's ``__init__`` and ``__post_init__`` when it was not set.
#: A factory default, so the schema clients see shows no default (it depends on the deployment).
DEPLOYMENT: Any = _Deployment()


def _deployments() -> Any:
    return DEPLOYMENT


class ContextError(ValueError):
    """A setting of the wrong type or out of range; the message names the field."""


def _wrong(name: str, expected: str, value: Any) -> ContextError:
    hint = f'; write ["{value}"]' if expected.startswith("a list") and isinstance(value, str) else ""
    return ContextError(
        f"context field {name!r} must be {expected}, got {value!r} ({type(value).__name__}){hint}"
    )


def check_type(name: str, hint: Any, value: Any) -> None:
    """Raise unless ``value`` has the declared type; nothing is coerced.

    Values arrive as JSON from any HTTP client, so Python's truthiness and iteration must never decide: a
    string given for a list of patterns would be read character by character (its lone ``*`` approving every
    tool) and ``"no"`` would count as true.
    """
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return
        options = [a for a in args if a is not type(None)]
        for option in options[1:]:
            try:
                return check_type(name, option, value)
            except ContextError:
                pass
        return check_type(name, options[0], value)
    if origin is Literal:
        if value not in args:
            choices = ", ".join(map(str, args))
            raise ContextError(f"context field {name!r} must be one of {choices}, got {value!r}")
        return
    if origin in (list, tuple) or hint in (list, tuple):
        item = args[0] if args else Any
        if not isinstance(value, (list, tuple)):
            raise _wrong(name, "a list of strings" if item is str else "a list", value)
        for i, v in enumerate(value):
            check_type(f"{name}[{i}]", item, v)
        return
    expected, ok = {
        bool: ("true or false", lambda v: isinstance(v, bool)),
        int: ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
        float: (
            "a number",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        ),
        str: ("a string", lambda v: isinstance(v, str)),
        dict: ("an object", lambda v: isinstance(v, dict)),
    }.get(origin or hint, ("", lambda v: True))
    if not ok(value):
        raise _wrong(name, expected, value)


@dataclass(kw_only=True)
class Context:
    """Settings of one workspace, read by every node of a turn."""

    #: The model settings the model fields' defaults and the window's cap come from: those of the graph that
    #: made the context (``context_for``); ``None`` on ``Context`` itself, which reads the environment's.
    deployment: ClassVar[ModelSettings | None] = None

    workspace: str = field(
        default="default",
        metadata=_meta("Workspace slug: documents, chat log and memories are scoped by it."),
    )
    user_id: str = field(
        default=LOCAL_USER, metadata=_meta("Whose chat log, approvals and memories these are.")
    )
    chat_mode: Literal["automatic", "chat", "query"] = field(
        default="automatic",
        metadata=_meta(
            "automatic: agent when the model calls tools natively; chat: plain chat unless the message "
            "starts with @agent; query: plain chat that answers only from workspace documents."
        ),
    )
    model: str = field(
        default_factory=_deployments,
        metadata=_meta("Model name at the OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY)."),
    )
    native_tool_calling: bool = field(
        default_factory=_deployments,
        metadata=_meta(
            "Whether the model calls tools natively; automatic mode uses the agent only then. "
            "Default: what the deployment's model can do (false for the embedded local model)."
        ),
    )
    system_prompt: str = field(
        default=DEFAULT_SYSTEM_PROMPT,
        metadata=_meta(
            "System prompt; may use {date} (December 3, 2026), {weekday}, {datetime} (ISO 8601), {user_id} "
            "and {workspace}."
        ),
    )
    history_limit: int = field(
        default=20,
        metadata=_meta("Earlier exchanges of this thread sent to the model, newest kept; 0 = none."),
    )
    top_n: int = field(default=4, metadata=_meta("Document chunks retrieved per message."))
    similarity_threshold: float = field(
        default=0.25, metadata=_meta("Chunks with a cosine similarity below this are dropped (0..1).")
    )
    context_window: int | None = field(
        default_factory=_deployments,
        metadata=_meta(
            "Tokens the model accepts; empty = known per model, else 8192. Never more than the deployment's "
            "model accepts (4096 for the embedded local model)."
        ),
    )
    reply_reserve: int = field(default=600, metadata=_meta("Tokens kept free for the reply when trimming."))
    max_tokens: int | None = field(
        default=None,
        metadata=_meta(
            "Most tokens one reply may have, asked of the model; unset: reply_reserve for a prompted model, "
            "the model's own limit for a native one."
        ),
    )
    temperature: float | None = field(
        default=None,
        metadata=_meta("Sampling temperature (AnythingLLM's openAiTemp); unset: the model's own (0 locally)"),
    )
    max_tool_calls: int = field(
        default=10, metadata=_meta("Tool executions per turn before the model must answer.")
    )
    tool_timeout: float = field(
        default=60.0, metadata=_meta("Seconds one tool call may run before it is given up.")
    )
    approval_required: list[str] = field(
        default_factory=lambda: ["*"],
        metadata=_meta("Tool-name patterns (fnmatch) that need a person's approval."),
    )
    auto_approved: list[str] = field(
        default_factory=lambda: list(READ_ONLY_BUILTINS),
        metadata=_meta(
            "Tool-name patterns that run without asking; wins over approval_required. MCP: <server>-*."
        ),
    )
    also_ask: list[str] = field(
        default_factory=list,
        metadata=_meta(
            "Tool-name patterns that ask in this run even when auto-approved: how a run's context asks for "
            "more approval than its assistant. Set per run, not on an assistant."
        ),
    )
    mcp_servers: list[str] | None = field(
        default=None,
        metadata=_meta(
            "Which of the deployment's MCP servers (its MCP_CONFIG file) this workspace uses, by name; "
            "empty = all of them, [] = none."
        ),
    )
    tools: list[str] | None = field(
        default=None,
        metadata=_meta(
            "Which tools this workspace offers, by name or pattern (fnmatch; MCP: <server>-*); unset = all. "
            "A tool not chosen is neither offered nor run. Set on the workspace's assistant, not per run."
        ),
    )
    without_tools: list[str] = field(
        default_factory=list,
        metadata=_meta(
            "Tool-name patterns this run does not offer: how a run's context narrows its assistant's tools. "
            "Set per run, not on an assistant."
        ),
    )
    memories_enabled: bool = field(
        default=True, metadata=_meta("Use and extract long-term memories of the user in this workspace.")
    )
    query_refusal_response: str = field(
        default=QUERY_REFUSAL, metadata=_meta("Answer of query mode when no document context was found.")
    )

    def __post_init__(self) -> None:
        settings = self.deployment if self.deployment is not None else model_settings()
        if self.model is DEPLOYMENT:
            self.model = settings.model
        if self.native_tool_calling is DEPLOYMENT:
            self.native_tool_calling = settings.native_tool_calling
        if self.context_window is DEPLOYMENT:
            self.context_window = settings.context_window
        #: The deployment model's window, which no setting can exceed (``window``).
        self._model_window: int | None = settings.context_window
        hints = _hints(cast(type, type(self)))  # a dataclass with eq is unhashable, its class is not
        for f in fields(self):
            check_type(f.name, hints[f.name], getattr(self, f.name))
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if value is not None and not (low <= value <= high and (name != "tool_timeout" or value > 0)):
                above = "above" if name == "tool_timeout" else "from"
                raise ContextError(f"context field {name!r} must be {above} {low} up to {high}, got {value}")
        if not SLUG.fullmatch(self.workspace):
            raise ContextError(
                f"context field 'workspace' must be a slug (letters, digits, '.', '_', '-'; up to 64, "
                f"not starting with a sign), got {self.workspace!r}"
            )
        for name in ("user_id", "model"):
            if not getattr(self, name).strip() or len(getattr(self, name)) > 200:
                raise ContextError(f"context field {name!r} must be a non-empty string up to 200 characters")
        if self.reply_reserve >= self.window:
            raise ContextError(
                f"context field 'reply_reserve' ({self.reply_reserve}) must be below the window "
                f"({self.window})"
            )

    @property
    def documents(self) -> str:
        """The key of the user's workspace in the documents tables (``document_scope``)."""
        return document_scope(self.user_id, self.workspace)

    @property
    def window(self) -> int:
        """Tokens the model accepts: the setting or the model family's, never above the provider's fact."""
        known = self._model_window
        if self.context_window:
            return min(self.context_window, known) if known else self.context_window
        if known:
            return known
        name = self.model.lower()
        for prefix, size in KNOWN_WINDOWS.items():
            if name.startswith(prefix):
                return size
        return 8192

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> Context:
        """Build from a plain dict (CLI flags, config files), rejecting unknown names clearly."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown context field(s): {', '.join(unknown)}")
        return cls(**values)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


ContextT = TypeVar("ContextT", bound="Context | MemoryContext")


@cache
def context_for(settings: ModelSettings, schema: type[ContextT]) -> type[ContextT]:
    """``schema`` with its model defaults taken from ``settings``: the context schema of a graph for them.

    LangGraph makes each run's context from the client's dict with the graph's context schema, so a subclass
    that names the settings is how a graph's settings reach its contexts. It keeps the schema's name, fields
    and descriptions: clients see the same schema, and a ``Context`` a program passes is used as it is.
    """
    namespace = {"deployment": settings, "__module__": schema.__module__, "__qualname__": schema.__qualname__}
    return cast(type[ContextT], type(schema.__name__, (schema,), {**namespace, "__doc__": schema.__doc__}))


def parse_assignments(items: Iterable[str], schema: type = Context) -> dict[str, Any]:
    """Read the command line's ``name=value`` settings: JSON values, plain text for text fields.

    Nothing is converted to fit: ``history_limit=abc`` stays a string, so ``Context`` names the field in its
    error instead of failing later, and a list is written as JSON (``auto_approved='["github-*"]'``).
    """
    hints = _hints(schema)
    values: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ContextError(f"--set expects name=value, got {item!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if hints.get(name) is str and not isinstance(value, str):
            value = raw  # a workspace named 2024 is the text "2024"
        values[name] = value
    return values


# The memory and ingest graphs' settings: the same checks as ``Context``, each error naming its field.


def check_fields(settings: Any) -> None:
    """Check every field of a settings dataclass against its declared type (``check_type``).

    Raises:
        ContextError: A field of the wrong type; the message names it.
    """
    hints = get_type_hints(type(settings))
    for f in fields(settings):
        check_type(f.name, hints[f.name], getattr(settings, f.name))


def check_at_least(name: str, value: float, low: float) -> None:
    """Refuse a number below ``low``, naming the field.

    Raises:
        ContextError: ``value`` is below ``low``.
    """
    if value < low:
        raise ContextError(f"context field {name!r} must be at least {low}, got {value}")


@dataclass(kw_only=True)
class MemoryContext:
    """Settings of one memory-extraction run (Studio shows these descriptions in the assistant panel)."""

    #: The model settings ``model`` defaults to when ``MEMORY_MODEL`` is unset, as on ``Context``.
    deployment: ClassVar[ModelSettings | None] = None

    workspace: str | None = field(
        default=None, metadata=_meta("Only this workspace's chats; empty = every workspace.")
    )
    user_id: str | None = field(default=None, metadata=_meta("Only this user's chats; empty = every user."))
    min_chats: int = field(
        default=5, metadata=_meta("Unprocessed chats a user needs in a workspace before they are read.")
    )
    idle_minutes: float = field(
        default=20.0,
        metadata=_meta(
            "Minutes since the group's newest chat before it is read (still active otherwise); 0 = off."
        ),
    )
    batch_size: int = field(
        default=20, metadata=_meta("Chats per observer call; a group is read in batches.")
    )
    max_chars: int = field(default=1500, metadata=_meta("Characters kept of each prompt and each answer."))
    model: str = field(
        default_factory=_deployments,
        metadata=_meta(
            "Model at the OpenAI-compatible endpoint (OPENAI_BASE_URL); default MEMORY_MODEL, else the "
            "deployment's chat model (the embedded local model when no endpoint is set)."
        ),
    )

    def __post_init__(self) -> None:
        if self.model is DEPLOYMENT:
            chosen = os.environ.get("MEMORY_MODEL")
            self.model = chosen or (self.deployment or model_settings()).model
        check_fields(self)
        check_at_least("min_chats", self.min_chats, 1)
        check_at_least("idle_minutes", self.idle_minutes, 0)
        check_at_least("batch_size", self.batch_size, 1)
        check_at_least("max_chars", self.max_chars, 100)


@dataclass(kw_only=True)
class IngestContext:
    """Where documents go and how they are cut: the per-run context of the ``ingest`` graph."""

    workspace: str = field(
        default="default", metadata=_meta("Workspace slug the documents are added to and searched in.")
    )
    user_id: str = field(
        default=LOCAL_USER,
        metadata=_meta("Whose workspace it is; with API keys on, always the caller (the server sets it)."),
    )
    chunk_size: int = field(
        default=DEFAULT_CHUNK_SIZE, metadata=_meta("Characters per chunk (RecursiveCharacterTextSplitter).")
    )
    chunk_overlap: int = field(
        default=DEFAULT_CHUNK_OVERLAP, metadata=_meta("Characters shared by neighbouring chunks.")
    )
    batch_size: int = field(
        default=DEFAULT_BATCH_SIZE, metadata=_meta("Chunks per request to the embedding model.")
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if not SLUG.fullmatch(self.workspace):
            raise ContextError(f"context field 'workspace' must be a slug, got {self.workspace!r}")
        if not self.user_id.strip() or len(self.user_id) > 200:
            raise ContextError("context field 'user_id' must be a non-empty string up to 200 characters")
        check_at_least("chunk_size", self.chunk_size, 1)
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ContextError(
                f"context field 'chunk_overlap' must be from 0 up to chunk_size - 1 ({self.chunk_size - 1}), "
                f"got {self.chunk_overlap}"
            )
        check_at_least("batch_size", self.batch_size, 1)

    @property
    def documents(self) -> str:
        """The key of the user's workspace in the documents tables (``document_scope``)."""
        return document_scope(self.user_id, self.workspace)
