"""I2 in the chat — a document dropped into the chat joins the workspace's documents, as through ``ingest``.

Web clients send a dropped file as a content block in the user message. AnythingLLM adds such a document
to the workspace; so does this node, through the same functions as the ``ingest`` graph: hashed first (an
identical file is left unchanged), read by its type, split, embedded and stored. In the turn that drops
it, ``retrieve`` sends it whole as it sends a pinned document (found by its ``document_id`` in
``uploads``: "summarise this" shares no word with the file), and the sources name it; later turns find it
by similarity like any document. A file the model cannot use gets a reason instead of a crash: one sent
as a link or a file id (never fetched from here), an unsupported type, a file over a limit or one whose
text cannot be extracted within the deployment's limits (``skills.extraction``). Its bytes leave the
message once handled, added or refused alike: the thread keeps its name and what became of it, so
checkpoints do not carry the file again at every step.

Every form real clients send is read: Agent Chat UI's (``{"type": "file" | "image", "mimeType", "data",
"metadata": {"filename" | "name"}}`` since late 2025), LangChain v1's standard blocks (``base64``, ``url``
or ``file_id``, with ``mime_type``), LangChain's older form (``source_type``), and OpenAI's content parts
(``{"type": "file", "file": {"filename", "file_data" | "file_id"}}``, ``{"type": "image_url"}``).

An image is never read (the model is given text only) and never added to documents, and the model is
told so; but it stays in the message exactly as sent, bytes included, because a client draws the
conversation from the thread's messages (Agent Chat UI renders ``data`` of the stored block: without it,
a broken image after the answer). The message's caps hold for images too: one over a cap is refused and
its bytes dropped like a file's, and the reason says so.

A file sent without a name is named after its content (``upload-<first 12 hex digits of its sha256>``
with the suffix of its MIME type), so two unnamed files never replace each other. Base64 wrapped over
lines (mail clients and some SDKs send it so) is read; anything else that is not base64 is refused.

Settings (deployment: environment or ``langgraph.json`` env):
    ``UPLOAD_MAX_BYTES``: the largest file (or image) accepted, in bytes (default 20 MiB).
    ``UPLOAD_MAX_FILES``: files and images taken from one message (default 10); the ones after are
        refused.
    ``UPLOAD_MAX_TOTAL_BYTES``: bytes taken from one message (default 50 MiB); a file or image that would
        take the message over it is refused.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from ..checkpoints.chunks import DocumentStore
from ..checkpoints.members import require
from ..core.context import Context
from ..core.conversation import (
    ATTACHMENT_TYPES,
    BYTE_KEYS,
    attachments,
    block_name,
    given_name,
    is_image,
)
from ..core.state import AgentState, Decision, decision
from ..skills.documents import index_document
from ..skills.extraction import extract_bounded
from ..skills.loaders import SUPPORTED_SUFFIXES, content_hash, positive_setting
from .services import Services

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
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}
#: Why an image within the caps is not read; and what a refusal of an image adds.
TEXT_ONLY = (
    "it is an image; this model reads text only, so the image was not read "
    "(it stays in the conversation, not in the workspace's documents)"
)
NOT_KEPT = "the image was neither read nor kept"
#: Why a member's file is not added to a shared workspace (its owner and managers change its documents).
MEMBERS_READ = "members of a shared workspace read its documents; its owner and managers add them"
INLINE_ONLY = "it reads only files sent inline (base64)"
#: What runs next, side by side, once the message is read (after ``route``, or after this node).
AFTER_ROUTE: list[Literal["load_history", "retrieve", "recall"]] = ["load_history", "retrieve", "recall"]


class Refused(ValueError):
    """A dropped file that is not added; the message says why, naming the file."""


def upload_limit() -> int:
    """The largest file accepted in the chat, in bytes: ``UPLOAD_MAX_BYTES``, else 20 MiB."""
    return positive_setting(LIMIT_ENV, DEFAULT_LIMIT, "bytes")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n} bytes ({n / 1024:.1f} KiB)" if n < 1024**2 else f"{n} bytes ({n / 1024**2:.1f} MiB)"


def _part(block: dict[str, Any]) -> str:
    """What an OpenAI content part carries: ``file.file_data``, or ``image_url`` (an object, or a string)."""
    file, image = block.get("file"), block.get("image_url")
    value = file.get("file_data") if isinstance(file, dict) else None
    if value is None:
        value = image.get("url") if isinstance(image, dict) else image
    return value if isinstance(value, str) else ""


def _inline(block: dict[str, Any]) -> tuple[str, str] | None:
    """The base64 data and MIME type of a block that carries its bytes; None for a link or a file id.

    The forms, by client: Agent Chat UI (``mimeType``, plain ``data``), LangChain v1 (``base64``,
    ``mime_type``; plain text in ``text-plain``), LangChain's older form (``source_type`` ``"base64"`` or
    ``"text"``), OpenAI (``file.file_data`` or ``image_url.url``, a data URL; plain base64 is read too).
    """
    mime = str(block.get("mime_type") or block.get("mimeType") or "")
    text = block.get("text")
    if isinstance(text, str) and (block.get("type") == "text-plain" or block.get("source_type") == "text"):
        return base64.b64encode(text.encode()).decode(), mime or "text/plain"
    data = block.get("base64") or (
        block.get("data") if block.get("source_type", "base64") == "base64" else None
    )
    if isinstance(data, str) and data:
        return data, mime
    part = _part(block) or str(block.get("url") or "")
    if part.startswith("data:"):
        head, _, data = part[5:].partition(",")
        if not head.endswith(";base64"):
            raise Refused("its data URL is not base64-encoded")
        return data, mime or head.split(";")[0]
    if part and isinstance(block.get("file"), dict):
        return part, mime or mimetypes.guess_type(given_name(block) or "")[0] or ""
    return None


def _pointer(block: dict[str, Any]) -> tuple[str, str]:
    """The link and the file id a block names instead of its bytes (either may be empty).

    A link: LangChain's ``url`` (v1 and the older ``source_type: "url"``) or OpenAI's ``image_url``, unless
    it is a data URL (those carry their bytes). A file id: LangChain v1's ``file_id``, OpenAI's
    ``file.file_id``, or the older form's ``id`` with ``source_type: "id"`` (elsewhere ``id`` names the
    block itself, not a file).
    """
    given = block.get("file")
    file: dict[str, Any] = given if isinstance(given, dict) else {}
    url = str(block.get("url") or (_part(block) if block.get("type") == "image_url" else ""))
    url = "" if url.startswith("data:") else url
    file_id = (
        block.get("file_id")
        or file.get("file_id")
        or (block.get("id") if block.get("source_type") == "id" else "")
    )
    return url, str(file_id or "")


def _reference(block: dict[str, Any]) -> str:
    """Why a block without bytes is not read, naming its link or file id: nothing is fetched from here."""
    url, file_id = _pointer(block)
    if url:
        return f"it was sent as a link ({url[:200]}); the server does not fetch links, {INLINE_ONLY}"
    if file_id:
        return (
            f"it was sent as a file id ({file_id}) of a file store this server does not have; {INLINE_ONLY}"
        )
    return f"it carries no data; {INLINE_ONLY}"


def _decoded(data: str) -> bytes:
    """The bytes of a dropped file's base64 text; raise ``Refused`` when it cannot be added.

    Whitespace is removed before decoding (base64 wrapped over lines is still base64); the size is checked
    from the text's length before anything is decoded.
    """
    data = "".join(data.split())
    limit, size = upload_limit(), len(data) * 3 // 4 - data[-2:].count("=")
    if size > limit:
        raise Refused(
            f"it is {_size(size)}; files dropped into the chat may be at most {_size(limit)} ({LIMIT_ENV})"
        )
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Refused(f"its data is not valid base64 ({exc})") from exc


def upload_name(block: dict[str, Any], raw: bytes, mime: str) -> str:
    """The file's own name, or one made from its content: unnamed files must not replace each other."""
    return given_name(block) or f"upload-{content_hash(raw)[:12]}{MIME_SUFFIXES.get(mime.lower(), '')}"


