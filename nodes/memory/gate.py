"""M1, step 2 — which groups are read now: enough chats, a user no longer active, memories enabled.

Chats that already passed these gates in an earlier run, and were left unmarked because a batch failed,
do not wait for ``min_chats`` again: the next run finishes them (the other gates still apply).

A group that fails a gate is left exactly as it is (nothing read, nothing marked) and is looked at again
by the next run, as in AnythingLLM, whose gates also sit outside its mark-everything ``finally``.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from ...core.context import MemoryContext
from ...core.state import Decision, MemoryState, Report, decision
from .rows import DONE, skipped_row


def _skip_reason(group: dict[str, Any], ctx: MemoryContext) -> str | None:
    if not group["enabled"]:
        return "memories are disabled in this workspace (memories_enabled is False)"
    if group["chats"] < ctx.min_chats and not group.get("admitted"):
        return f"only {group['chats']} unprocessed chat(s); {ctx.min_chats} needed"
    idle = group["idle_seconds"] / 60
    if ctx.idle_minutes and idle < ctx.idle_minutes:
        return f"still active: newest chat {idle:.1f} min old, {ctx.idle_minutes:g} min of quiet needed"
    return None


def gate_groups(state: MemoryState, runtime: Runtime[MemoryContext]) -> dict:
    """Split the groups into those read now and those left for a later run, with the reason for each."""
    ctx = runtime.context
    ready: list[dict[str, Any]] = []
    skipped: list[Report] = []
    notes: list[Decision] = []
    for group in state.get("groups") or []:
        who = {"user_id": group["user_id"], "workspace": group["workspace"]}
        reason = _skip_reason(group, ctx)
        if reason is None:
            ready.append(group)
            why = f"{group['chats']} chats, newest {group['idle_seconds'] / 60:.0f} min old: read them all"
            if group.get("admitted") and group["chats"] < ctx.min_chats:
                why = (
                    f"{group['admitted']} chat(s) left unmarked by a failed batch of an earlier run that "
                    f"had passed the gates: finish them (fewer than min_chats={ctx.min_chats} is no reason "
                    "to wait)"
                )
            notes.append(decision("M1", "code", {**who, "read": True}, why))
        else:
            skipped.append(skipped_row(group, reason))
            notes.append(decision("M1", "code", {**who, "read": False}, f"left for a later run: {reason}"))
    return {"ready": ready, "report": skipped, "decisions": notes}


def route_groups(state: MemoryState) -> list[Send] | Literal["__end__"]:
    """One ``process_group`` task per group that passed the gates; the groups run side by side."""
    ready = state.get("ready") or []
    return [Send("process_group", {"group": group}) for group in ready] if ready else DONE
