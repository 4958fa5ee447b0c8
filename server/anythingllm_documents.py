"""AnythingLLM's document routes under ``/api/v1``: a library of documents, and workspaces that embed them.

AnythingLLM keeps one library of parsed documents per instance (``storage/documents/custom-documents/
<name>-<uuid>.json``, written by its collector) and lets each workspace embed documents from it by that
location (``update-embeddings``). Here each user has a library of their own, the documents key
``@library`` in their namespace (``document_scope``): no workspace slug can start with ``@``, so the library
is never a workspace, and nobody reaches another user's library, as nobody reaches their workspaces.

- An upload (``document/upload``, ``raw-text``, ``upload-link``) is extracted and embedded once, into the
  caller's library, under its ``location`` ``custom-documents/<name>-<uuid>.json``; ``addToWorkspaces``
  then copies it into each named workspace of the caller's. A workspace's document keeps the location as
  its ``docpath``, which is what ``update-embeddings`` and ``update-pin`` take, as there.
- ``update-embeddings`` copies a library document (its chunks and their vectors: nothing is embedded again)
  into a workspace, or removes it from one. ``system/remove-documents`` removes a document from the
  library and from every workspace of the caller's that holds it, as AnythingLLM's ``purgeDocument`` does.
- ``GET documents``, ``documents/folder/{name}`` and ``document/{docName}`` list the library in the shapes of
  ``viewLocalFiles``, ``getDocumentsByFolder`` and ``findDocumentInDocuments``
  (``server/utils/files/index.js``); the only folder is ``custom-documents``.

Shapes are read from AnythingLLM's source: ``server/endpoints/api/document/index.js`` (routes, bodies, the
``validateWorkspaceSlugQuery`` 422), ``collector/processSingleFile/convert/asTxt.js``,
``collector/processRawText/index.js`` and ``collector/processLink/convert/generic.js`` (a document's fields
and name), ``server/endpoints/api/workspace/index.js`` (``update-embeddings``, ``update-pin``,
``vector-search``), ``server/endpoints/api/system/index.js`` (``remove-documents``) and
``server/models/documents.js``.

Differences kept on purpose:
    - A document's uuid is derived from its name, content hash and metadata, so the same file uploaded twice
      is one library document (answered ``unchanged``), where AnythingLLM stores a second copy.
    - ``url`` names no path on the server (``file://<name>``, where AnythingLLM gives its hot folder's).
    - ``upload-link`` fetches through ``fetch_url``'s rules (public addresses only unless
      ``FETCH_ALLOWED_HOSTS``, size and time caps); ``scraperHeaders`` are refused, since the server does
      not send a client's headers to another host.
    - Refusals AnythingLLM answers with 500 (a body of the wrong type, a page that cannot be read) are 400
      or 422 here, saying which field or why.
    - Each upload answer carries ``workspaces``: for each workspace named, whether the document was
      ``added``, ``replaced`` or ``unchanged``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..checkpoints.chunks import Document, DocumentStore
from ..checkpoints.vectors import EmbeddingMismatch
from ..core.context import SearchMode, document_scope
from ..nodes.uploads import MIME_SUFFIXES, upload_limit
from ..providers.tokens import count as token_count
from ..providers.tokens import ensure_tokenizer
from ..skills.documents import index_document, search
from ..skills.extraction import extract_bounded
from ..skills.loaders import SUPPORTED_SUFFIXES, content_hash
from ..skills.web import FetchError, fetch, page_text
from .anythingllm_api import (
    SMALL_BODY,
    ApiError,
    client_of,
    document_record,
    endpoint,
    named_workspace,
    path_slug,
    path_workspace,
    read_body,
    settings_of,
    workspace,
    workspace_record,
    workspaces,
)
from .http_common import RouteError, caller, read_json

#: The documents key of a user's library: ``core.context.SLUG`` keeps ``@`` out of every workspace slug.
LIBRARY = "@library"
#: The one folder of the library, where AnythingLLM's collector writes every upload.
FOLDER = "custom-documents"
#: The fields a listed document must have (``REQUIRED_FILE_OBJECT_FIELDS``), besides ``name`` and ``type``.
FIELDS = (
    "url",
    "title",
    "docAuthor",
    "description",
    "docSource",
    "chunkSource",
    "published",
    "wordCount",
    "token_count_estimate",
)
#: The ``metadata`` keys AnythingLLM's upload takes (its swagger's "only specific keys are allowed").
METADATA_KEYS = ("title", "docAuthor", "description", "docSource")
#: ``normalizePagination``: the default page and the largest a caller may ask for.
DEFAULT_PAGE, MAX_PAGE = 100, 1000
#: ``GET document/metadata-schema``: the keys a raw-text upload's metadata may hold, as AnythingLLM says.
METADATA_SCHEMA = {
    "url": "string | nullable",
    "title": "string",
    "docAuthor": "string | nullable",
    "description": "string | nullable",
    "docSource": "string | nullable",
    "chunkSource": "string | nullable",
    "published": "epoch timestamp in ms | nullable",
}


def library_of(user: str) -> str:
    """The documents key of the user's library."""
    return document_scope(user, LIBRARY)


