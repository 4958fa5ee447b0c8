"""Reading documents from the server's disk: only under the documents roots, only files, only text.

Whoever sends a run names the paths, so the paths are the client's word and the roots are the deployment's.
A path is resolved (every symlink followed) before it is compared with the roots, so a link inside an
allowed folder that points out of it is refused like the target itself. Only regular files are opened
(never a FIFO or a device that would hang or never end), and never more than the size cap is read. Text
that turns out to be binary data under a text name is refused, not indexed as noise.

Settings (deployment: environment or ``langgraph.json`` env):
    ``DOCUMENT_ROOTS``: folders server-side ingest may read, ``os.pathsep``-separated. Default:
        ``documents/`` in the project's data folder (not the whole folder: it also holds the embedded
        database and model caches) and the repository's ``samples/``.
    ``DOCUMENT_MAX_BYTES``: the largest file read, in bytes (default 16 MiB).
    ``EXTRACT_MAX_CHARS``: the most characters of text one document may give (default 2,000,000, about a
        thousand pages). Extraction stops as soon as it is passed (a PDF per page), so a few kilobytes of
        PDF whose pages share one content stream cannot produce millions of characters.

PDF, DOCX and HTML are parsed in a worker process with limits on CPU time and memory
(``skills.extraction``, which documents those settings); this module is what runs inside it. A DOCX is a
zip: the sizes its members declare are checked before any is unpacked, against a share of the worker's
memory limit, so a zip bomb is refused before it is read.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..providers.paths import data_home

ROOTS_SETTING, MAX_BYTES_SETTING = "DOCUMENT_ROOTS", "DOCUMENT_MAX_BYTES"
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
MAX_CHARS_SETTING, MEMORY_SETTING = "EXTRACT_MAX_CHARS", "EXTRACT_MEMORY_MB"
DEFAULT_MAX_CHARS = 2_000_000
#: A DOCX may unpack to this share of the worker's memory: parsed XML takes several times its size.
UNPACKED_SHARE = 8
#: `samples/` beside `skills/`: at the repository root, and as `workspace_agent.samples` once installed.
SAMPLES_ROOT = Path(__file__).resolve().parents[1] / "samples"
#: Above this share of control characters, a "text" file is binary data (real text has almost none).
MAX_CONTROL_SHARE = 0.10
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")

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


class UnreadableDocument(ValueError):
    """A file whose text could not be extracted, or that may not be read; the message says why."""


class OutsideRoots(UnreadableDocument):
    """A path that resolves outside the deployment's documents roots."""


class TooMuchText(UnreadableDocument):
    """A document whose text passes ``EXTRACT_MAX_CHARS``; extraction stopped there."""

    def __init__(self, limit: int) -> None:
        """Name the limit and the setting that raises it."""
        super().__init__(
            f"it gives more than {limit} characters of text; documents may give at most {limit} "
            f"({MAX_CHARS_SETTING})"
        )


# ── where the server may read ──────────────────────────────────────────────────────────────────────────


def default_documents_folder() -> Path:
    """``documents/`` in the project's data folder: a root of its own, beside (not over) the database."""
    folder = data_home() / "documents"
    folder.mkdir(exist_ok=True)
    return folder


def document_roots(extra: Iterable[str | Path] = ()) -> list[Path]:
    """The folders server-side ingest may read: ``DOCUMENT_ROOTS`` (or the defaults), plus ``extra``.

    ``extra`` comes from the program that compiled the graph (the CLI adds the paths its user typed), never
    from a run. Roots are resolved, so a root that is itself a symlink means its target.
    """
    setting = os.environ.get(ROOTS_SETTING, "")
    given: list[str | Path] = [p for p in setting.split(os.pathsep) if p.strip()]
    given = given or [default_documents_folder(), SAMPLES_ROOT]
    return [Path(p).expanduser().resolve() for p in [*given, *extra]]


