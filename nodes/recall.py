"""M2 — which memories go into the prompt: all the user's global ones and the workspace's most relevant five.

AnythingLLM's rule, kept: every global memory (at most 5) and, of the workspace's (at most 20), all when
there are five or fewer, else the five closest to the message by embedding, or the five newest when no
embedding model is available. trim puts them into the system prompt as "Things I remember about you". A
turn with ``memories_enabled`` off recalls nothing and records the opt-out, so the memory job skips the
workspace too.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from ..checkpoints.chatlog import PostgresRecords
from ..checkpoints.memories import (
    GLOBAL_LIMIT,
    INJECTED_WORKSPACE_LIMIT,
    Memory,
    PostgresMemories,
)
from ..core.context import Context
from ..core.conversation import turn_asked
from ..core.state import AgentState, decision
from ..providers.embeddings import embedding_id, get_embeddings
from .services import Services


def memory_source(services: Services) -> PostgresMemories | None:
    """The memories beside the chat log they are drawn from; none when that log lives in process memory.

    Memories are made by the memory job from the PostgreSQL chat log. A graph built with in-memory records
    (unit tests, no-I/O benchmarks) has no such log, so it has no memories and touches no database.
    """
    records = services.records
    return PostgresMemories(records.url) if isinstance(records, PostgresRecords) else None


async def _most_relevant(
    memories: PostgresMemories, local: list[Memory], text: str
) -> tuple[list[Memory], str]:
    """The workspace memories closest to ``text``, computing and keeping any vector still missing."""
    embeddings, space = await asyncio.to_thread(lambda: (get_embeddings(), embedding_id()))
    missing = await memories.missing_embeddings([m.id for m in local], space)
    if missing:
        vectors = await embeddings.aembed_documents([m.content for m in missing])
        await memories.set_embeddings({m.id: v for m, v in zip(missing, vectors, strict=True)}, space)
    query = await embeddings.aembed_query(text)
    order = await memories.nearest([m.id for m in local], query, space, INJECTED_WORKSPACE_LIMIT)
    by_id = {m.id: m for m in local}
    return [by_id[i] for i in order], f"the {len(order)} closest to the message of {len(local)} ({space})"


async def recall(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Pick the memories this turn's system prompt carries."""
    ctx = runtime.context
    memories = memory_source(services)
    if not ctx.memories_enabled:
        if memories is not None:
            await memories.opt_out(ctx.user_id, ctx.workspace)
        why = "memories_enabled is False in this workspace: none used, and the memory job skips it"
        return {"memories": [], "decisions": [decision("M2", "code", 0, why)]}
    if memories is None:
        why = "the chat log is kept in process memory: there are no long-term memories"
        return {"memories": [], "decisions": [decision("M2", "code", 0, why)]}

    rows = await memories.for_prompt(ctx.user_id, ctx.workspace)  # newest first
    global_ = [m for m in rows if m.scope == "global"][:GLOBAL_LIMIT]
    local = [m for m in rows if m.scope == "workspace"]
    if len(local) <= INJECTED_WORKSPACE_LIMIT:
        chosen, how = local, f"all {len(local)} of the workspace"
    else:
        text = turn_asked(state["messages"])
        try:
            chosen, how = await _most_relevant(memories, local, text)
        except Exception as exc:  # no embedding model, or it failed: recency, as AnythingLLM falls back to
            chosen = local[:INJECTED_WORKSPACE_LIMIT]
            how = (
                f"the {len(chosen)} newest of {len(local)}: no embedding model available "
                f"({type(exc).__name__}: {exc})"
            )
    outcome = {"global": len(global_), "workspace": len(chosen)}
    why = f"all {len(global_)} global memories of {ctx.user_id}; workspace memories: {how}"
    return {
        "memories": [m.content for m in global_ + chosen],
        "decisions": [decision("M2", "code", outcome, why)],
    }
