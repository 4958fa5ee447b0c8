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
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langchain_core.messages.tool import ToolCall
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import Messages, add_messages
from typing_extensions import TypedDict

#: Updates of ``messages`` between two full copies of it in the checkpoints (about five per turn).
MESSAGES_SNAPSHOT_EVERY = 50


def add_message_batches(messages: list[AnyMessage], batches: Sequence[Messages]) -> list[AnyMessage]:
    """``add_messages`` over a batch of updates, one after the other: the reducer of the ``messages`` channel.

    Its channel is a ``DeltaChannel``: a checkpoint stores only each step's new messages (and a full copy
    every ``MESSAGES_SNAPSHOT_EVERY`` updates), so the earlier exchanges a thread shows are not written
    again at every step of every turn.
    """
    for batch in batches:
        messages = add_messages(messages, batch)  # type: ignore[assignment]
    return messages


Conversation = Annotated[
    list[AnyMessage], DeltaChannel(add_message_batches, snapshot_frequency=MESSAGES_SNAPSHOT_EVERY)
]
Route = Literal["chat", "agent"]
StopReason = Literal["answered", "terminated", "max_tokens", "max_tool_calls", "refused"]


class Decision(TypedDict):
    """One taken decision of the decision map (DESIGN §1), as Studio and the tests read it."""

    id: str
    decided_by: Literal["code", "model", "person", "policy"]
    outcome: Any
    why: str


class InputState(TypedDict):
    """What a client sends: the new user message."""

    messages: Conversation


class OutputState(TypedDict, total=False):
    """What a client reads back after a turn."""

    messages: Conversation
    route: Route | None
    sources: Annotated[list[dict[str, Any]], operator.add]
    stop_reason: StopReason | None
    decisions: Annotated[list[Decision], operator.add]
    uploads: list[dict[str, Any]]


class AgentState(OutputState, total=False):
    """The whole working state of a turn: the bounded conversation and the running turn's working parts."""

    query_only: bool
    context: list[str]
    memories: list[str]
    plan: dict[str, Any]
    approved: list[ToolCall]
    tool_calls_made: Annotated[int, operator.add]


class ToolCallState(TypedDict):
    """The input of one ``execute_tool`` task: one approved call, sent by ``route_tool_calls``."""

    call: ToolCall


def decision(id: str, decided_by: str, outcome: Any, why: str) -> Decision:
    """One record of the decision trace."""
    return {"id": id, "decided_by": decided_by, "outcome": outcome, "why": why}  # type: ignore[typeddict-item]