def inside_roots(given: str | Path, roots: list[Path]) -> Path:
    """``given`` resolved after every symlink, if that lies under one of ``roots``.

    The answer does not depend on whether the file exists, so a refusal tells a client nothing about the
    server's files.

    Raises:
        OutsideRoots: Naming the path and the setting that would allow it.
    """
    resolved = Path(given).expanduser().resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise OutsideRoots(
            f"{given} is outside the documents roots this server may read; the deployment sets them in "
            f"{ROOTS_SETTING} ({os.pathsep}-separated folders)"
        )
    return resolved


def positive_setting(name: str, default: int, unit: str) -> int:
    """A deployment setting that is a positive whole number of ``unit``, or ``default`` when unset.

    Raises:
        ValueError: The setting is not a positive whole number; the message names it.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive number of {unit}, got {raw!r}")
    return int(raw)


def max_document_bytes() -> int:
    """The size cap of one file: ``DOCUMENT_MAX_BYTES`` or 16 MiB.

    Raises:
        ValueError: The setting is not a positive whole number.
    """
    return positive_setting(MAX_BYTES_SETTING, DEFAULT_MAX_BYTES, "bytes")


def max_chars() -> int:
    """The most characters one document may give: ``EXTRACT_MAX_CHARS`` or 2,000,000.

    Raises:
        ValueError: The setting is not a positive whole number.
    """
    return positive_setting(MAX_CHARS_SETTING, DEFAULT_MAX_CHARS, "characters")


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 1_000_000 else f"{size / 1000:.1f} kB"


def read_document(given: str | Path, roots: list[Path], max_bytes: int | None = None) -> bytes:
    """The bytes of one file under the roots: a regular file, no larger than the cap.

    The resolved path is opened without following a last symlink and without blocking, and the opened file
    is what is checked, so a FIFO, a device or a file swapped for a link after the check is never read.

    Raises:
        OutsideRoots: The path resolves outside the roots.
        UnreadableDocument: Not a regular file, or larger than the cap.
        OSError: The file cannot be opened.
    """
    limit = max_document_bytes() if max_bytes is None else max_bytes
    path = inside_roots(given, roots)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableDocument(f"{given} is not a regular file")
        if info.st_size > limit:
            raise UnreadableDocument(
                f"{path.name} is {_megabytes(info.st_size)}; files over {_megabytes(limit)} are not "
                f"ingested ({MAX_BYTES_SETTING})"
            )
        data = file.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise UnreadableDocument(f"{path.name} is over {_megabytes(limit)} ({MAX_BYTES_SETTING})")
    return data


# ── text from bytes ────────────────────────────────────────────────────────────────────────────────────


def content_hash(data: bytes) -> str:
    """The sha256 of a document's bytes: an unchanged file is recognised without parsing it again."""
    return hashlib.sha256(data).hexdigest()


