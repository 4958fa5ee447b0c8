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
import os
import re
from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from .client_tools import ClientTools, ResponseFormat
from .prompts import DEFAULT_SYSTEM_PROMPT
from .settings import ModelSettings, model_settings

#: How documents are cut and embedded unless a workspace says otherwise (AnythingLLM's defaults).
DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP, DEFAULT_BATCH_SIZE = 1000, 20, 64
QUERY_REFUSAL = "There is no relevant information in this workspace to answer your query."
#: How a workspace ranks its chunks (``Context.search_mode``).
SearchMode = Literal["dense", "hybrid"]
#: The user of a local install: authentication off, no ``--user``. Their workspaces keep their bare names.
LOCAL_USER = "default"


def workspace_owner(user_id: str, workspace: str) -> tuple[str, str]:
    """Whose workspace a name means, and its slug: ``owner/slug`` the owner's, a bare slug the user's own."""
    owner, sep, slug = workspace.rpartition("/")
    return (owner, slug) if sep else (user_id, workspace)


def document_scope(user_id: str, workspace: str) -> str:
    """The key a workspace keeps its documents under: each user has a namespace of workspaces.

    With API keys on, ``user_id`` is always the key's user (``server/auth.py`` overwrites the context), so
    a stranger naming someone's workspace by its slug reaches a workspace of that name in their own
    namespace: empty, or theirs. Nothing tells the two apart, so a refusal can never reveal that another's
    exists. A member names a shared workspace as ``owner/slug`` and reaches the owner's key; every path
    that takes such a name from a client checks the membership first (``checkpoints.members.require``).
    The local user keeps the bare name, so a single-user install and its existing documents work as
    before. ``/`` cannot occur in a slug, so no two (owner, workspace) pairs share a key.
    """
    owner, slug = workspace_owner(user_id, workspace)
    return slug if owner == LOCAL_USER else f"{owner}/{slug}"


