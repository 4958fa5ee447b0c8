"""B8 — which document chunks go into the prompt; and query mode's refusal without context."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from workspace_agent.checkpoints.chunks import Document
from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, decision
from workspace_agent.nodes.trim import FRAME, SYSTEM_SHARE, render_system
from workspace_agent.providers.tokens import count, ensure_tokenizer, message_text
from workspace_agent.skills.documents import (
    chunk_context,
    chunk_source,
    metadata_header,
    pinned_context,
    pinned_source,
    search,
)
from workspace_agent.skills.toolset import Services


def _fit_pins(pinned: list[Document], budget: int) -> tuple[list[Document], list[Document]]:
    """Pinned documents, oldest first, while they fit the context share; the rest are left out, not cut.

    A document's size was counted when it was ingested, so a turn never tokenizes whole documents.
    """
    kept, left_out, used = [], [], 0
    for doc in pinned:
        size = doc.tokens + count(metadata_header(doc.title, doc.source))
        if used + size <= budget:
            kept.append(doc)
            used += size
        else:
            left_out.append(doc)
    return kept, left_out


async def retrieve(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Gather the workspace's document context for this turn; in query mode, refuse when there is none.

    Pinned documents go in whole first, as long as they fit the system-and-context share of the window
    (15 %, less the system prompt), and their chunks are never searched. In chat and query mode the
    ``top_n`` nearest chunks follow, those below ``similarity_threshold`` dropped. In agent mode only the
    pins go in: the model searches through ``search_documents``, which applies the same rules. A workspace
    without documents, or without an embedding model, leaves chat without context — and says so.
    """
    ctx = runtime.context
    store = services.documents
    query = next((message_text(m) for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), "")
    context: list[str] = []
    sources: list[dict] = []
    outcome: dict = {"pinned": [], "chunks": 0}
    if await store.space(ctx.workspace) is None:
        notes = [f"workspace {ctx.workspace!r} has no documents: no context"]
    else:
        await ensure_tokenizer()
        budget = max(int(ctx.window * SYSTEM_SHARE) - count(render_system(ctx, [])) - FRAME, 0)
        pins, left_out = _fit_pins(await store.pinned_documents(ctx.workspace), budget)
        context += [pinned_context(d) for d in pins]
        sources += [pinned_source(d) for d in pins]
        outcome["pinned"] = [d.title for d in pins]
        notes = [f"{len(pins)} pinned document(s) in whole"]
        if left_out:
            outcome["pinned_left_out"] = [d.title for d in left_out]
            titles = ", ".join(repr(d.title) for d in left_out)
            notes.append(f"pinned {titles} left out: over the {budget}-token context share")
        if state.get("route") == "agent":
            notes.append("agent mode: the model searches through search_documents")
        else:
            found = await search(
                store, ctx.workspace, query, top_n=ctx.top_n, threshold=ctx.similarity_threshold
            )
            context += [chunk_context(h) for h in found.hits]
            sources += [chunk_source(h) for h in found.hits]
            outcome |= {"chunks": len(found.hits), "below_threshold": len(found.dropped)}
            threshold = ctx.similarity_threshold
            kept = f"{len(found.hits)} of the top {ctx.top_n} chunks at similarity ≥ {threshold:g}"
            notes.append(found.problem or kept)
    why = "; ".join(notes)
    out: dict = {"context": context, "sources": sources}
    if state.get("query_only") and not context:
        out["messages"] = [AIMessage(content=ctx.query_refusal_response)]
        out["stop_reason"] = "refused"
        out["sources"] = []
        out["decisions"] = [decision("B8", "code", "refused", f"query mode and no document context: {why}")]
    else:
        out["decisions"] = [decision("B8", "code", outcome, why)]
    return out
