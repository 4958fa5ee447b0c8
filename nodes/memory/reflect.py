"""M1, step 5 — which candidates become memories: the reflector sorts, deduplicates, creates or updates."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from ...checkpoints.memories import GLOBAL_LIMIT, WORKSPACE_LIMIT, Memory
from ...core.context import MemoryContext
from ...core.conversation import message_text
from ...core.prompts import REFLECTOR_PROMPT
from ...core.state import GroupState, decision
from ..services import MemoryServices
from .answers import Proposals, parse_answer
from .rows import DONE, batch_failed


def _listing(title: str, memories: list[Memory], limit: int) -> str:
    free = max(limit - len(memories), 0)
    head = f"{title} ({len(memories)} of {limit}; {free} free" + ("" if free else ": create none") + ")"
    return head + ":\n" + ("\n".join(f"- [id {m.id}] {m.content}" for m in memories) or "- (none)")


def render_request(state: GroupState, known: list[Memory]) -> str:
    """Candidates and the kept memories, as the reflector reads them."""
    group = state["group"]
    candidates = "\n".join(f"- ({c['confidence']}) {c['content']}" for c in state.get("candidates") or [])
    return "\n\n".join(
        [
            f"Workspace: {group['workspace']!r}",
            f"Candidate facts:\n{candidates}",
            _listing("Global memories", [m for m in known if m.scope == "global"], GLOBAL_LIMIT),
            _listing("Workspace memories", [m for m in known if m.scope == "workspace"], WORKSPACE_LIMIT),
        ]
    )


async def reflect(state: GroupState, runtime: Runtime[MemoryContext], *, services: MemoryServices) -> dict:
    """Ask the reflector what to create or update; a failure leaves the batch unmarked and ends the group."""
    ctx = runtime.context
    group = state["group"]
    try:
        known = await services.memories.known(group["user_id"], group["workspace"])
        model = services.chat_model(ctx)
        reply = await model.ainvoke(
            [SystemMessage(REFLECTOR_PROMPT), HumanMessage(render_request(state, known))]
        )
        answer = parse_answer(message_text(reply), Proposals)
    except Exception as exc:  # the model's failure is this batch's outcome, never the run's end
        return batch_failed(state, f"reflector: {type(exc).__name__}: {exc}")
    changes = [
        {"action": p.action, "scope": p.scope, "content": p.content.strip(), "update_id": p.update_id}
        for p in answer.memories
        if p.action != "skip"
    ]
    candidates = state.get("candidates") or []  # observe's: reflect runs only when it found some
    why = f"the reflector proposed {len(changes)} change(s) from {len(candidates)} candidate(s)"
    return {"changes": changes, "decisions": [decision("M1", "model", changes, why)]}


def route_after_reflect(state: GroupState) -> Literal["store", "__end__"]:
    """Proposals (even none) are stored with the batch's marking; a failure ends the group's run."""
    return DONE if state.get("error") else "store"
