"""B4 — how much earlier conversation goes into the prompt.

The history is read from the thread's ``messages`` in the checkpoint, never from the chat log by thread id,
so a fork or a replay from an earlier checkpoint gives the model the conversation as it was there, not later
turns of another branch. How that conversation is read and folded is ``core.conversation``.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from ..core.context import Context
from ..core.conversation import conversation
from ..core.state import AgentState, decision


async def load_history(state: AgentState, runtime: Runtime[Context]) -> dict:
    """Give the model the newest ``history_limit`` exchanges of this thread, oldest first, in both modes.

    AnythingLLM's agent always starts from the newest 20 exchanges and reads 0 as 20; here the workspace
    setting holds in both modes and 0 means none. ``route`` already folded the thread to that many
    exchanges, so what the model is given is what the thread shows, refusals aside.
    """
    ctx = runtime.context
    history, _ = conversation(state["messages"], ctx.history_limit)
    why = (
        "history_limit is 0: no earlier conversation"
        if ctx.history_limit == 0
        else f"newest {len(history)} of at most {ctx.history_limit} exchanges of the thread's state, in order"
    )
    return {"decisions": [decision("B4", "code", len(history), why)]}
