"""B4 — how much earlier conversation goes into the prompt."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, decision
from workspace_agent.skills.toolset import Services


async def load_history(
    state: AgentState, runtime: Runtime[Context], config: RunnableConfig, *, services: Services
) -> dict:
    """Load the newest ``history_limit`` exchanges of this thread, oldest first, in chat and agent mode.

    AnythingLLM's agent always starts from the newest 20 exchanges and reads 0 as 20; here the workspace
    setting holds in both modes and 0 means none. The exchanges come from the chat log, not from checkpointed
    state, so state stays bounded however long the thread grows.
    """
    ctx = runtime.context
    thread_id = str((config.get("configurable") or {}).get("thread_id", ""))
    rows = await services.records.recent_exchanges(ctx.workspace, ctx.user_id, thread_id, ctx.history_limit)
    history = [{"prompt": r.prompt, "response": r.response} for r in rows]
    why = (
        "history_limit is 0: no earlier conversation"
        if ctx.history_limit == 0
        else f"newest {len(history)} of at most {ctx.history_limit} exchanges of this thread, in order"
    )
    return {"history": history, "decisions": [decision("B4", "code", len(history), why)]}
