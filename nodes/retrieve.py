"""B8 — which document chunks go into the prompt; and query mode's refusal without context."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from ..checkpoints.chunks import ChunkHit, Document, DocumentStore
from ..core.context import Context
from ..core.conversation import turn_asked
from ..core.plan import FRAME, SYSTEM_SHARE, render_system
from ..core.state import AgentState, decision
from ..providers.tokens import count, cut_middle, ensure_tokenizer
from ..skills.documents import (
    chunk_context,
    chunk_source,
    metadata_header,
    pinned_context,
    pinned_source,
    search,
)
from .services import Services

#: Outcomes of ``ingest_uploads`` that leave the dropped file among the workspace's documents.
IN_WORKSPACE = ("added", "replaced", "unchanged")
#: Characters kept at each end of an upload too large for the share before it is cut to tokens: no token
#: is this long, and a large file is never tokenized whole in a turn.
CHARS_PER_TOKEN_MAX = 8
#: Fewest tokens of an upload worth sending cut; below that it is left out (and its chunks searched).
MIN_CUT = 64


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


def _cut_upload(doc: Document, budget: int) -> str:
    """An upload larger than what is left of the share: its opening and its end, the middle cut out.

    The same cut ``trim`` would make of an over-share context, made here so the thread's state does not
    carry a large file only for ``trim`` to drop most of it.
    """
    header = metadata_header(doc.title, doc.source)
    text, span = doc.content or "", budget * CHARS_PER_TOKEN_MAX
    if len(text) > 2 * span:
        text = text[:span] + text[-span:]
    return header + cut_middle(text, budget - count(header))


def _fit_uploads(uploads: list[Document], budget: int) -> tuple[dict[int, str], dict[int, str], int]:
    """Uploads of this message go first in the share: whole when they fit, else cut to what is left.

    Returns the context text of each upload sent and how each was sent (``whole`` / ``cut`` /
    ``left_out``), both by document id, and the budget left for pins.
    """
    texts: dict[int, str] = {}
    how: dict[int, str] = {}
    for doc in uploads:
        header = count(metadata_header(doc.title, doc.source))
        if doc.tokens + header <= budget:
            texts[doc.id] = pinned_context(doc)
            how[doc.id], budget = "whole", budget - doc.tokens - header
        elif budget - header >= MIN_CUT:
            texts[doc.id] = _cut_upload(doc, budget)
            how[doc.id], budget = "cut", 0
        else:
            how[doc.id] = "left_out"
    return texts, how, budget


def upload_source(doc: Document) -> dict[str, Any]:
    """The citation of a document dropped into this message: like a pin's, marked as this turn's upload."""
    return {**{k: v for k, v in pinned_source(doc).items() if k != "pinned"}, "uploaded": True}


def _not_sent(hits: list[ChunkHit], whole: set[int], sent: list[str]) -> list[ChunkHit]:
    """Search hits not already in the prompt: not of an upload sent whole, not inside a cut upload's text."""
    return [h for h in hits if h.document_id not in whole and not any(h.text in s for s in sent)]


async def _uploads(state: AgentState, store: DocumentStore, workspace: str) -> list[Document]:
    """The documents this message dropped into the chat (``route`` empties ``uploads`` at each turn)."""
    ids = [u["document_id"] for u in state.get("uploads") or [] if u.get("outcome") in IN_WORKSPACE]
    return await store.documents_with_content(workspace, ids) if ids else []


async def retrieve(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Gather the workspace's document context for this turn; in query mode, refuse when there is none.

    Documents dropped into this message come first, whole when they fit the system-and-context share of the
    window (15 %, less the system prompt), else cut in the middle to what is left: "summarise this" names
    no word of the file, so a similarity search would miss the very document the person is asking about
    (AnythingLLM attaches a dropped file to the prompt directly). Pinned documents follow in whole while
    they fit; the chunks of both are never searched, so nothing is sent twice. The ``top_n`` nearest chunks
    follow, those below ``similarity_threshold`` dropped, in every mode. The agent gets them too, unlike
    AnythingLLM's (which sees only pins and must call its search tool): asked "what do 4 Business plans
    cost?", the 1.5B went on from its own guess without searching in 6 of the 8 document tasks of
    ``bench/chains.py``, and naming the documents in ``search_documents``' description changed nothing (2 of
    the 4 tuning tasks searched, with it and without). The threshold keeps a
    question about something else free of them (the sample's document questions score 0.44-0.68, its
    arithmetic, clock and greetings 0.22 at most), and the model can still search for more.
    A workspace without documents, or without an embedding model, leaves chat without context — and says so.
    """
    ctx = runtime.context
    store = services.documents
    query = turn_asked(state["messages"])
    context: list[str] = []
    sources: list[dict] = []
    outcome: dict = {"pinned": [], "chunks": 0}
    if await store.space(ctx.documents) is None:
        notes = [f"workspace {ctx.workspace!r} has no documents: no context"]
    else:
        await ensure_tokenizer()
        budget = max(int(ctx.window * SYSTEM_SHARE) - count(render_system(ctx)) - FRAME, 0)
        uploads = await _uploads(state, store, ctx.documents)
        sent, how, budget = _fit_uploads(uploads, budget)
        context += list(sent.values())
        sources += [upload_source(d) for d in uploads if how[d.id] != "left_out"]
        notes = []
        if uploads:
            outcome["uploaded"] = {d.title: how[d.id] for d in uploads}
            notes.append(
                "dropped into this message, so sent as the pinned are: "
                + ", ".join(f"{d.title!r} {how[d.id].replace('_', ' ')}" for d in uploads)
            )
        pinned = [d for d in await store.pinned_documents(ctx.documents) if d.id not in how]
        pins, left_out = _fit_pins(pinned, budget)
        context += [pinned_context(d) for d in pins]
        sources += [pinned_source(d) for d in pins]
        outcome["pinned"] = [d.title for d in pins]
        notes.append(f"{len(pins)} pinned document(s) in whole")
        if left_out:
            outcome["pinned_left_out"] = [d.title for d in left_out]
            titles = ", ".join(repr(d.title) for d in left_out)
            notes.append(f"pinned {titles} left out: over the {budget}-token context share")
        whole = {d.id for d in uploads if how[d.id] == "whole"}
        extra = sum(d.chunks for d in uploads if d.id in whole)  # their chunks never take a place
        found = await search(
            store,
            ctx.documents,
            query,
            top_n=ctx.top_n + extra,
            threshold=ctx.similarity_threshold,
            mode=ctx.search_mode,
        )
        cut = [text for i, text in sent.items() if how[i] == "cut"]
        hits = _not_sent(found.hits, whole, cut)[: ctx.top_n]
        dropped = _not_sent(found.dropped, whole, cut)[: ctx.top_n - len(hits)]
        context += [chunk_context(h) for h in hits]
        sources += [chunk_source(h) for h in hits]
        outcome |= {"chunks": len(hits), "below_threshold": len(dropped), "search_mode": ctx.search_mode}
        threshold = ctx.similarity_threshold
        ranked = "by embedding and full text, fused" if ctx.search_mode == "hybrid" else "by embedding"
        kept = f"{len(hits)} of the top {ctx.top_n} chunks ({ranked}) at similarity ≥ {threshold:g}"
        notes.append(found.problem or kept)
        if state.get("route") == "agent" and ctx.client_tools is None:  # a client's run: its tools alone
            notes.append("agent mode: the model can search for more through search_documents")
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