def _plain(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise UnreadableDocument("binary data, not text (it holds NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    controls = len(_CONTROL.findall(text))
    if text and controls / len(text) > MAX_CONTROL_SHARE:
        raise UnreadableDocument(
            f"binary data, not text ({controls / len(text):.0%} control characters; "
            f"text has under {MAX_CONTROL_SHARE:.0%})"
        )
    return text


def _capped(text: str, limit: int) -> str:
    if len(text) > limit:
        raise TooMuchText(limit)
    return text


def _joined(parts: Iterable[str], separator: str, limit: int) -> str:
    """``parts`` joined, drawn one at a time and stopped as soon as the text passes ``limit``.

    Parts are pages or paragraphs: a document of millions of characters is refused after the first part
    over the limit, not after all of it has been extracted.
    """
    kept: list[str] = []
    total = -len(separator)
    for part in parts:
        kept.append(part)
        total += len(separator) + len(part)
        if total > limit:
            raise TooMuchText(limit)
    return separator.join(kept)


def _html(data: bytes, limit: int) -> str:
    from .html_text import document_text

    return _capped(document_text(data), limit)


def _page_key(page: Any) -> str | None:
    """What a page's text depends on, when it is made of shared objects: its content streams and resources.

    A PDF can give thousands of pages one content stream (a few kilobytes that read as millions of
    characters); pages with the same key have the same text, so it is extracted once.
    """
    from pypdf.generic import IndirectObject

    contents, resources = page.raw_get("/Contents"), page.raw_get("/Resources")
    if not isinstance(contents, IndirectObject):
        return None
    return f"{contents.idnum}:{contents.generation}:{resources!r}"


def _page_texts(pages: Iterable[Any]) -> Iterator[str]:
    """Each page's text, reading a page made of the same objects as an earlier one only once."""
    seen: dict[str, str] = {}
    for page in pages:
        key = _page_key(page)
        if key is None:
            yield (page.extract_text() or "").strip()
            continue
        if key not in seen:
            seen[key] = (page.extract_text() or "").strip()
        yield seen[key]


def _pdf(data: bytes, limit: int) -> str:
    """The pages' text, stopping at the first page that takes the total over ``limit``."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument("the PDF is encrypted")
        return _joined(_page_texts(reader.pages), "\n\n", limit)
    except (PyPdfError, RecursionError) as exc:
        raise UnreadableDocument(f"not a readable PDF: {exc}") from exc


def _check_unpacked(data: bytes, memory_bytes: int) -> None:
    """Refuse a DOCX whose members declare more unpacked bytes than a share of the worker's memory.

    The declared sizes are what ``zipfile`` unpacks at most (a member that lies is cut short and fails its
    checksum), so this bounds the memory the parse can take before any member is read.
    """
    import zipfile

    try:
        unpacked = sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist())
    except (zipfile.BadZipFile, ValueError) as exc:
        raise UnreadableDocument(f"not a readable DOCX file: {exc}") from exc
    allowed = memory_bytes // UNPACKED_SHARE
    if unpacked > allowed:
        raise UnreadableDocument(
            f"it unpacks to {_megabytes(unpacked)}; a DOCX may unpack to at most {_megabytes(allowed)}, "
            f"an eighth of the {memory_bytes // 2**20} MB extraction may use ({MEMORY_SETTING})"
        )


def _docx(data: bytes, limit: int, memory_bytes: int | None) -> str:
    import zipfile

    from docx import Document as Docx

    if memory_bytes is not None:
        _check_unpacked(data, memory_bytes)
    try:
        doc = Docx(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UnreadableDocument(f"not a readable DOCX file: {exc}") from exc
    paragraphs = (p.text for p in doc.paragraphs if p.text.strip())
    rows = (" | ".join(c.text.strip() for c in row.cells) for table in doc.tables for row in table.rows)
    return _joined(itertools.chain(paragraphs, rows), "\n", limit)


def extract_text(path: Path, data: bytes, limit: int | None = None, memory_bytes: int | None = None) -> str:
    """The text of a file by its type: plain text and Markdown, HTML, PDF or DOCX, in this process.

    Unbounded in time and memory: the server calls ``skills.extraction.extract_bounded``, which runs this
    in a worker process under limits (``memory_bytes`` is that worker's, for the DOCX unpacked-size check).
    Text is bounded here: ``limit`` characters, ``EXTRACT_MAX_CHARS`` when not given.

    Raises:
        UnreadableDocument: The type is not supported, the file is damaged or binary, it holds no text, or
            more than the limit (``TooMuchText``).
    """
    limit = max_chars() if limit is None else limit
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        text = _capped(_plain(data), limit)
    elif suffix in HTML_SUFFIXES:
        text = _html(data, limit)
    elif suffix in PDF_SUFFIXES:
        text = _pdf(data, limit)
    elif suffix in DOCX_SUFFIXES:
        text = _docx(data, limit, memory_bytes)
    else:
        raise UnreadableDocument(
            f"unsupported file type {suffix or '(none)'}; supported: {', '.join(sorted(SUPPORTED_SUFFIXES))}"
        )
    if not text.strip():
        raise UnreadableDocument("no text could be extracted (a scanned PDF needs OCR first)")
    return text
