"""The state of one agent thread, turn by turn.

``messages`` is what a client shows and what the model is given: the newest ``history_limit`` earlier
exchanges (each the user message as typed and its final answer), then the running turn in full. ``route``
folds the previous turn in at the start of each turn, so state stays bounded and the cost of a turn, in
time and in checkpoint bytes, does not grow with the thread. A fork from an earlier checkpoint carries the
conversation as it was there. Earlier turns' tool calls and decisions stay in the checkpoint history.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, Literal, NotRequired, Required, cast

from langchain_core.messages import AnyMessage
from langchain_core.messages.tool import ToolCall
from langgraph.channels.delta import DeltaChannel
from langgraph.config import get_config
from langgraph.graph.message import Messages, add_messages
from typing_extensions import TypedDict

from .plan import Plan

#: Updates of ``messages`` between two full copies of it in the checkpoints (about five per turn).
MESSAGES_SNAPSHOT_EVERY = 50


def add_message_batches(messages: list[AnyMessage], batches: Sequence[Messages]) -> list[AnyMessage]:
    """``add_messages`` over a batch of updates, one after the other: the reducer of the ``messages`` channel.

    Its channel is a ``DeltaChannel``: a checkpoint stores only each step's new messages (and a full copy
    every ``MESSAGES_SNAPSHOT_EVERY`` updates), so the earlier exchanges a thread shows are not written
    again at every step of every turn.
    """
    merged: Messages = messages  # type: ignore[assignment]  # list is invariant; the reducer takes any message
    for batch in batches:
        merged = add_messages(merged, batch)
    return cast(list[AnyMessage], merged)


Conversation = Annotated[
    list[AnyMessage], DeltaChannel(add_message_batches, snapshot_frequency=MESSAGES_SNAPSHOT_EVERY)
]
Route = Literal["chat", "agent"]
StopReason = Literal[
    "answered", "terminated", "max_tokens", "max_tool_calls", "refused", "tool_calls", "timed_out"
]


class Decision(TypedDict):
    """One taken decision of the decision map (DESIGN §1), as Studio and the tests read it."""

    id: str
    decided_by: Literal["code", "model", "person", "policy"]
    outcome: Any
    why: str


def _citation(source: dict[str, Any]) -> tuple[Any, ...]:
    return (source.get("document"), source.get("chunk"), source.get("text"))


def cited(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's citations, each passage once.

    A chunk ``retrieve`` gave and ``search_documents`` found again is one source, listed where it was first.
    """
    seen = {_citation(s) for s in left}
    out = list(left)
    for source in right:
        if _citation(source) not in seen:
            seen.add(_citation(source))
            out.append(source)
    return out


class InputState(TypedDict):
    """What a client sends: the new user message."""

    messages: Conversation


class _OutputMessages(TypedDict, total=False):
    """The conversation as the output schema publishes it: optional, as clients have always been told."""

    messages: Conversation


class _TurnOutcome(TypedDict, total=False):
    """What a turn adds to the conversation for a client to read: how it went and what it drew on."""

    route: Route | None
    sources: Annotated[list[dict[str, Any]], cited]
    stop_reason: StopReason | None
    decisions: Annotated[list[Decision], operator.add]
    uploads: list[dict[str, Any]]


class OutputState(_OutputMessages, _TurnOutcome, total=False):
    """What a client reads back after a turn."""


class AgentState(InputState, _TurnOutcome, total=False):
    """The whole working state of a turn: the bounded conversation and the running turn's working parts.

    ``messages`` is required (from ``InputState``): every run's input carries it and its channel keeps it,
    so every node finds it. The rest may be missing before ``route``, which resets the turn's keys (``plan``
    to ``{}``, the plan of no model call) as a turn starts.
    """

    query_only: bool
    context: list[str]
    memories: list[str]
    plan: Plan
    approved: list[ToolCall]
    #: The turn's tools by name (C0); ``None`` offers every tool the workspace allows.
    offered: list[str] | None
    tool_calls_made: Annotated[int, operator.add]
    #: When the run must stop working (epoch seconds; ``Context.time_limit``); ``None`` for no limit.
    deadline: float | None


class ToolCallState(TypedDict):
    """The input of one ``execute_tool`` task: one approved call, sent by ``route_tool_calls``."""

    call: ToolCall
    #: The run's ``deadline``, which bounds the call as ``tool_timeout`` does.
    deadline: NotRequired[float | None]


def decision(id: str, decided_by: str, outcome: Any, why: str) -> Decision:
    """One record of the decision trace."""
    return {"id": id, "decided_by": decided_by, "outcome": outcome, "why": why}  # type: ignore[typeddict-item]


# The memory graph. A run's state is a report: one row per group left alone and per batch handled, saying
# what was read, stored and marked, and why anything was not. Each group is processed by its own subgraph
# (``GroupState``), so groups run side by side and each walks through its batches oldest first.


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
    """One group's walk through its batches; ``batch`` is the chats of the current batch only.

    ``group`` is required: it is the subgraph's input (``GroupInput``). The batch's keys are written by
    ``read_batch``, so only the nodes after it may count on them.
    """

    group: Required[dict[str, Any]]
    batch_no: int
    batch: list[dict[str, Any]]
    cursor: list[Any] | None
    candidates: list[dict[str, str]]
    changes: list[dict[str, Any]]
    error: str | None


# The ingest graph: paths in; what was added, kept, replaced or failed out.


class IngestInput(TypedDict):
    """Files or folders to add to the workspace (folders are searched recursively)."""

    paths: list[str]


class IngestOutput(TypedDict, total=False):
    """What the run did, one entry per file; ``failed`` entries carry the reason."""

    added: Annotated[list[dict[str, Any]], operator.add]
    unchanged: Annotated[list[dict[str, Any]], operator.add]
    replaced: Annotated[list[dict[str, Any]], operator.add]
    failed: Annotated[list[dict[str, Any]], operator.add]
    decisions: Annotated[list[Decision], operator.add]


class IngestState(IngestInput, IngestOutput, total=False):
    """The working state of one ingest run."""

    files: list[str]


class FileTask(TypedDict):
    """The input of one ``index_file`` task, sent by ``route_files``."""

    path: str


#: The configurable key naming the checkpoint a run forked (``graphs/forks.py`` sets it, never a caller).
FORK_KEY = "workspace_agent_fork_of"


def fork_of() -> str | None:
    """The checkpoint this run forked, inside a node; ``None`` on a thread's own line."""
    try:
        return (get_config().get("configurable") or {}).get(FORK_KEY)
    except RuntimeError:  # called outside a run
        return None
