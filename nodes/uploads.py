"""I2 in the chat — a document dropped into the chat joins the workspace's documents, as through ``ingest``.

Web clients (Agent Chat UI's "Upload PDF or Image") send a dropped file as a base64 content block in the
user message. AnythingLLM adds such a document to the workspace; so does this node, through the same
functions as the ``ingest`` graph: hashed first (an identical file is left unchanged), read by its type,
split, embedded and stored. In the turn that drops it, ``retrieve`` sends it whole as it sends a pinned
document (found by its ``document_id`` in ``uploads``: "summarise this" shares no word with the file), and
the sources name it; later turns find it by similarity like any document. A file the model cannot use gets
a reason instead of a crash: an image (this model reads text), an unsupported type, a file over a limit
or one whose text cannot be extracted within the deployment's limits (``skills.extraction``). Its bytes
leave the message once handled, added or refused alike: the thread keeps its name and what became of it,
so checkpoints do not carry the file again at every step.

A file sent without a name is named after its content (``upload-<first 12 hex digits of its sha256>``
with the suffix of its MIME type), so two unnamed files never replace each other. Base64 wrapped over
lines (mail clients and some SDKs send it so) is read; anything else that is not base64 is refused.

Settings (deployment: environment or ``langgraph.json`` env):
    ``UPLOAD_MAX_BYTES``: the largest file accepted, in bytes (default 20 MiB).
    ``UPLOAD_MAX_FILES``: files added from one message (default 10); the ones after are refused.
    ``UPLOAD_MAX_TOTAL_BYTES``: bytes added from one message (default 50 MiB); a file that would take the
        message over it is refused.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, Decision, decision
from workspace_agent.nodes.history import ATTACHMENT_TYPES, attachments, block_name, given_name
from workspace_agent.skills.documents import index_document
from workspace_agent.skills.extraction import extract_bounded
from workspace_agent.skills.loaders import SUPPORTED_SUFFIXES, content_hash, positive_setting
from workspace_agent.skills.toolset import Services

LIMIT_ENV, FILES_ENV, TOTAL_ENV = "UPLOAD_MAX_BYTES", "UPLOAD_MAX_FILES", "UPLOAD_MAX_TOTAL_BYTES"
DEFAULT_LIMIT, DEFAULT_FILES, DEFAULT_TOTAL = 20 * 1024 * 1024, 10, 50 * 1024 * 1024
SOURCE_PREFIX = "chat-upload:"
MIME_SUFFIXES = {
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/html": ".html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}
AFTER_ROUTE = ["load_history", "retrieve", "recall"]


class Refused(ValueError):
    """A dropped file that is not added; the message says why, naming the file."""


def upload_limit() -> int:
    """The largest file accepted in the chat, in bytes: ``UPLOAD_MAX_BYTES``, else 20 MiB."""
    return positive_setting(LIMIT_ENV, DEFAULT_LIMIT, "bytes")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n} bytes ({n / 1024:.1f} KiB)" if n < 1024**2 else f"{n} bytes ({n / 1024**2:.1f} MiB)"


def _payload(block: dict[str, Any]) -> tuple[str, str]:
    """The base64 data and MIME type of a block, in any of the forms LangChain and OpenAI define."""
    mime = str(block.get("mime_type") or "")
    if block.get("type") == "text-plain" and isinstance(block.get("text"), str):
        return base64.b64encode(block["text"].encode()).decode(), "text/plain"
    data = block.get("data") if block.get("source_type") == "base64" else block.get("base64")
    url = (block.get("file") or {}).get("file_data") or (block.get("image_url") or {}).get("url") or ""
    if not data and isinstance(url, str) and url.startswith("data:") and "," in url:
        head, data = url[5:].split(",", 1)
        mime = mime or head.split(";")[0]
    if not isinstance(data, str) or not data:
        raise Refused("only files sent inline (base64) can be added; a link or a file id cannot be read here")
    return data, mime


def _decoded(block: dict[str, Any]) -> tuple[bytes, str]:
    """The bytes and MIME type of a dropped file; raise ``Refused`` when it cannot be added.

    Whitespace is removed before decoding (base64 wrapped over lines is still base64); the size is checked
    from the text's length before anything is decoded.
    """
    data, mime = _payload(block)
    if block.get("type") in ("image", "image_url") or mime.startswith("image/"):
        raise Refused("it is an image; this model reads text only, and images are not added to documents")
    data = "".join(data.split())
    limit, size = upload_limit(), len(data) * 3 // 4 - data[-2:].count("=")
    if size > limit:
        raise Refused(
            f"it is {_size(size)}; files dropped into the chat may be at most {_size(limit)} ({LIMIT_ENV})"
        )
    try:
        return base64.b64decode(data, validate=True), mime
    except (binascii.Error, ValueError) as exc:
        raise Refused(f"its data is not valid base64 ({exc})") from exc


def upload_name(block: dict[str, Any], raw: bytes, mime: str) -> str:
    """The file's own name, or one made from its content: unnamed files must not replace each other."""
    return given_name(block) or f"upload-{content_hash(raw)[:12]}{MIME_SUFFIXES.get(mime.lower(), '')}"