def slugged(text: str) -> str:
    """A name as the collector's ``slugify`` leaves it for a file name: spaces to ``-``, no unsafe sign."""
    text = re.sub(r"\s+", "-", text.strip())
    return re.sub(r"[^A-Za-z0-9._-]", "", text)[:120] or "document"


def published_now() -> str:
    """The time as the collector writes ``published`` (JavaScript's ``toLocaleString`` in en-US), in UTC."""
    now = datetime.now(UTC)
    return f"{now.month}/{now.day}/{now.year}, {now.strftime('%I:%M:%S %p').lstrip('0')}"


def described(
    stem: str, text: str, digest: str, given: Mapping[str, str], defaults: Mapping[str, str]
) -> dict[str, Any]:
    """A library document's record, as the collector writes it: ``given`` metadata over its defaults.

    ``stem`` is the name the location is made of (``<stem>-<uuid>.json``); the uuid is the name's, the
    content's and the metadata's, so the same text under the same name and description is the same
    document, and a new description makes a new one (its title is in every chunk's embedded header).
    """
    said = json.dumps(dict(given), sort_keys=True)
    document_id = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{stem}\0{digest}\0{said}"))
    fields = {**defaults, **{k: v for k, v in given.items() if v}}
    return {
        "id": document_id,
        "url": fields["url"],
        "title": fields["title"],
        "docAuthor": fields["docAuthor"],
        "description": fields["description"],
        "docSource": fields["docSource"],
        "chunkSource": fields["chunkSource"],
        "published": published_now(),
        "wordCount": len(text.split(" ")),
        "token_count_estimate": token_count(text),
        "name": f"{stem}-{document_id}.json",
    }


def location_of(record: Mapping[str, Any]) -> str:
    """Where a library document is found: ``custom-documents/<name>``, what ``update-embeddings`` takes."""
    return f"{FOLDER}/{record['name']}"


def upload_metadata(given: Any) -> dict[str, str]:
    """An upload's ``metadata`` (the form's JSON text, or raw-text's object): ``METADATA_KEYS`` as strings.

    AnythingLLM reads it with ``safeJsonParse(_, {})``: text that is not JSON is no metadata. Other keys are
    dropped, as there; a value that is not a string is refused, naming the key.
    """
    if isinstance(given, str):
        try:
            given = json.loads(given) if given.strip() else {}
        except json.JSONDecodeError:
            return {}
    if not isinstance(given, dict):
        return {}
    chosen = {k: given[k] for k in METADATA_KEYS if given.get(k) is not None}
    for key, value in chosen.items():
        if not isinstance(value, str) or len(value) > 1000:
            raise ApiError(
                400, {"success": False, "error": f"metadata {key} must be a string up to 1000 characters"}
            )
    return chosen


def target_slugs(targets: Any) -> list[str]:
    """``addToWorkspaces``'s slugs; anything but a string is 422, as ``validateWorkspaceSlugQuery`` says."""
    if targets in (None, ""):
        return []
    if not isinstance(targets, str):
        error = f"addToWorkspaces must be a string of comma-separated workspace slugs. Got {type(targets)}"
        raise ApiError(422, {"success": False, "error": error})
    return [named_workspace(s.strip()) for s in targets.split(",") if s.strip()]


