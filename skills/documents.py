"""Workspace documents: splitting and embedding them, searching them, and managing them.

The ``ingest`` graph, the ``retrieve`` node and the agent's two document tools all come here, so a document
saved by the agent is split, embedded and searched exactly like an ingested file. Chunks are made as in
AnythingLLM: LangChain's ``RecursiveCharacterTextSplitter`` (1000 characters, 20 overlap by default), each
chunk embedded together with a short ``<document_metadata>`` header naming its document, so a passage that
never names its subject is still found by it. Reading files is ``skills.loaders``; the agent's tools are
``skills.document_tools``.
"""

from __future__ import annotations

import asyncio
import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ..checkpoints.chunks import ChunkHit, Document, DocumentStore, require_space
from ..core.context import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, SearchMode
from ..providers.embeddings import EmbeddingUnavailable, embedding_id, get_embeddings
from ..providers.tokens import count, ensure_tokenizer
from .loaders import UnreadableDocument

PINNED_PREVIEW = 1000
CONTINUED = "...continued on in source document..."
NO_CONTEXT = "There was no relevant context for that query in this workspace's documents."

Progress = Callable[[int, int], None]


# ── splitting and embedding ────────────────────────────────────────────────────────────────────────────


def metadata_header(title: str, source: str) -> str:
    """The header each chunk is embedded and shown with, after AnythingLLM's ``<document_metadata>``.

    A web page's address is named as AnythingLLM names it; a file's place on the server is not: the model
    would read a server path, and, in a thread with history, the 1.5B copied the whole header into an answer.
    """
    web = f"source: {source}\n" if source.startswith(("http://", "https://")) else ""
    return f"<document_metadata>\nsourceDocument: {title}\n{web}</document_metadata>\n\n"


def split_text(
    text: str, chunk_size: int = DEFAULT_CHUNK_SIZE, chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
) -> list[str]:
    """Chunks of at most ``chunk_size`` characters, by paragraphs, then lines, then words."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return [chunk for chunk in splitter.split_text(text) if chunk.strip()]


async def embedder() -> tuple[Embeddings, str]:
    """The configured embeddings client and the name of its vector space.

    Made in a worker thread: the local model verifies and loads files, a remote client reads certificates,
    and neither may block a server's event loop.

    Raises:
        EmbeddingUnavailable: No embedding model is configured and the local one is not installed.
    """
    return await asyncio.to_thread(lambda: (get_embeddings(), embedding_id()))


async def embed_texts(
    embeddings: Embeddings,
    texts: Sequence[str],
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> list[Sequence[float]]:
    """Embed texts in batches, reporting ``(done, total)`` after each batch.

    Each vector is kept as packed 32-bit floats (what pgvector stores): a Python list of floats costs about
    eight times the memory, and a large document holds thousands of vectors until they are written.
    """
    vectors: list[Sequence[float]] = []
    for start in range(0, len(texts), batch_size):
        batch = await embeddings.aembed_documents(list(texts[start : start + batch_size]))
        vectors += [array("f", vector) for vector in batch]
        if progress:
            progress(len(vectors), len(texts))
    return vectors


async def index_document(
    store: DocumentStore,
    workspace: str,
    *,
    source: str,
    title: str,
    text: str,
    digest: str,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> tuple[Document, bool]:
    """Split, embed and store one document (replacing an earlier version of ``source``).

    The workspace's embedding model is checked before any text is embedded, so a mismatch costs nothing.
    Returns the stored document and whether it replaced an earlier version.

    Raises:
        EmbeddingMismatch: The workspace's vectors came from another embedding model.
        EmbeddingUnavailable: No embedding model is configured.
    """
    embeddings, space = await embedder()
    await store.check_space(workspace, space)
    await ensure_tokenizer()
    text = text.replace("\x00", "")  # PDF extraction can yield NUL characters, which PostgreSQL refuses
    bodies, tokens = await asyncio.to_thread(
        lambda: (split_text(text, chunk_size, chunk_overlap), count(text))
    )
    if not bodies:
        raise UnreadableDocument("no text to index")
    header = metadata_header(title, source)
    vectors = await embed_texts(embeddings, [header + body for body in bodies], batch_size, progress)
    return await store.store_document(
        workspace,
        source=source,
        title=title,
        content=text,
        content_hash=digest,
        chunks=list(zip(bodies, vectors, strict=True)),
        embedding_id=space,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        tokens=tokens,
        metadata=metadata,
    )


# ── searching ──────────────────────────────────────────────────────────────────────────────────────────


@dataclass
class Found:
    """The outcome of a search: hits above the threshold, those dropped below it, or why none was made."""

    hits: list[ChunkHit] = field(default_factory=list)
    dropped: list[ChunkHit] = field(default_factory=list)
    problem: str | None = None


async def search(
    store: DocumentStore,
    workspace: str,
    query: str,
    *,
    top_n: int,
    threshold: float,
    mode: SearchMode = "dense",
) -> Found:
    """The ``top_n`` best chunks of a workspace, those below ``threshold`` dropped; pinned ones excluded.

    ``mode``: ``dense`` ranks by the embedding alone; ``hybrid`` fuses it with PostgreSQL's full-text
    ranking of the query's words, so a code word, a name or an error string the embedding blurs is found.
    The threshold is the cosine similarity's in both.

    An empty workspace is answered without embedding the query. A missing embedding model is reported in
    ``problem`` (chat goes on without documents); a workspace embedded by another model raises.

    Raises:
        EmbeddingMismatch: The workspace's vectors came from another embedding model.
    """
    known = await store.space(workspace)
    if known is None:
        return Found(problem=f"workspace {workspace!r} has no documents")
    try:
        embeddings, space = await embedder()
    except EmbeddingUnavailable as exc:
        return Found(problem=f"workspace {workspace!r} has documents but they cannot be searched: {exc}")
    require_space(workspace, known, space)
    vector = await embeddings.aembed_query(query)
    text = query if mode == "hybrid" else None
    hits = await store.search(workspace, vector, top_n, embedding_id=space, space=known, text=text)
    return Found(
        hits=[h for h in hits if h.similarity >= threshold],
        dropped=[h for h in hits if h.similarity < threshold],
    )


#: A Markdown table's rule line under its header: ``|---|:--:|`` and the like.
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
#: A cell border: a pipe not escaped as ``\|``.
_BORDER = re.compile(r"(?<!\\)\|")


def _cells(line: str) -> list[str]:
    """The cells of a table line, outer borders dropped and an escaped pipe read as a pipe."""
    inner = line.strip().removeprefix("|")
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip().replace("\\|", "|") for cell in _BORDER.split(inner)]


def linear_tables(text: str) -> str:
    """Markdown tables as one line per row, each cell named by its column (``Plan: Team; Price: 12 EUR``).

    Small models misread a grid: asked for the Team plan's status pages, the 1.5B took the 250 checks from
    the cell beside them, and for the Team price it took the Business row's 49 (``bench/chains.py``). A row
    that names its columns leaves nothing to line up: the bench's 16 earlier document tasks went from 3 to 8
    done in runs of the same day. Only what goes to a model is rewritten: chunks are embedded and cited as
    the document wrote them. A table whose header a chunk boundary cut off is left as it is, since its
    columns cannot be named.
    """
    if "|" not in text:
        return text
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if "|" in line and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]) and "|" in lines[i + 1]:
            header, i = _cells(line), i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                pairs = zip(header, _cells(lines[i]), strict=False)
                out.append("; ".join(f"{name}: {cell}" if name else cell for name, cell in pairs if cell))
                i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def chunk_context(hit: ChunkHit) -> str:
    """A found chunk as it goes into the prompt: with its document's header, its tables as lines."""
    return metadata_header(hit.title, hit.source) + linear_tables(hit.text)