READ_ONLY_BUILTINS = [
    "current_datetime",
    "calculate",
    "search_documents",
    "list_documents",
    "summarize_document",
]
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: A workspace as a run names it: its slug (the user's own), or ``owner/slug`` (one shared with the user).
WORKSPACE_REF = re.compile(r"^(?:[A-Za-z0-9][^/\s]{0,127}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

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
    "time_limit": (0.0, 86_400.0),
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


def scope_of(settings: Context | IngestContext) -> str:
    """The key a settings' user's workspace keeps its documents under (``document_scope``)."""
    return document_scope(settings.user_id, settings.workspace)


class ContextError(ValueError):
    """A setting of the wrong type or out of range; the message names the field."""


class _Deployment:
    """The value of a model field nobody set, until the context fills it from its model settings."""

    def __repr__(self) -> str:
        return "<the deployment's>"


#: What a model field holds until the context's validator fills it, when it was not set. A factory default,
#: so the schema clients see shows no default (it depends on the deployment).
DEPLOYMENT: Any = _Deployment()


def _deployments() -> Any:
    return DEPLOYMENT


#: The words a client reads for each kind of wrong value (pydantic's error types): JSON arrives from any
#: HTTP client, so nothing is coerced (strict mode). Python's truthiness must never decide: a string given
#: for a list of patterns would be read character by character (its lone ``*`` approving every tool) and
#: ``"no"`` would count as true.
WANTS = {
    "int_type": "a whole number",
    "bool_type": "true or false",
    "float_type": "a number",
    "finite_number": "a number",
    "string_type": "a string",
    "list_type": "a list of strings",
    "dict_type": "an object",
    "model_type": "an object",
}
#: What a text setting with a shape wants, for errors of its pattern or length.
SHAPES = {
    "workspace": "a slug (letters, digits, '.', '_', '-'; up to 64, not starting with a sign), or owner/slug",
    "user_id": "a non-empty string up to 200 characters",
    "model": "a non-empty string up to 200 characters",
}
_TEXT = Field(pattern=r"\S", max_length=200)


def _bounds(name: str, error: ErrorDetails) -> str:
    """A numeric field's range in words (``from 0 up to 10000``, ``above 0.0 up to 86400.0``)."""
    if name in RANGES:
        low, high = RANGES[name]
        return f"{'above' if name == 'tool_timeout' else 'from'} {low} up to {high}"
    least = error.get("ctx", {}).get("ge")
    return f"at least {int(least) if isinstance(least, float) and least.is_integer() else least}"


def _says(error: ErrorDetails, prefix: str = "") -> str:
    """One validation error in words that name the field and what it wants."""
    loc = [prefix] if prefix else []
    loc += [f"[{p}]" if isinstance(p, int) else str(p) for p in error["loc"]]
    name = "".join(p if p.startswith("[") or i == 0 else f".{p}" for i, p in enumerate(loc))
    kind, value = error["type"], error.get("input")
    if kind in WANTS:
        hint = f'; write ["{value}"]' if kind == "list_type" and isinstance(value, str) else ""
        return f"context field {name!r} must be {WANTS[kind]}, got {value!r} ({type(value).__name__}){hint}"
    if kind == "literal_error":
        return f"context field {name!r} must be one of {error.get('ctx', {}).get('expected')}, got {value!r}"
    if kind in ("greater_than", "greater_than_equal", "less_than_equal"):
        return f"context field {name!r} must be {_bounds(name, error)}, got {value}"
    if name in SHAPES and kind.startswith("string_"):
        return f"context field {name!r} must be {SHAPES[name]}, got {value!r}"
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error"))
    if kind == "extra_forbidden":  # inside a field holding an object (a client's tools): a key it lacks
        return f"context field {name!r} is not a key that object takes"
    return f"context field {name!r}: {error['msg']}, got {value!r}"


def explain(exc: ValidationError, prefix: str = "") -> ContextError:
    """The first problem of a validation, as a ``ContextError``; unknown names are listed together."""
    errors = exc.errors()
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if unknown:
        return ContextError(f"unknown context field(s): {', '.join(sorted(unknown))}")
    return ContextError(_says(errors[0], prefix))


@cache
def _adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint, config=ConfigDict(strict=True, allow_inf_nan=False))


def check_value(name: str, hint: Any, value: Any) -> None:
    """Raise unless ``value`` has type ``hint``, strictly (the server checks a run's settings with this).

    Raises:
        ContextError: The value has another type; the message names ``name``.
    """
    try:
        _adapter(hint).validate_python(value)
    except ValidationError as exc:
        raise explain(exc, prefix=name) from None


class Settings(BaseModel):
    """Settings a graph's runs carry, checked strictly by pydantic; a wrong one raises ``ContextError``."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, /, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise explain(exc) from None

    @field_validator("*", mode="before")
    @classmethod
    def _tuples_as_lists(cls, value: Any) -> Any:
        """A program's tuple of patterns is a list of them; a string never is (strict mode refuses it)."""
        return list(value) if isinstance(value, tuple) else value

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> Self:
        """Build from a plain dict (CLI flags, config files, API bodies), refusing unknown names clearly."""
        return cls(**dict(values or {}))


def _range(name: str) -> Any:
    low, high = RANGES[name]
    return Field(gt=low, le=high) if name in ("tool_timeout", "time_limit") else Field(ge=low, le=high)


class Context(Settings):
    """Settings of one workspace, read by every node of a turn."""

    #: The model settings the model fields' defaults and the window's cap come from: those of the graph that
    #: made the context (``context_for``); ``None`` on ``Context`` itself, which reads the environment's.
    deployment: ClassVar[ModelSettings | None] = None

    workspace: Annotated[str, Field(pattern=WORKSPACE_REF.pattern)] = Field(
        default="default",
        description="Workspace slug: documents, chat log and memories are scoped by it. Another user's "
        "workspace shared with this user is named owner/slug.",
    )
    user_id: Annotated[str, _TEXT] = Field(
        default=LOCAL_USER, description="Whose chat log, approvals and memories these are."
    )
    chat_mode: Literal["automatic", "chat", "query"] = Field(
        default="automatic",
        description="automatic: agent when the model calls tools natively; chat: plain chat unless the "
        "message starts with @agent; query: plain chat that answers only from workspace documents.",
    )
    model: Annotated[str, _TEXT] = Field(
        default_factory=_deployments,
        description="Model name at the OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY).",
    )
    native_tool_calling: bool = Field(
        default_factory=_deployments,
        description="Whether the model calls tools natively; automatic mode uses the agent only then. "
        "Default: what the deployment's model can do (false for the embedded local model).",
    )
    system_prompt: str = Field(
        default=DEFAULT_SYSTEM_PROMPT,
        description="System prompt; may use {date} (December 3, 2026), {weekday}, {datetime} (ISO 8601), "
        "{user_id} and {workspace}.",
    )
    history_limit: Annotated[int, _range("history_limit")] = Field(
        default=20, description="Earlier exchanges of this thread sent to the model, newest kept; 0 = none."
    )
    top_n: Annotated[int, _range("top_n")] = Field(
        default=4, description="Document chunks retrieved per message."
    )
    similarity_threshold: Annotated[float, _range("similarity_threshold")] = Field(
        default=0.25, description="Chunks with a cosine similarity below this are dropped (0..1)."
    )
    clarifying_questions: bool = Field(
        default=True,
        description="Offer the agent the ask_person tool: it may pause the turn to ask the person a question "
        "(free text or a choice) and go on with the answer. Off for runs nobody can answer.",
    )
    search_mode: SearchMode = Field(
        default="dense",
        description="How chunks are ranked: dense (embeddings alone, as AnythingLLM) or hybrid (embeddings "
        "fused with PostgreSQL full-text search, which finds exact words: codes, names, error strings).",
    )
    context_window: Annotated[int, _range("context_window")] | None = Field(
        default_factory=_deployments,
        description="Tokens the model accepts; empty = known per model, else 8192. Never more than the "
        "deployment's model accepts (4096 for the embedded local model).",
    )
    reply_reserve: Annotated[int, _range("reply_reserve")] = Field(
        default=600, description="Tokens kept free for the reply when trimming."
    )
    max_tokens: Annotated[int, _range("max_tokens")] | None = Field(
        default=None,
        description="Most tokens one reply may have, asked of the model; unset: reply_reserve for a prompted "
        "model, the model's own limit for a native one.",
    )
    temperature: Annotated[float, _range("temperature")] | None = Field(
        default=None,
        description="Sampling temperature (AnythingLLM's openAiTemp); unset: the model's own (0 locally)",
    )
    max_tool_calls: Annotated[int, _range("max_tool_calls")] = Field(
        default=10, description="Tool executions per turn before the model must answer."
    )
    tool_timeout: Annotated[float, _range("tool_timeout")] = Field(
        default=60.0, description="Seconds one tool call may run before it is given up."
    )
    time_limit: Annotated[float, _range("time_limit")] | None = Field(
        default=None,
        description="Seconds of work a run may take (a scheduled job's limit): past it, the run ends as "
        "timed_out and keeps what it had done. Time spent waiting for a person does not count. Unset: none.",
    )
    job: Annotated[str, Field(pattern=SLUG.pattern)] | None = Field(
        default=None,
        description="The scheduled job this run is one of (set by the job's schedule, not by hand): no one "
        "is there to answer, so ask_person is never offered, and the run is listed under the job.",
    )
    approval_required: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Tool-name patterns (fnmatch) that need a person's approval.",
    )
    auto_approved: list[str] = Field(
        default_factory=lambda: list(READ_ONLY_BUILTINS),
        description="Tool-name patterns that run without asking; wins over approval_required. MCP: "
        "<server>-*.",
    )
    also_ask: list[str] = Field(
        default_factory=list,
        description="Tool-name patterns that ask in this run even when auto-approved: how a run's context "
        "asks "
        "for more approval than its assistant. Set per run, not on an assistant.",
    )
    mcp_servers: list[str] | None = Field(
        default=None,
        description="Which of the deployment's MCP servers (its MCP_CONFIG file) this workspace uses, by "
        "name; empty = all of them, [] = none.",
    )
    tools: list[str] | None = Field(
        default=None,
        description="Which tools this workspace offers, by name or pattern (fnmatch; MCP: <server>-*); unset "
        "= "
        "all. A tool not chosen is neither offered nor run. Set on the workspace's assistant, not per run.",
    )
    without_tools: list[str] = Field(
        default_factory=list,
        description="Tool-name patterns this run does not offer: how a run's context narrows its assistant's "
        "tools. Set per run, not on an assistant.",
    )
    only_tools: list[str] | None = Field(
        default=None,
        description="Tool-name patterns this run is limited to (a scheduled job's tools): narrows the "
        "workspace's tools, never widens them. Set per run, not on an assistant; unset: no limit.",
    )
    choose_tools: bool = Field(
        default=True,
        description="Offer each turn only the tools its message needs (C0): a tool that acts only when asked "
        "for in words. False offers every tool the workspace allows; approval applies either way.",
    )
    client_tools: ClientTools | None = Field(
        default=None,
        description="The client's own functions and tool_choice (an OpenAI client's tools): offered instead "
        "of the workspace's tools; a call of one is handed back to the client, never run on the server. Set "
        "per run, not on an assistant.",
    )
    response_format: ResponseFormat | None = Field(
        default=None,
        description="The reply's format (an OpenAI client's response_format: json_object or json_schema): "
        "the turn is a chat turn whose reply the model writes in it. Set per run, not on an assistant.",
    )
    memories_enabled: bool = Field(
        default=True, description="Use and extract long-term memories of the user in this workspace."
    )
    query_refusal_response: str = Field(
        default=QUERY_REFUSAL, description="Answer of query mode when no document context was found."
    )

    #: The deployment model's window, which no setting can exceed (``window``).
    _model_window: int | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _from_the_deployment(self) -> Self:
        """Fill the model fields nobody set from the deployment, then check what depends on the window."""
        settings = self.deployment if self.deployment is not None else model_settings()
        if self.model is DEPLOYMENT:
            self.model = settings.model
        if self.native_tool_calling is DEPLOYMENT:
            self.native_tool_calling = settings.native_tool_calling
        if self.context_window is DEPLOYMENT:
            self.context_window = settings.context_window
        self._model_window = settings.context_window
        if self.client_tools is not None and self.response_format is not None:
            raise ValueError(
                "context fields 'client_tools' and 'response_format' cannot be given together: a turn either "
                "hands calls of the client's tools back or answers in the format asked for"
            )
        if self.reply_reserve >= self.window:
            raise ValueError(
                f"context field 'reply_reserve' ({self.reply_reserve}) must be below the window "
                f"({self.window})"
            )
        return self

    documents = property(scope_of, doc="The key of the user's workspace in the documents tables.")

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