async def check_workspaces(request: Request, user: str, slugs: list[str]) -> None:
    """Refuse an upload to a workspace the caller lacks (404, AnythingLLM's words) or may not change (403).

    In a shared workspace members read the documents and managers change them.
    """
    async with client_of(request) as client:
        for slug in slugs:
            try:
                await workspace(client, slug, user, "write")
            except RouteError as exc:
                raise ApiError(exc.status, {"success": False, "error": exc.message}) from None


async def own_workspaces(request: Request, user: str) -> dict[str, Mapping[str, Any]]:
    """The caller's own workspaces, not those shared with them: what their library's pins and removals reach.

    A document removed from one's library leaves the workspaces others share with one untouched.
    """
    async with client_of(request) as client:
        return {s: a for s, a in (await workspaces(client, user)).items() if "/" not in s}


async def stored(user: str, record: dict[str, Any], text: str, digest: str, slugs: list[str]) -> Response:
    """Embed a document into the caller's library once, copy it into each workspace named, and answer.

    The answer is the collector's document (with ``pageContent``, ``location`` and ``isDirectUpload``), as
    ``document/upload`` gives it.
    """
    store, library, location = DocumentStore(), library_of(user), location_of(record)
    fields = {k: v for k, v in record.items() if k != "name"}
    try:
        known = await store.get_document(library, location)
        if known is None or known.content_hash != digest:
            title = record["title"]
            await index_document(
                store, library, source=location, title=title, text=text, digest=digest, metadata=fields
            )
        added = {}
        for slug in slugs:
            copied = await store.copy_document(library, location, document_scope(user, slug))
            assert copied is not None, "the library holds what was just stored"
            document, replaced = copied
            outcome = "replaced" if replaced else "added"
            if known is not None and known.content_hash == digest and replaced:
                outcome = "unchanged"
            added[slug] = {"outcome": outcome, "documentId": document.id, "chunks": document.chunks}
    except Exception as exc:  # over a limit, no embedding model, another model's vectors: say why
        return JSONResponse({"success": False, "error": str(exc) or type(exc).__name__, "documents": []}, 422)
    answer = {
        **fields,
        "name": record["name"],
        "pageContent": text,
        "location": location,
        "isDirectUpload": False,
        "workspaces": [{"slug": path_slug(slug), **entry} for slug, entry in added.items()],
    }
    return JSONResponse({"success": True, "error": None, "documents": [answer]})


# ── uploads ────────────────────────────────────────────────────────────────────────────────────────────


async def uploaded_file(request: Request) -> tuple[str, bytes, str, list[str], dict[str, str]]:
    """The multipart upload's file name, bytes and MIME type, the workspaces to add it to, its metadata.

    The body is capped at ``UPLOAD_MAX_BYTES`` (plus a margin for the form) before it is parsed.
    """
    limit = upload_limit()
    await read_body(request, limit + SMALL_BODY)
    try:
        async with request.form(max_files=1, max_fields=10) as form:  # its spooled file closed after
            file, targets = form.get("file"), form.get("addToWorkspaces")
            given = form.get("metadata")
            raw = await file.read() if isinstance(file, UploadFile) else b""
    except MultiPartException as exc:  # malformed multipart, or more than one file
        raise ApiError(400, {"success": False, "error": f"not a valid upload form: {exc}"}) from None
    if not isinstance(file, UploadFile):
        raise ApiError(400, {"success": False, "error": "the form needs a file field"})
    slugs = target_slugs(targets)
    if len(raw) > limit:
        raise ApiError(413, {"success": False, "error": f"the file is over {limit} bytes (UPLOAD_MAX_BYTES)"})
    name = Path(file.filename or "").name or f"upload-{content_hash(raw)[:12]}"
    return name, raw, file.content_type or "", slugs, upload_metadata(given)