def pinned_context(doc: Document) -> str:
    """A pinned document as it goes into the prompt: whole, with its header, its tables as lines."""
    return metadata_header(doc.title, doc.source) + linear_tables(doc.content or "")


def chunk_source(hit: ChunkHit) -> dict[str, Any]:
    """The citation of a found chunk: document, title, chunk text and similarity score."""
    return {
        "document": hit.source,
        "document_id": hit.document_id,
        "title": hit.title,
        "chunk": hit.ordinal,
        "text": hit.text,
        "score": round(hit.similarity, 4),
    }


def pinned_source(doc: Document) -> dict[str, Any]:
    """The citation of a pinned document: its opening, marked pinned, with no score (none was searched)."""
    text = doc.content or ""
    return {
        "document": doc.source,
        "document_id": doc.id,
        "title": doc.title,
        "text": text if len(text) <= PINNED_PREVIEW else text[:PINNED_PREVIEW] + CONTINUED,
        "pinned": True,
    }


# ── managing documents ─────────────────────────────────────────────────────────────────────────────────


async def find_documents(
    store: DocumentStore, workspace: str, names: Sequence[str]
) -> tuple[list[Document], list[str]]:
    """Documents named by id, source path or title (a path is resolved first), and the names matching none.

    A name matching several documents (two files of one title) selects them all; name the path to choose.
    """
    documents = await store.list_documents(workspace)
    resolved = await asyncio.to_thread(lambda: [str(Path(n).expanduser().resolve()) for n in names])
    chosen: dict[int, Document] = {}
    unknown: list[str] = []
    for name, path in zip(names, resolved, strict=True):
        matches = [d for d in documents if name in (str(d.id), d.source, d.title) or d.source == path]
        if not matches:
            unknown.append(name)
        chosen.update({d.id: d for d in matches})
    return list(chosen.values()), unknown


async def remove_documents(
    workspace: str, names: Sequence[str], store: DocumentStore | None = None
) -> tuple[list[Document], list[str]]:
    """Remove documents by id, path or title; returns those removed and the names that matched none."""
    store = store or DocumentStore()
    found, unknown = await find_documents(store, workspace, names)
    await store.remove_documents(workspace, [d.id for d in found])
    return found, unknown


async def pin_documents(
    workspace: str, names: Sequence[str], pinned: bool = True, store: DocumentStore | None = None
) -> tuple[list[Document], list[str]]:
    """Pin (or unpin) documents by id, path or title; returns those matched and the names matching none."""
    store = store or DocumentStore()
    found, unknown = await find_documents(store, workspace, names)
    await store.set_pinned(workspace, [d.id for d in found], pinned)
    for doc in found:
        doc.pinned = pinned
    return found, unknown


async def list_documents(workspace: str, store: DocumentStore | None = None) -> list[Document]:
    """The documents of a workspace, oldest first, with chunk counts and pinned flags."""
    return await (store or DocumentStore()).list_documents(workspace)