def files_cap() -> int:
    """Files added per message: ``UPLOAD_MAX_FILES``, else 10."""
    return positive_setting(FILES_ENV, DEFAULT_FILES, "files")


def total_cap() -> int:
    """Bytes of files added per message: ``UPLOAD_MAX_TOTAL_BYTES``, else 50 MiB."""
    return positive_setting(TOTAL_ENV, DEFAULT_TOTAL, "bytes")


def _check_count(position: int, count: int) -> None:
    """Refuse the files of a message after the first ``UPLOAD_MAX_FILES``, before decoding them."""
    most = files_cap()
    if position > most:
        raise Refused(
            f"this message carries {count} files; at most {most} are added per message ({FILES_ENV})"
        )


def _check_total(total: int) -> None:
    """Refuse a file that takes the message's files over ``UPLOAD_MAX_TOTAL_BYTES``."""
    most = total_cap()
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


def _reference_name(block: dict[str, Any]) -> str:
    """The name of a block before its bytes are read: its own, else its link's last part or its file id."""
    url, file_id = _pointer(block)
    return (
        given_name(block) or url.split("?")[0].rstrip("/").rsplit("/", 1)[-1] or file_id or block_name(block)
    )


def _refused(name: str, reason: str, image: bool, kept: bool = False) -> dict[str, Any]:
    """A refused attachment's entry in ``uploads``; an image's says whether it stays in the conversation."""
    return {"name": name, "outcome": "refused", "reason": reason, **({"kept": kept} if image else {})}