@endpoint
async def upload_document(request: Request) -> Response:
    """``POST /document/upload`` (multipart ``file``, ``addToWorkspaces``, ``metadata``).

    The file goes through the chat uploads' bounded extraction (``extract_bounded``) and caps, into the
    caller's library, then into each workspace named; only bytes are taken, never a path.
    """
    user = await caller(request)
    name, raw, mime, slugs, metadata = await uploaded_file(request)
    await check_workspaces(request, user, slugs)
    suffix = Path(name).suffix.lower()
    suffix = suffix if suffix in SUPPORTED_SUFFIXES else MIME_SUFFIXES.get(mime.lower(), suffix)
    try:
        text = await extract_bounded(Path(Path(name).stem + suffix), raw)
    except Exception as exc:  # unreadable, unsupported, over a limit: say why
        return JSONResponse({"success": False, "error": str(exc) or type(exc).__name__, "documents": []}, 422)
    await ensure_tokenizer()
    kind = "text" if suffix in (".txt", ".md", "") else suffix.lstrip(".")
    defaults = {
        "url": f"file://{name}",
        "title": name,
        "docAuthor": "Unknown",
        "description": "Unknown",
        "docSource": f"a {kind} file uploaded by the user.",
        "chunkSource": "",
    }
    digest = content_hash(raw)
    record = described(slugged(name), text, digest, metadata, defaults)
    return await stored(user, record, text, digest, slugs)


@endpoint
async def upload_raw_text(request: Request) -> Response:
    """``POST /document/raw-text`` ``{textContent, metadata: {title, ...}, addToWorkspaces}``.

    As ``document/index.js`` and ``processRawText``: ``metadata.title`` is required and ``textContent`` must
    not be empty (422 saying which); the title becomes ``<slug>.txt`` and the name ``raw-<slug>-<uuid>``.
    """
    user = await caller(request)
    body = await read_json(request, upload_limit() + SMALL_BODY)
    text, slugs = body.get("textContent"), target_slugs(body.get("addToWorkspaces"))
    metadata = upload_metadata(body.get("metadata"))
    if not metadata.get("title"):
        error = "You are missing required metadata key:value pairs in your request. Required: title"
        raise ApiError(422, {"success": False, "error": error, "documents": []})
    if not isinstance(text, str) or not text:
        raise ApiError(422, {"success": False, "error": "The 'textContent' key cannot have an empty value."})
    raw = text.encode()
    if len(raw) > upload_limit():
        raise ApiError(
            413, {"success": False, "error": f"the text is over {upload_limit()} bytes (UPLOAD_MAX_BYTES)"}
        )
    await check_workspaces(request, user, slugs)
    await ensure_tokenizer()
    slug = slugged(Path(metadata["title"]).stem).lower()
    defaults = {
        "url": f"file://{slug}.txt",
        "title": f"{slug}.txt",
        "docAuthor": "no author specified",
        "description": "no description found",
        "docSource": "no source set",
        "chunkSource": f"{slug}.txt",
    }
    given = {k: v for k, v in metadata.items() if k != "title"}
    digest = content_hash(raw)
    return await stored(user, described(f"raw-{slug}", text, digest, given, defaults), text, digest, slugs)


