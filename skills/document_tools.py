"""The agent's two document tools: ``search_documents`` (read-only) and ``save_to_workspace`` (asks first).

Both act for the workspace they were built for, never one the model names, and search with the running
turn's retrieval settings, so the agent's search honours the same threshold and pins as the ``retrieve`` node.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import get_runtime

from ..checkpoints.chunks import DocumentStore
from ..core.context import Context
from ..core.prompts import SEARCH_HEAD, SEARCH_HIT
from .documents import NO_CONTEXT, Found, chunk_source, index_document, linear_tables, search
from .loaders import content_hash


def live_settings() -> Context:
    """The running turn's workspace settings, or the defaults when called outside a graph."""
    try:
        runtime = get_runtime(Context)
    except RuntimeError:
        return Context()
    ctx = getattr(runtime, "context", None)
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, dict):
        return Context(**{k: v for k, v in ctx.items() if k in Context.model_fields})
    return Context()


def _format_hits(query: str, found: Found, threshold: float) -> str:
    if not found.hits:
        below = f" ({len(found.dropped)} passage(s) fell below the similarity threshold {threshold:g})"
        return NO_CONTEXT + (below if found.dropped else "")
    parts = [SEARCH_HEAD.format(query=query)]
    for i, hit in enumerate(found.hits, 1):
        label = SEARCH_HIT.format(index=i, title=hit.title, similarity=hit.similarity)
        parts.append(f"{label}\n{linear_tables(hit.text)}")
    return "\n\n".join(parts)


#: The tools that change a workspace's documents: its owner's and managers' only, never a member's.
DOCUMENT_WRITERS = frozenset({"save_to_workspace"})


def document_tools(workspace: str, store: DocumentStore | None = None) -> list[BaseTool]:
    """``search_documents`` (read-only) and ``save_to_workspace`` (writes, so it asks) for a workspace."""
    store = store or DocumentStore()

    async def search_documents(query: str) -> tuple[str, dict[str, Any]]:
        """Search this workspace's documents for passages relevant to the query; returns them with titles.

        Pinned documents are already in your context and are not searched again.
        """
        ctx = live_settings()
        found = await search(
            store, workspace, query, top_n=ctx.top_n, threshold=ctx.similarity_threshold, mode=ctx.search_mode
        )
        if found.problem:
            return f"{NO_CONTEXT} ({found.problem})", {"sources": []}
        text = _format_hits(query, found, ctx.similarity_threshold)
        return text, {"sources": [chunk_source(h) for h in found.hits]}

    async def save_to_workspace(text: str, title: str) -> str:
        """Save text as a new document of this workspace, so that search_documents finds it later."""
        if not text.strip():
            raise ValueError("there is no text to save")
        title = title.strip() or "Saved note"
        digest = content_hash(text.encode())
        source = f"saved:{digest[:16]}"
        existing = await store.get_document(workspace, source)
        if existing is not None:
            return f"This text is already in the workspace as {existing.title!r} (document {existing.id})."
        doc, _ = await index_document(store, workspace, source=source, title=title, text=text, digest=digest)
        return f"Saved {title!r} to the workspace as document {doc.id} ({doc.chunks} chunk(s))."

    return [
        StructuredTool.from_function(
            coroutine=search_documents, name="search_documents", response_format="content_and_artifact"
        ),
        StructuredTool.from_function(coroutine=save_to_workspace, name="save_to_workspace"),
    ]
