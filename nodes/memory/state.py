"""State, settings and services of the memory graph.

The run's state is a report: one row per group left alone and per batch handled, saying what was read,
stored and marked, and why anything was not. A group is processed by its own subgraph (``GroupState``), so
groups run side by side and each walks through its batches oldest first.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from typing_extensions import TypedDict  # pydantic (Studio's schemas) needs it before Python 3.12

from ...checkpoints.memories import PostgresMemories
from ...graphs.state import Decision, decision
from ...providers.chat.endpoint import model_settings
from ...providers.chat.models import chat_model


def _meta(description: str) -> dict[str, str]:
    return {"description": description}


@dataclass(kw_only=True)
class MemoryContext:
    """Settings of one memory-extraction run (Studio shows these descriptions in the assistant panel)."""

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
        default_factory=lambda: os.environ.get("MEMORY_MODEL") or model_settings().model,
        metadata=_meta(
            "Model at the OpenAI-compatible endpoint (OPENAI_BASE_URL); default MEMORY_MODEL, else the "
            "deployment's chat model (the embedded local model when no endpoint is set)."
        ),
    )

    def __post_init__(self) -> None:
        if self.min_chats < 1:
            raise ValueError(f"min_chats must be at least 1, got {self.min_chats}")
        if self.idle_minutes < 0:
            raise ValueError(f"idle_minutes must be 0 or more, got {self.idle_minutes}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.max_chars < 100:
            raise ValueError(f"max_chars must be at least 100, got {self.max_chars}")


class NoModel(RuntimeError):
    """No model is configured for the memory job."""


@dataclass
class MemoryServices:
    """What the memory nodes use besides state and context: the memories table and, optionally, a model."""

    memories: PostgresMemories
    model: BaseChatModel | None = None

    def chat_model(self, ctx: MemoryContext) -> BaseChatModel:
        """The program's model if it brought one, else ``ctx.model`` at the OpenAI-compatible endpoint."""
        if self.model is not None:
            return self.model
        if not ctx.model:
            raise NoModel("no model configured: set MEMORY_MODEL or CHAT_MODEL, or the run's model")
        return chat_model(ctx.model)  # no endpoint set: the embedded local model, as for the agent


class Report(TypedDict, total=False):
    """One row of a run's report: a group left alone (``skipped``), or one batch of a group."""

    user_id: str
    workspace: str
    batch: int | None
    chat_ids: list[int]
    read: int
    stored: int
    marked: int
    dropped: list[str]
    skipped: str | None
    error: str | None


class MemoryInput(TypedDict, total=False):
    """A run takes no input: what it reads is the chat log, and its settings are the context."""


class MemoryOutput(TypedDict, total=False):
    """What a run reports: a row per group skipped and per batch, and the decision trace."""

    report: Annotated[list[Report], operator.add]
    decisions: Annotated[list[Decision], operator.add]


class MemoryState(MemoryOutput, total=False):
    """The whole run: the groups found and those that passed the gates."""

    groups: list[dict[str, Any]]
    ready: list[dict[str, Any]]


class GroupInput(TypedDict):
    """One group to process, sent by ``route_groups``."""

    group: dict[str, Any]


class GroupState(MemoryOutput, total=False):
    """One group's walk through its batches; ``batch`` is the chats of the current batch only."""

    group: dict[str, Any]
    batch_no: int
    batch: list[dict[str, Any]]
    cursor: list[Any] | None
    candidates: list[dict[str, str]]
    changes: list[dict[str, Any]]
    error: str | None


def batch_row(state: GroupState, **values: Any) -> Report:
    """A report row for the current batch of a group."""
    group, batch = state["group"], state.get("batch") or []
    row: Report = {
        "user_id": group["user_id"],
        "workspace": group["workspace"],
        "batch": state.get("batch_no", 0),
        "chat_ids": [c["id"] for c in batch],
        "read": len(batch),
        "stored": 0,
        "marked": 0,
        "dropped": [],
        "skipped": None,
        "error": None,
    }
    row.update(values)  # type: ignore[typeddict-item]
    return row


def batch_failed(state: GroupState, error: str) -> dict[str, Any]:
    """The update of a step whose model call failed: the batch stays unmarked and the run reports why."""
    return {
        "error": error,
        "report": [batch_row(state, error=error)],
        "decisions": [decision("M1", "code", {"batch": state["batch_no"], "marked": 0}, error)],
    }