@endpoint
async def upload_link(request: Request) -> Response:
    """``POST /document/upload-link`` ``{link, addToWorkspaces, scraperHeaders, metadata}``.

    The page is fetched as ``fetch_url`` fetches (each hop's address checked, size and time capped, the
    markup read in the extraction worker), so a link can reach nothing the agent's own tool could not.
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    link, slugs = body.get("link"), target_slugs(body.get("addToWorkspaces"))
    metadata = upload_metadata(body.get("metadata"))
    if not isinstance(link, str) or not link.strip():
        raise ApiError(400, {"success": False, "error": "link must be a URL", "documents": []})
    if body.get("scraperHeaders"):
        error = "scraperHeaders are not supported: the server does not send a client's headers to a page"
        raise ApiError(400, {"success": False, "error": error, "documents": []})
    await check_workspaces(request, user, slugs)
    try:
        page = await fetch(link)
        _, text = await page_text(page)
    except FetchError as exc:
        return JSONResponse({"success": False, "error": str(exc), "documents": []}, 422)
    await ensure_tokenizer()
    address = page.url if page.url.host else httpx.URL(link.strip())
    stem = slugged(f"{address.host}{address.path.replace('/', '_')}")
    defaults = {
        "url": f"file://{stem}.html",
        "title": f"{stem}.html",
        "docAuthor": "no author found",
        "description": "No description found.",
        "docSource": "URL link uploaded by the user.",
        "chunkSource": f"link://{link}",
    }
    digest = content_hash(text.encode())
    return await stored(user, described(f"url-{stem}", text, digest, metadata, defaults), text, digest, slugs)


# ── the library ────────────────────────────────────────────────────────────────────────────────────────


def picker_record(document: Document, pinned_in: Sequence[Any] | None = None) -> dict[str, Any] | None:
    """A library document as ``fileToPickerData`` lists it; ``None`` if its record lacks a required field.

    ``cached`` is true: its vectors are held and a workspace embeds it without embedding again. Nothing is
    watched here, so ``canWatch`` and ``watched`` are false.
    """
    fields = dict(document.metadata)
    if not all(k in fields for k in FIELDS):
        return None
    name = document.source.removeprefix(f"{FOLDER}/")
    record = {"name": name, "type": "file", **fields, "cached": True, "canWatch": False}
    if pinned_in is not None:
        record |= {"pinnedWorkspaces": list(pinned_in), "watched": False}
    return record


async def library_records(request: Request, user: str) -> list[dict[str, Any]]:
    """The caller's library, by name, each with the ids of the caller's workspaces that pin it."""
    store = DocumentStore()
    documents = await store.list_documents(library_of(user))
    slugs = await own_workspaces(request, user)
    ids = {document_scope(user, slug): assistant.get("assistant_id") for slug, assistant in slugs.items()}
    held = await store.holders(list(ids), [d.source for d in documents])
    pinned: dict[str, list[Any]] = {}
    for doc in held:
        if doc.pinned:
            pinned.setdefault(doc.source, []).append(ids[doc.workspace])
    records = [picker_record(d, pinned.get(d.source, [])) for d in documents]
    return sorted((r for r in records if r is not None), key=lambda r: r["name"])


def page_of(params: Mapping[str, str], default: str) -> tuple[int, float]:
    """``offset`` and ``limit`` as ``normalizePagination`` reads them; ``limit=all`` is no limit."""
    given = params.get("limit", default)
    try:
        offset = max(int(params.get("offset", "0")), 0)
    except ValueError:
        offset = 0
    if given.lower() == "all":
        return offset, float("inf")
    try:
        limit = int(given)
    except ValueError:
        return offset, DEFAULT_PAGE
    return offset, min(limit, MAX_PAGE) if limit > 0 else DEFAULT_PAGE


async def folder_answer(request: Request, user: str, folder: str, default_limit: str) -> dict[str, Any]:
    """``getDocumentsByFolder``'s answer: a page of the folder, its size, whether more follow, a code."""
    empty = {"folder": folder, "documents": [], "totalCount": 0, "hasMore": False}
    if not folder:
        return empty | {"code": 400, "error": "Folder name must be provided."}
    if folder != FOLDER:
        return empty | {"code": 404, "error": f'Folder "{folder}" does not exist.'}
    records = await library_records(request, user)
    offset, limit = page_of(request.query_params, default_limit)
    end = len(records) if limit == float("inf") else offset + int(limit)
    return {
        "folder": folder,
        "documents": records[offset:end],
        "totalCount": len(records),
        "hasMore": end < len(records),
        "code": 200,
        "error": None,
    }


@endpoint
async def list_documents(request: Request) -> Response:
    """``GET /documents``: ``{"localFiles": {"name": "documents", "type": "folder", "items": [folders]}}``.

    With ``?folder=`` it answers as ``getDocumentsByFolder`` (a page of 100 unless ``limit`` says, ``code``
    in the body as there).
    """
    user = await caller(request)
    folder = request.query_params.get("folder")
    if folder is not None:
        answer = await folder_answer(request, user, folder, str(DEFAULT_PAGE))
        return JSONResponse(answer, status_code=answer["code"])
    records = await library_records(request, user)
    items = [{"name": FOLDER, "type": "folder", "items": records}] if records else []
    return JSONResponse({"localFiles": {"name": "documents", "type": "folder", "items": items}})


@endpoint
async def folder_documents(request: Request) -> Response:
    """``GET /documents/folder/{folderName}``: ``{folder, documents, totalCount, hasMore, error}``, all of it.

    Only ``custom-documents`` exists; another name is 404 with AnythingLLM's words.
    """
    user = await caller(request)
    answer = await folder_answer(request, user, request.path_params["folder"], "all")
    return JSONResponse({k: v for k, v in answer.items() if k != "code"}, status_code=answer["code"])