def _check_count(position: int, count: int) -> None:
    """Refuse the files of a message after the first ``UPLOAD_MAX_FILES``, before decoding them."""
    most = positive_setting(FILES_ENV, DEFAULT_FILES, "files")
    if position > most:
        raise Refused(
            f"this message carries {count} files; at most {most} are added per message ({FILES_ENV})"
        )


def _check_total(total: int) -> None:
    """Refuse a file that takes the message's files over ``UPLOAD_MAX_TOTAL_BYTES``."""
    most = positive_setting(TOTAL_ENV, DEFAULT_TOTAL, "bytes")
    if total > most:
        raise Refused(
            f"with it the files of this message come to {_size(total)}; at most {_size(most)} are added "
            f"per message ({TOTAL_ENV})"
        )


async def _add(raw: bytes, mime: str, name: str, workspace: str, store: DocumentStore) -> dict[str, Any]:
    """Add one dropped file to the workspace; raise ``Refused`` with the reason when it cannot be."""
    suffix = Path(name).suffix.lower()
    suffix = suffix if suffix in SUPPORTED_SUFFIXES else MIME_SUFFIXES.get(mime.lower(), suffix)
    source, digest = SOURCE_PREFIX + name, content_hash(raw)
    known = await store.get_document(workspace, source)
    if known and known.content_hash == digest:
        return {"outcome": "unchanged", "document_id": known.id, "chunks": known.chunks}
    try:
        text = await extract_bounded(Path(Path(name).stem + suffix), raw)
        doc, replaced = await index_document(
            store, workspace, source=source, title=name, text=text, digest=digest
        )
    except Exception as exc:  # unreadable, unsupported, no embedding model: the person is told why
        raise Refused(str(exc) or type(exc).__name__) from exc
    return {"outcome": "replaced" if replaced else "added", "document_id": doc.id, "chunks": doc.chunks}


NOTES = {
    "added": "added to this workspace's documents",
    "replaced": "replaced the earlier version in this workspace's documents",
    "unchanged": "already in this workspace's documents, unchanged",
}


async def ingest_uploads(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Add each file of the new message to the workspace, or say why not; then drop its bytes.

    The message's caps come first (``UPLOAD_MAX_FILES``, ``UPLOAD_MAX_TOTAL_BYTES``), so three hundred
    files are not decoded to be refused. Every file block, added or refused, is written back without its
    bytes in place of the message (same id), so the thread keeps no copy of them.
    The outcome of each file is recorded as an I2 decision (as the ``ingest`` graph records its files),
    returned in ``uploads``, and written into the file's block, so the model is told what became of it.
    """
    ctx = runtime.context
    message: HumanMessage = state["messages"][-1]  # type: ignore[assignment]
    content: list[Any] = []
    uploads: list[dict[str, Any]] = []
    notes: list[Decision] = []
    count, position, total = len(attachments(message)), 0, 0
    for block in message.content:
        if not isinstance(block, dict) or block.get("type") not in ATTACHMENT_TYPES:
            content.append(block)
            continue
        name, position = block_name(block), position + 1
        try:
            _check_count(position, count)
            raw, mime = _decoded(block)
            name = upload_name(block, raw, mime)
            _check_total(total + len(raw))
            total += len(raw)
            entry = {"name": name, **await _add(raw, mime, name, ctx.documents, services.documents)}
            note = f"{NOTES[entry['outcome']]} ({entry['chunks']} chunks)"
            why = f"{name}: {note}"
        except Refused as exc:
            entry = {"name": name, "outcome": "refused", "reason": str(exc)}
            note = f"not added: {exc}"
            why = f"{name} was not added: {exc}"
        uploads.append(entry)
        notes.append(decision("I2", "code", entry["outcome"], why))
        kept = {k: v for k, v in block.items() if k not in ("data", "base64", "file", "image_url", "text")}
        kept["metadata"] = {**(block.get("metadata") or {}), "filename": name}
        content.append({**kept, "outcome": note})
    return {
        "messages": [HumanMessage(content=content, id=message.id)],
        "uploads": uploads,
        "decisions": notes,
    }


def route_uploads(state: AgentState) -> list[Literal["ingest_uploads", "load_history", "retrieve", "recall"]]:
    """A message carrying files goes through ``ingest_uploads`` first, so retrieval can find them."""
    return ["ingest_uploads"] if attachments(state["messages"][-1]) else list(AFTER_ROUTE)  # type: ignore[list-item]
