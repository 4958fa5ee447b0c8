"""M1, step 1 — which chats are candidates: every unprocessed, included chat, by user and workspace."""

from __future__ import annotations

from dataclasses import asdict

from langgraph.runtime import Runtime

from ...core.context import MemoryContext
from ...core.state import MemoryState, decision
from ..services import MemoryServices


async def select_chats(
    state: MemoryState, runtime: Runtime[MemoryContext], *, services: MemoryServices
) -> dict:
    """Find the groups with chats not yet read for memories.

    Only the per-group summary is loaded here (count, newest, highest id); the chats themselves are read
    batch by batch, so a large backlog never sits in state at once. Excluded chats (refusals) are never
    candidates; chats already processed are never read again.
    """
    ctx = runtime.context
    groups = await services.memories.pending_groups(ctx.workspace, ctx.user_id)
    scope = " and ".join(
        f"{name} {value!r}" for name, value in (("workspace", ctx.workspace), ("user", ctx.user_id)) if value
    )
    why = f"unprocessed, included chats{' of ' + scope if scope else ''}, grouped by user and workspace"
    outcome = {"groups": len(groups), "chats": sum(g.chats for g in groups)}
    return {"groups": [asdict(g) for g in groups], "decisions": [decision("M1", "code", outcome, why)]}