@endpoint
async def get_document(request: Request) -> Response:
    """``GET /document/{docName}``: ``{"document": {name, type, ...its fields, cached}}``; 404 if unknown.

    ``docName`` is the name ``GET /documents`` lists (without the folder), as ``findDocumentInDocuments``
    looks it up in every folder.
    """
    user = await caller(request)
    name = request.path_params["name"]
    document = await DocumentStore().get_document(library_of(user), f"{FOLDER}/{Path(name).name}")
    record = picker_record(document) if document is not None else None
    if record is None:
        return Response(status_code=404)
    record.pop("canWatch")
    return JSONResponse({"document": record})


@endpoint
async def accepted_file_types(request: Request) -> Response:
    """``GET /document/accepted-file-types``: ``{"types": {mime: [suffixes]}}`` that an upload reads."""
    await caller(request)
    types: dict[str, list[str]] = {}
    for mime, suffix in MIME_SUFFIXES.items():
        if suffix in SUPPORTED_SUFFIXES:
            types.setdefault(mime, []).append(suffix)
    return JSONResponse({"types": types})


@endpoint
async def metadata_schema(request: Request) -> Response:
    """``GET /document/metadata-schema``: the keys a raw-text upload's metadata may hold, as there."""
    await caller(request)
    return JSONResponse({"schema": METADATA_SCHEMA})


def locations(body: Mapping[str, Any], key: str) -> list[str]:
    """A list of document locations from a body; anything else is 400 naming the key."""
    given = body.get(key, [])
    if not isinstance(given, list) or not all(isinstance(v, str) and len(v) <= 1000 for v in given):
        raise ApiError(400, {"message": f"{key} must be a list of document locations"})
    if len(given) > 1000:
        raise ApiError(400, {"message": f"{key} names over 1000 documents"})
    return given


async def workspace_answer(user: str, slug: str, assistant: Mapping[str, Any]) -> dict[str, Any]:
    """A workspace as ``Workspace.get`` answers it: the record, its documents, the window and parsed tokens.

    ``currentContextTokenCount`` counts files parsed into a chat without embedding; every file here is
    embedded, so it is 0.
    """
    record = {k: v for k, v in workspace_record(slug, assistant).items() if k != "threads"}
    held = await DocumentStore().list_documents(document_scope(user, slug))
    window = settings_of(assistant).get("context_window")
    return record | {
        "documents": [document_record(d, record["id"]) for d in held],
        "contextWindow": window,
        "currentContextTokenCount": 0,
    }


@endpoint
async def update_embeddings(request: Request) -> Response:
    """``POST /workspace/{slug}/update-embeddings`` ``{adds, deletes}``: ``{"workspace": {...}}``.

    Deletes go first, then adds, as ``Document.removeDocuments`` and ``addDocuments`` run there. A location
    the library does not hold is skipped, as AnythingLLM skips a file it cannot read. An unknown workspace
    is 400 with an empty body, as there.
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    adds, deletes = locations(body, "adds"), locations(body, "deletes")
    slug = path_workspace(request)
    async with client_of(request) as client:
        try:
            assistant = await workspace(client, slug, user, "write")
        except RouteError as exc:  # unknown to the caller, another user's included; a member's refusal
            if exc.status == 403:
                raise
            return Response(status_code=400)
    store, scope = DocumentStore(), document_scope(user, slug)
    gone = [d.id for d in await store.holders([scope], deletes)]
    if gone:
        await store.remove_documents(scope, gone)
    try:
        for location in adds:
            await store.copy_document(library_of(user), location, scope)
    except EmbeddingMismatch as exc:
        raise ApiError(400, {"workspace": None, "message": str(exc)}) from None
    return JSONResponse({"workspace": await workspace_answer(user, slug, assistant)})


@endpoint
async def remove_documents(request: Request) -> Response:
    """``DELETE /system/remove-documents`` ``{names}``: out of the library and every workspace of the caller.

    ``names`` are locations (``custom-documents/<name>.json``), as ``purgeDocument`` takes them.
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    names = locations(body, "names") if "names" in body else None
    if names is None:
        raise ApiError(400, {"success": False, "message": "names must be a list of document locations"})
    slugs = await own_workspaces(request, user)
    scopes = [library_of(user), *(document_scope(user, slug) for slug in slugs)]
    store = DocumentStore()
    by_scope: dict[str, list[int]] = {}
    for doc in await store.holders(scopes, names):
        by_scope.setdefault(doc.workspace, []).append(doc.id)
    for scope, ids in by_scope.items():
        await store.remove_documents(scope, ids)
    return JSONResponse({"success": True, "message": "Documents removed successfully"})


