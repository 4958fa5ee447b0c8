"""M1, step 3 — which chats go into the next batch: the group's oldest unread ones, at most ``batch_size``.

AnythingLLM reads only the newest 20 chats of a group and marks the older unprocessed ones without reading
them. Here the group is read oldest first in batches until none is left, so every chat is read exactly
once before it is marked.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from ...core.context import MemoryContext
from ...core.state import GroupState, decision
from ..services import MemoryServices
from .rows import DONE


def cap(text: str, limit: int) -> str:
    """Keep the start of an over-long message, saying that it was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def read_batch(state: GroupState, runtime: Runtime[MemoryContext], *, services: MemoryServices) -> dict:
    """Read the next batch of the group, each prompt and answer cut to ``max_chars``.

    Before the first batch, the group's chats are recorded as admitted (they passed the gates), so chats a
    failed batch leaves unmarked are finished by the next run however few they are.
    """
    ctx = runtime.context
    group = state["group"]
    if not state.get("batch_no"):  # the group passed the gates: remember it, in case a batch fails
        await services.memories.admit(group["user_id"], group["workspace"], group["max_id"])
    cursor = state.get("cursor")  # a tuple written to the checkpoint reads back as a list
    after = (str(cursor[0]), int(cursor[1])) if cursor else None
    chats = await services.memories.read_batch(
        group["user_id"], group["workspace"], group["max_id"], after, ctx.batch_size
    )
    if not chats:
        return {"batch": []}
    last = chats[-1]
    batch_no = state.get("batch_no", 0) + 1
    why = (
        f"the oldest {len(chats)} unread chat(s) of {group['user_id']} in {group['workspace']}, "
        f"each message cut to {ctx.max_chars} characters"
    )
    return {
        "batch": [
            {
                "id": c.id,
                "prompt": cap(c.prompt, ctx.max_chars),
                "response": cap(c.response, ctx.max_chars),
            }
            for c in chats
        ],
        "batch_no": batch_no,
        "cursor": [last.created_at.isoformat(), last.id],
        "candidates": [],
        "changes": [],
        "error": None,
        "decisions": [decision("M1", "code", {"batch": batch_no, "chats": [c.id for c in chats]}, why)],
    }


def route_after_read(state: GroupState) -> Literal["observe", "__end__"]:
    """A batch goes to the observer; when nothing is left the group is done."""
    return "observe" if state.get("batch") else DONE
