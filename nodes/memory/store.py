"""M1, step 6 — when chats count as processed: together with their memories, in one transaction.

This is the fix of AnythingLLM's fault: there, a group is marked processed in a ``finally`` whatever
happened, read or not. Here a batch's chats are marked by the same transaction that stores what was drawn
from them, and only those chats: a crash before it commits leaves neither.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from ...checkpoints.memories import Change
from ...core.context import MemoryContext
from ...core.state import GroupState, decision
from ..services import MemoryServices
from .rows import DONE, batch_failed, batch_row


async def store(state: GroupState, runtime: Runtime[MemoryContext], *, services: MemoryServices) -> dict:
    """Store the batch's memories (limits and duplicates enforced) and mark exactly its chats."""
    group, batch_no = state["group"], state.get("batch_no", 0)  # as ``batch_row`` reads them
    ids = [c["id"] for c in state.get("batch") or []]
    try:
        applied = await services.memories.apply(
            group["user_id"], group["workspace"], [Change(**c) for c in state.get("changes") or []], ids
        )
    except Exception as exc:  # rolled back: nothing stored, nothing marked
        return batch_failed(state, f"store: {type(exc).__name__}: {exc}")
    stored = applied.created + applied.updated
    why = f"{stored} memor{'y' if stored == 1 else 'ies'} stored; the {applied.marked} chats read are marked"
    if applied.dropped:
        why += f"; {len(applied.dropped)} proposal(s) dropped ({'; '.join(applied.dropped)})"
    return {
        "report": [batch_row(state, stored=stored, marked=applied.marked, dropped=applied.dropped)],
        "decisions": [decision("M1", "code", {"batch": batch_no, "marked": applied.marked}, why)],
    }


def route_after_store(state: GroupState) -> Literal["read_batch", "__end__"]:
    """Read on until none is left (``read_batch`` finds nothing); a failure ends the group's run."""
    return DONE if state.get("error") else "read_batch"