# ── a workspace's documents ────────────────────────────────────────────────────────────────────────────


@endpoint
async def update_pin(request: Request) -> Response:
    """``POST /workspace/{slug}/update-pin`` ``{docPath, pinStatus}``: 200 ``{"message": ...}`` as there.

    ``docPath`` is a document's ``docpath`` (``GET /workspace/{slug}``), which is also the ``location`` its
    upload answered, as there. A document the workspace does not hold is 404 with an empty body, as there.
    A pinned document is given whole with every message (B8).
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    slug, path, pinned = path_workspace(request), body.get("docPath"), body.get("pinStatus", False)
    if not isinstance(path, str) or not isinstance(pinned, bool):
        raise ApiError(400, {"message": "docPath must be a string and pinStatus true or false"})
    async with client_of(request) as client:
        await workspace(client, slug, user, "write")
    store, scope = DocumentStore(), document_scope(user, slug)
    document = await store.get_document(scope, path)
    if document is None:
        return Response(status_code=404)
    await store.set_pinned(scope, [document.id], pinned)
    return JSONResponse({"message": "Pin status updated successfully"})


def _number(value: Any, low: float, high: float, default: float) -> float:
    """A number within bounds, else the default (AnythingLLM falls back to the workspace's setting)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if low <= number <= high else default


@endpoint
async def vector_search(request: Request) -> Response:
    """``POST /workspace/{slug}/vector-search``: ``{query, topN, scoreThreshold}`` → ``{"results"}``."""
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    slug = path_workspace(request)
    async with client_of(request) as client:
        settings = settings_of(await workspace(client, slug, user))
    query = body.get("query")
    if not isinstance(query, str) or not query:
        raise ApiError(400, {"message": "Query parameter cannot be empty."})
    top_n = int(_number(body.get("topN"), 1, 1000, settings.get("top_n", 4)))
    threshold = _number(body.get("scoreThreshold"), 0.0, 1.0, settings.get("similarity_threshold", 0.25))
    mode: SearchMode = "hybrid" if settings.get("search_mode") == "hybrid" else "dense"
    scope = document_scope(user, slug)
    found = await search(DocumentStore(), scope, query, top_n=top_n, threshold=threshold, mode=mode)
    if found.problem and not found.hits:
        return JSONResponse({"results": [], "message": "No embeddings found for this workspace."})
    results = [
        {
            "id": str(hit.id),
            "text": hit.text,
            "metadata": {
                "url": hit.source,
                "title": hit.title,
                "author": None,
                "description": None,
                "docSource": hit.source,
                "chunkSource": hit.source,
                "published": None,
                "wordCount": len(hit.text.split()),
                "tokenCount": None,
            },
            "distance": hit.distance,
            "score": hit.similarity,
        }
        for hit in found.hits
    ]
    return JSONResponse({"results": results})


routes: list[BaseRoute] = [
    Route("/documents", list_documents, methods=["GET"]),
    Route("/documents/folder/{folder}", folder_documents, methods=["GET"]),
    Route("/document/accepted-file-types", accepted_file_types, methods=["GET"]),
    Route("/document/metadata-schema", metadata_schema, methods=["GET"]),
    Route("/document/upload", upload_document, methods=["POST"]),
    Route("/document/raw-text", upload_raw_text, methods=["POST"]),
    Route("/document/upload-link", upload_link, methods=["POST"]),
    Route("/document/{name}", get_document, methods=["GET"]),  # last, as there: it takes any name
    Route("/system/remove-documents", remove_documents, methods=["DELETE"]),
    Route("/workspace/{slug}/update-embeddings", update_embeddings, methods=["POST"]),
    Route("/workspace/{slug}/update-pin", update_pin, methods=["POST"]),
    Route("/workspace/{slug}/vector-search", vector_search, methods=["POST"]),
]
