"""M1, step 4 — what in this batch is worth remembering: the observer model proposes up to three facts."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from ...core.context import MemoryContext
from ...core.conversation import message_text
from ...core.prompts import OBSERVER_PROMPT
from ...core.state import GroupState, decision
from ..services import MemoryServices
from .answers import MAX_OBSERVATIONS, Observations, parse_answer
from .rows import DONE, batch_failed


def render_chats(state: GroupState) -> str:
    """The batch as the observer reads it, oldest first."""
    group = state["group"]
    blocks = [
        f"--- conversation {i} ---\nUser: {c['prompt']}\nAssistant: {c['response']}"
        for i, c in enumerate(state.get("batch") or [], 1)  # read_batch wrote it: observe runs after it
    ]
    return f"Conversations in the workspace {group['workspace']!r}, oldest first:\n\n" + "\n\n".join(blocks)


async def observe(state: GroupState, runtime: Runtime[MemoryContext], *, services: MemoryServices) -> dict:
    """Ask the observer for candidate facts; a failure leaves the batch unmarked and ends the group's run.

    The group stops at a failed batch rather than reading on: its later chats may refine what the failed
    one says, and a model that just failed is likely to fail again. The next run resumes from that batch.
    """
    ctx = runtime.context
    try:
        model = services.chat_model(ctx)
        reply = await model.ainvoke([SystemMessage(OBSERVER_PROMPT), HumanMessage(render_chats(state))])
        answer = parse_answer(message_text(reply), Observations)
    except Exception as exc:  # the model's failure is this batch's outcome, never the run's end
        return batch_failed(state, f"observer: {type(exc).__name__}: {exc}")
    found = answer.observations[:MAX_OBSERVATIONS]
    candidates = [{"content": o.content.strip(), "confidence": o.confidence} for o in found]
    extra = len(answer.observations) - len(found)
    why = f"the observer found {len(candidates)} fact(s)" + (
        f"; {extra} beyond the 3 allowed ignored" if extra else ""
    )
    return {
        "candidates": candidates,
        "decisions": [decision("M1", "model", [c["content"] for c in candidates], why)],
    }


def route_after_observe(state: GroupState) -> Literal["reflect", "store", "__end__"]:
    """Candidates go to the reflector; none means the batch is read and only needs marking; failure ends."""
    if state.get("error"):
        return DONE
    return "reflect" if state.get("candidates") else "store"
