"""Workspace documents: reading files, splitting and embedding them, searching them, and the agent's tools.

The ``ingest`` graph, the ``retrieve`` node and the agent's two document tools all come here, so a document
saved by the agent is split, embedded and searched exactly like an ingested file. Chunks are made as in
AnythingLLM: LangChain's ``RecursiveCharacterTextSplitter`` (1000 characters, 20 overlap by default), each
chunk embedded together with a short ``<document_metadata>`` header naming its document, so a passage that
never names its subject is still found by it.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import get_runtime

from workspace_agent.checkpoints.chunks import ChunkHit, Document, DocumentStore, require_space
from workspace_agent.graphs.context import Context
from workspace_agent.providers.embeddings import EmbeddingUnavailable, embedding_id, get_embeddings
from workspace_agent.providers.tokens import count, ensure_tokenizer

DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP, DEFAULT_BATCH_SIZE = 1000, 20, 64
TEXT_SUFFIXES = {
    ".txt",
    ".text",
    ".md",
    ".markdown",
    ".mdx",
    ".rst",
    ".csv",
    ".tsv",
    ".json",
    ".yaml",
    ".yml",
}
HTML_SUFFIXES, PDF_SUFFIXES, DOCX_SUFFIXES = {".html", ".htm", ".xhtml"}, {".pdf"}, {".docx"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES | DOCX_SUFFIXES
PINNED_PREVIEW = 1000
CONTINUED = "...continued on in source document..."
NO_CONTEXT = "There was no relevant context for that query in this workspace's documents."

Progress = Callable[[int, int], None]


class UnreadableDocument(ValueError):
    """A file whose text could not be extracted; the message says why."""


# ── reading ────────────────────────────────────────────────────────────────────────────────────────────


def content_hash(data: bytes) -> str:
    """The sha256 of a document's bytes: an unchanged file is recognised without parsing it again."""
    return hashlib.sha256(data).hexdigest()


def _plain(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise UnreadableDocument("binary data, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _html(data: bytes) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def _pdf(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument("the PDF is encrypted")
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
    except PyPdfError as exc:
        raise UnreadableDocument(f"not a readable PDF: {exc}") from exc


def _docx(data: bytes) -> str:
    import zipfile

    from docx import Document as Docx

    try:
        doc = Docx(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UnreadableDocument(f"not a readable DOCX file: {exc}") from exc
    parts = [p.text for p in doc.paragraphs if p.text.strip()]
    for table in doc.tables:
        for row in table.rows:
            parts.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(parts)


def extract_text(path: Path, data: bytes) -> str:
    """The text of a file by its type: plain text and Markdown, HTML, PDF or DOCX.

    Raises:
        UnreadableDocument: The type is not supported, the file is damaged, or it holds no text.
    """
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        text = _plain(data)
    elif suffix in HTML_SUFFIXES:
        text = _html(data)
    elif suffix in PDF_SUFFIXES:
        text = _pdf(data)
    elif suffix in DOCX_SUFFIXES:
        text = _docx(data)
    else:
        raise UnreadableDocument(
            f"unsupported file type {suffix or '(none)'}; supported: {', '.join(sorted(SUPPORTED_SUFFIXES))}"
        )
    if not text.strip():
        raise UnreadableDocument("no text could be extracted (a scanned PDF needs OCR first)")
    return text


# ── splitting and embedding ────────────────────────────────────────────────────────────────────────────


def metadata_header(title: str, source: str) -> str:
    """The header each chunk is embedded and shown with, after AnythingLLM's ``<document_metadata>``."""
    return f"<document_metadata>\nsourceDocument: {title}\nsource: {source}\n</document_metadata>\n\n"


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
) -> list[list[float]]:
    """Embed texts in batches, reporting ``(done, total)`` after each batch."""
    vectors: list[list[float]] = []
    for start in range(0, len(texts), batch_size):
        vectors += await embeddings.aembed_documents(list(texts[start : start + batch_size]))
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
    )


# ── searching ──────────────────────────────────────────────────────────────────────────────────────────


@dataclass
class Found:
    """The outcome of a search: hits above the threshold, those dropped below it, or why none was made."""

    hits: list[ChunkHit] = field(default_factory=list)
    dropped: list[ChunkHit] = field(default_factory=list)
    problem: str | None = None


async def search(store: DocumentStore, workspace: str, query: str, *, top_n: int, threshold: float) -> Found:
    """The ``top_n`` nearest chunks of a workspace, those below ``threshold`` dropped; pinned ones excluded.

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
    hits = await store.search(workspace, vector, top_n, embedding_id=space, space=known)
    return Found(
        hits=[h for h in hits if h.similarity >= threshold],
        dropped=[h for h in hits if h.similarity < threshold],
    )


def chunk_context(hit: ChunkHit) -> str:
    """A found chunk as it goes into the prompt: with its document's header."""
    return metadata_header(hit.title, hit.source) + hit.text


def pinned_context(doc: Document) -> str:
    """A pinned document as it goes into the prompt: whole, with its header."""
    return metadata_header(doc.title, doc.source) + (doc.content or "")


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


# ── the agent's tools ──────────────────────────────────────────────────────────────────────────────────


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
        known = {f.name for f in fields(Context)}
        return Context(**{k: v for k, v in ctx.items() if k in known})
    return Context()


def _format_hits(query: str, found: Found, threshold: float) -> str:
    if not found.hits:
        below = f" ({len(found.dropped)} passage(s) fell below the similarity threshold {threshold:g})"
        return NO_CONTEXT + (below if found.dropped else "")
    parts = [f'Additional context for query "{query}":']
    for i, hit in enumerate(found.hits, 1):
        parts.append(f"[{i}] {hit.title} (similarity {hit.similarity:.2f})\n{hit.text}")
    return "\n\n".join(parts)


def document_tools(workspace: str, store: DocumentStore | None = None) -> list[BaseTool]:
    """``search_documents`` (read-only) and ``save_to_workspace`` (writes, so it asks) for a workspace."""
    store = store or DocumentStore()

    async def search_documents(query: str) -> tuple[str, dict[str, Any]]:
        """Search this workspace's documents for passages relevant to the query; returns them with titles.

        Pinned documents are already in your context and are not searched again.
        """
        ctx = live_settings()
        found = await search(store, workspace, query, top_n=ctx.top_n, threshold=ctx.similarity_threshold)
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