def parse_assignments(items: Iterable[str], schema: type[BaseModel] = Context) -> dict[str, Any]:
    """Read the command line's ``name=value`` settings: JSON values, plain text for text fields.

    Nothing is converted to fit: ``history_limit=abc`` stays a string, so ``Context`` names the field in its
    error instead of failing later, and a list is written as JSON (``auto_approved='["github-*"]'``).
    """
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
        field = schema.model_fields.get(name)
        if field is not None and _is_text(field.annotation) and not isinstance(value, str):
            value = raw  # a workspace named 2024 is the text "2024"
        values[name] = value
    return values


def _is_text(annotation: Any) -> bool:
    return annotation is str or getattr(annotation, "__origin__", None) is str


# The memory and ingest graphs' settings: the same checks as ``Context``, each error naming its field.


class MemoryContext(Settings):
    """Settings of one memory-extraction run (Studio shows these descriptions in the assistant panel)."""

    #: The model settings ``model`` defaults to when ``MEMORY_MODEL`` is unset, as on ``Context``.
    deployment: ClassVar[ModelSettings | None] = None

    workspace: str | None = Field(
        default=None, description="Only this workspace's chats; empty = every workspace."
    )
    user_id: str | None = Field(default=None, description="Only this user's chats; empty = every user.")
    min_chats: int = Field(
        default=5, ge=1, description="Unprocessed chats a user needs in a workspace before they are read."
    )
    idle_minutes: float = Field(
        default=20.0,
        ge=0,
        description="Minutes since the group's newest chat before it is read (still active otherwise); 0 = "
        "off.",
    )
    batch_size: int = Field(
        default=20, ge=1, description="Chats per observer call; a group is read in batches."
    )
    max_chars: int = Field(
        default=1500, ge=100, description="Characters kept of each prompt and each answer."
    )
    model: str = Field(
        default_factory=_deployments,
        description="Model at the OpenAI-compatible endpoint (OPENAI_BASE_URL); default MEMORY_MODEL, else "
        "the "
        "deployment's chat model (the embedded local model when no endpoint is set).",
    )

    @model_validator(mode="after")
    def _from_the_deployment(self) -> Self:
        if self.model is DEPLOYMENT:
            chosen = os.environ.get("MEMORY_MODEL")
            self.model = chosen or (self.deployment or model_settings()).model
        return self


class IngestContext(Settings):
    """Where documents go and how they are cut: the per-run context of the ``ingest`` graph."""

    workspace: Annotated[str, Field(pattern=WORKSPACE_REF.pattern)] = Field(
        default="default",
        description="Workspace slug the documents are added to and searched in; owner/slug for one shared "
        "with this user as a manager.",
    )
    user_id: Annotated[str, _TEXT] = Field(
        default=LOCAL_USER,
        description="Whose workspace it is; with API keys on, always the caller (the server sets it).",
    )
    chunk_size: int = Field(
        default=DEFAULT_CHUNK_SIZE, ge=1, description="Characters per chunk (RecursiveCharacterTextSplitter)."
    )
    chunk_overlap: int = Field(
        default=DEFAULT_CHUNK_OVERLAP, ge=0, description="Characters shared by neighbouring chunks."
    )
    batch_size: int = Field(
        default=DEFAULT_BATCH_SIZE, ge=1, description="Chunks per request to the embedding model."
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Self:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"context field 'chunk_overlap' must be from 0 up to chunk_size - 1 ({self.chunk_size - 1}), "
                f"got {self.chunk_overlap}"
            )
        return self

    documents = property(scope_of, doc="The key of the user's workspace in the documents tables.")