async def _take(
    block: dict[str, Any],
    position: int,
    count: int,
    total: int,
    workspace: str | None,
    store: DocumentStore,
) -> tuple[dict[str, Any], int]:
    """What becomes of one attachment, and the bytes it adds to the message's total.

    A document is added to the workspace. An image is never read (the model is given text only) and never
    added, but stays in the conversation as it was sent, so the client still shows it after a reload, when
    it is within the message's caps; past them its bytes go, as a refused file's do. ``workspace`` is
    ``None`` for a member of a shared workspace, who cannot add to its documents.
    """
    image, name = is_image(block), _reference_name(block)
    try:
        _check_count(position, count)
        inline = _inline(block)
        if inline is None and not image:
            raise Refused(_reference(block))
        raw, mime = (_decoded(inline[0]), inline[1]) if inline else (b"", "")
        name = upload_name(block, raw, mime) if inline else name
        _check_total(total + len(raw))
    except Refused as exc:
        return _refused(name, f"{exc}; {NOT_KEPT}" if image else str(exc), image), 0
    if image:
        return _refused(name, TEXT_ONLY, image, kept=True), len(raw)
    if workspace is None:
        return _refused(name, MEMBERS_READ, image), len(raw)
    try:
        return {"name": name, **await _add(raw, mime, name, workspace, store)}, len(raw)
    except Refused as exc:
        return _refused(name, str(exc), image), len(raw)


def _note(entry: dict[str, Any]) -> str:
    """What the model is told of an attachment, in its block's ``outcome``."""
    if entry["outcome"] == "refused":
        return f"not added: {entry['reason']}"
    return f"{NOTES[entry['outcome']]} ({entry['chunks']} chunks)"


def _stays(block: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """What stays of an attachment in the thread: a kept image as sent, anything else named, without bytes.

    Both carry the outcome, so the model reads what became of the file in later turns too.
    """
    if entry.get("kept"):
        named = (
            {}
            if given_name(block)
            else {"metadata": {**(block.get("metadata") or {}), "filename": entry["name"]}}
        )
        return {**block, **named, "outcome": _note(entry)}
    lean = {k: v for k, v in block.items() if k not in BYTE_KEYS}
    lean["metadata"] = {**(block.get("metadata") or {}), "filename": entry["name"]}
    return {**lean, "outcome": _note(entry)}


async def ingest_uploads(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Add each file of the new message to the workspace, or say why not; then drop its bytes.

    The message's caps come first (``UPLOAD_MAX_FILES``, ``UPLOAD_MAX_TOTAL_BYTES``), so three hundred
    files are not decoded to be refused. Every file block, added or refused, is written back without its
    bytes in place of the message (same id), so the thread keeps no copy of them; an image within the
    caps is the exception, kept as sent so the conversation still shows it.
    The outcome of each file is recorded as an I2 decision (as the ``ingest`` graph records its files),
    returned in ``uploads``, and written into the file's block, so the model is told what became of it.
    """
    message: HumanMessage = state["messages"][-1]  # type: ignore[assignment]
    content: list[Any] = []
    uploads: list[dict[str, Any]] = []
    notes: list[Decision] = []
    count, position, total = len(attachments(message)), 0, 0
    ctx = runtime.context
    writable = (await require(ctx.user_id, ctx.workspace)).allows("write")
    for block in message.content:
        if not isinstance(block, dict) or block.get("type") not in ATTACHMENT_TYPES:
            content.append(block)
            continue
        position += 1
        entry, size = await _take(
            block, position, count, total, ctx.documents if writable else None, services.documents
        )
        total += size
        uploads.append(entry)
        note = _note(entry)
        why = f"{entry['name']} was {note}" if entry["outcome"] == "refused" else f"{entry['name']}: {note}"
        notes.append(decision("I2", "code", entry["outcome"], why))
        content.append(_stays(block, entry))
    return {
        "messages": [HumanMessage(content=content, id=message.id)],
        "uploads": uploads,
        "decisions": notes,
    }


def route_uploads(state: AgentState) -> list[Literal["ingest_uploads", "load_history", "retrieve", "recall"]]:
    """A message carrying files goes through ``ingest_uploads`` first, so retrieval can find them."""
    return ["ingest_uploads"] if attachments(state["messages"][-1]) else list(AFTER_ROUTE)
