"""I2 — add, keep or replace one file's document; a file that cannot be read fails alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from ...checkpoints.chunks import DocumentStore
from ...core.context import IngestContext
from ...core.state import FileTask, decision
from ...skills.documents import index_document
from ...skills.extraction import extract_bounded
from ...skills.loaders import content_hash, document_roots, read_document


async def index_file(
    state: FileTask, runtime: Runtime[IngestContext], *, extra_roots: Sequence[Path] = ()
) -> dict:
    """Store one file as a document of the workspace, unless it is already there unchanged.

    The file's bytes are hashed before anything is parsed: an unchanged file (same hash, same chunking) costs
    one read and one query. A changed file replaces its chunks in one transaction. The roots are checked
    again here, at the read: a task's path can reach this node without ``discover`` (a client may update a
    thread's state). The text is extracted in a worker process under the deployment's limits
    (``skills.extraction``): a bomb of a file is refused, and a cancelled run stops its worker. Whatever
    goes wrong with this file — outside the roots, too large, binary, damaged, empty, over a limit, the
    embedding model failing — is reported with its reason and the other files go on.
    """
    ctx = runtime.context
    path = Path(state["path"])
    store = DocumentStore()
    try:
        roots = await asyncio.to_thread(document_roots, extra_roots)
        data = await asyncio.to_thread(read_document, path, roots)
        digest = content_hash(data)
        known = await store.get_document(ctx.documents, str(path))
        entry: dict[str, Any] = {"path": str(path), "title": path.name}
        if known and (known.content_hash, known.chunk_size, known.chunk_overlap) == (
            digest,
            ctx.chunk_size,
            ctx.chunk_overlap,
        ):
            entry |= {"document_id": known.id, "chunks": known.chunks}
            why = f"{path.name}: same content and chunking as stored"
            return {"unchanged": [entry], "decisions": [decision("I2", "code", "unchanged", why)]}
        text = await extract_bounded(path, data)

        def progress(done: int, total: int) -> None:
            runtime.stream_writer({"path": str(path), "embedded": done, "chunks": total})

        doc, replaced = await index_document(
            store,
            ctx.documents,
            source=str(path),
            title=path.name,
            text=text,
            digest=digest,
            chunk_size=ctx.chunk_size,
            chunk_overlap=ctx.chunk_overlap,
            batch_size=ctx.batch_size,
            progress=progress,
        )
    except Exception as exc:  # one file's failure is reported; the rest of the run goes on
        reason = str(exc) or type(exc).__name__
        why = f"{path.name}: {reason}"
        failed = {"path": str(path), "title": path.name, "reason": reason}
        return {"failed": [failed], "decisions": [decision("I2", "code", "failed", why)]}
    entry |= {"document_id": doc.id, "chunks": doc.chunks}
    outcome = "replaced" if replaced else "added"
    why = f"{path.name}: {'content or chunking changed' if replaced else 'new'}, {doc.chunks} chunk(s)"
    return {outcome: [entry], "decisions": [decision("I2", "code", outcome, why)]}
