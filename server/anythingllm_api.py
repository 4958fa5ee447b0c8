"""AnythingLLM's developer API under ``/api/v1``, so its integrations keep working.

The routes answer in AnythingLLM's shapes (``server/endpoints/api/workspace``, ``workspaceThread`` and
``document`` of its source), and run the graphs through the very server they are mounted in, as a client of
it with the caller's own key: identity, ownership, the run rules of ``server/policy.py`` and approvals are
enforced by ``server/auth.py`` exactly as for any other client, not by a second copy here. The routes that
touch documents directly (``server/anythingllm_documents.py``) act in this process, in the caller's own
workspaces and library (``document_scope``), named by the key's user.

Mapping:
    - A workspace is a slug named by one of the caller's ``agent`` assistants (``context.workspace``);
      ``default`` always exists. Its settings are the assistant's. A workspace another user shared with the
      caller is listed and named ``owner~slug`` (a path segment cannot hold the ``/`` of ``owner/slug``, and
      no slug holds a ``~``); its settings are those published for its members, a manager changes them with
      ``update``, and only its owner deletes it.
    - A conversation is a thread of the server. ``sessionId`` (none: the workspace's API conversation) and a
      thread's slug are kept in the thread's metadata, and found again by a search the server filters by
      owner: another user's session or thread is never found (404 for a thread slug, a new conversation of
      one's own for a session id). ``reset: true`` starts a new thread for the conversation, and the
      ``chats`` routes read the conversation back as the thread keeps it.
    - A stream whose client leaves cancels its run, so no half turn reaches the chat log.
    - ``@agent`` and ``mode`` (``automatic``, ``chat``, ``query``) are the graph's own (decision A3).

Shapes (from AnythingLLM's source, ``Mintplex-Labs/anything-llm``): ``/auth`` from
``server/endpoints/api/auth/index.js``; ``/api/ping`` from ``server/endpoints/system.js``; a wrong key's 403
from ``server/utils/middleware/validApiKey.js``; workspaces and ``/workspace/{slug}`` from
``server/endpoints/api/workspace/index.js`` and the ``workspaces`` model of ``server/prisma/schema.prisma``;
threads from ``server/endpoints/api/workspaceThread/index.js`` and ``server/models/workspaceThread.js``;
chat replies and stream chunks from ``server/utils/chats/apiChatHandler.js`` and
``server/utils/helpers/chat/responses.js``; ``metrics`` from
``server/utils/helpers/chat/LLMPerformanceMonitor.js``; history items from ``convertToChatHistory`` of
``responses.js``.

Differences kept on purpose: workspace and thread ``id``s are the server's assistant and thread ids (UUID
strings: the server has no integer ids for them), while ``chatId`` is the chat log's integer row id as in
AnythingLLM; ``/workspace/{slug}/chats`` reads the conversation's current thread (a ``reset`` starts a new
one, where AnythingLLM keeps the old rows of the session); history items carry ``metrics: {}`` and
``feedbackScore: null`` because the chat log keeps neither.

Better than AnythingLLM, which denies every approval-needing tool in API runs: a chat that stops at an
approval answers ``type: "textResponse"`` with a sentence naming the waiting calls, and an extra field
``pendingApproval: {"calls": [{"id", "name", "args", "description"}], "allowedDecisions": [...]}``.
The same chat route (or ``POST /workspace/{slug}/thread/{threadSlug}/approve``) with
``{"decisions": [{"type": "approve" | "edit" | "reject", "tool_call_id": ...}]}`` resumes the thread with
``Command(resume=...)``; the thread then goes on. Nothing in a request can loosen approval or name a file
on the server: an upload is bytes only. A question of the model (``ask_person``) comes back the same way:
``textResponse`` is the question, ``pendingQuestion: {"id", "question", "choices"}`` says so, and the same
route with ``{"answer": "..."}`` answers it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from langgraph_sdk.client import LangGraphClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..checkpoints.chatlog import SCHEMA as CHAT_LOG_SCHEMA
from ..checkpoints.chunks import Document, DocumentStore
from ..checkpoints.db import connection, ensure_schema
from ..checkpoints.members import Need, NotAllowed, WorkspaceUnknown, require
from ..core.approval import ResumeError, checked_decisions
from ..core.context import Context, ContextError, document_scope
from ..providers.tokens import count as token_count
from ..providers.tokens import ensure_tokenizer
from .http_common import (
    RouteError,
    assistant_for,
    caller,
    check_message,
    read_json,
    refused_message,
    server_client,
    shared_assistant,
    shared_workspaces,
    workspace_assistants,
    workspace_of,
)
from .members_api import publish_change

GRAPH = "agent"
DEFAULT_WORKSPACE = "default"
VALID_MODES = ("automatic", "chat", "query")
WORKSPACE_KEY, SESSION_KEY, THREAD_KEY = "anythingllm_workspace", "anythingllm_session", "anythingllm_thread"
NO_KEY = "No valid api key found."
SMALL_BODY = 1024 * 1024
DECISIONS = ("approve", "edit", "reject")
#: What joins owner and slug in a shared workspace's path slug (``owner~slug``).
SHARED_MARK = "~"

Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    """A request answered with ``status`` and ``body`` (AnythingLLM's error shape for the route)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body))
        self.status, self.body = status, body


def chat_reply(
    kind: str,
    text: str | None,
    *,
    answer_id: str | None = None,
    sources: list[dict[str, Any]] | None = None,
    close: bool = True,
    error: str | bool | None = None,
    metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole chat answer in AnythingLLM's shape (``ResponseObject`` of ``apiChatHandler.js``).

    ``id`` is its name for the answer's uuid; its stream chunks name it ``uuid``, so both are given and a
    client reading either finds it. ``metrics`` is ``{}`` where AnythingLLM sends ``{}`` (a reset, a refusal).
    """
    answer_id = answer_id or str(uuid.uuid4())
    return {
        "id": answer_id,
        "uuid": answer_id,
        "type": kind,
        "textResponse": text,
        "sources": sources or [],
        "close": close,
        "error": error,
        "metrics": metrics or {},
    }


def abort(error: str) -> dict[str, Any]:
    """AnythingLLM's failed chat: ``type: "abort"`` with the reason in ``error``."""
    return chat_reply("abort", None, error=error)


def endpoint(handler: Handler) -> Handler:
    """Answer a refusal in AnythingLLM's shape: ``{"error"}`` for a key, the route's own body otherwise.

    A missing or wrong key is 403 ``{"error": "No valid api key found."}``, as AnythingLLM's
    ``validApiKey`` middleware answers it (``server/utils/middleware/validApiKey.js``): its clients read
    403 as "bad key", so ``http_common``'s 401 is answered as 403 here. Any other ``RouteError`` (403, 404,
    400, 413) and an error of the server behind the route (its 404 for another's thread, 409 for a busy
    one, 403 for a refused run) are answered alike.
    """

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return JSONResponse(exc.body, status_code=exc.status)
        except RouteError as exc:
            if exc.status in (401, 403):
                key_error = NO_KEY if exc.status == 401 else exc.message
                return JSONResponse({"error": key_error}, status_code=403)
            return JSONResponse(abort(exc.message), status_code=exc.status)
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            if status == 401:
                return JSONResponse({"error": NO_KEY}, status_code=403)
            return JSONResponse(abort(_detail(exc.response)), status_code=status if status < 500 else 502)

    answer.__name__ = handler.__name__
    answer.__doc__ = handler.__doc__
    return answer


def _detail(response: httpx.Response) -> str:
    """The server's reason for refusing a request, as plain text."""
    try:
        body = response.json()
    except ValueError:
        return response.text or f"HTTP {response.status_code}"
    return str(body.get("detail") or body.get("message") or body) if isinstance(body, dict) else str(body)


# ── the server behind the routes, and request bodies ──────────────────────────────────────────────────


@asynccontextmanager
async def client_of(request: Request) -> AsyncIterator[LangGraphClient]:
    """A client of this server in the caller's name (``http_common.server_client``), closed after use."""
    client = server_client(request)
    try:
        yield client
    finally:
        with anyio.CancelScope(shield=True):  # also when the caller's disconnect cancelled the request
            await client.http.client.aclose()


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body of an upload, refused with 413 once it passes ``limit`` (before it is all read)."""
    declared = request.headers.get("content-length", "")
    too_large = RouteError(413, f"the request body is over {limit} bytes")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    parts: list[bytes] = []
    async for part in request.stream():
        parts.append(part)
        if sum(map(len, parts)) > limit:
            raise too_large
    request._body = b"".join(parts)  # where Starlette's form parser reads a body already consumed
    return request._body


# ── workspaces ─────────────────────────────────────────────────────────────────────────────────────────


def settings_of(assistant: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant's workspace settings: its context, or the configurable of older assistants."""
    return dict(assistant.get("context") or (assistant.get("config") or {}).get("configurable") or {})


def named_workspace(slug: str) -> str:
    """The workspace this API's slug names: the caller's own, or ``owner/slug`` for ``owner~slug``."""
    owner, mark, name = slug.rpartition(SHARED_MARK)
    return f"{owner}/{name}" if mark and owner and name else slug


def path_workspace(request: Request) -> str:
    """The workspace a path's ``{slug}`` names (``named_workspace``)."""
    return named_workspace(str(request.path_params["slug"]))


def path_slug(workspace: str) -> str:
    """A workspace as this API's paths and records name it: ``owner/slug`` becomes ``owner~slug``."""
    owner, sep, name = workspace.rpartition("/")
    return f"{owner}{SHARED_MARK}{name}" if sep else workspace


async def workspace(client: LangGraphClient, slug: str, user: str, need: Need = "read") -> Mapping[str, Any]:
    """The caller's assistant for ``slug``; 404 when the caller has no such workspace.

    The server shows each caller their own assistants only, so a stranger's workspace is unknown here. A
    workspace shared with the caller (``owner/slug``) is the one its members' runs start from, checked for
    ``need``; one not shared with them is unknown in the same words.
    """
    unknown = RouteError(404, f"Workspace {path_slug(slug)} is not a valid workspace.")
    try:
        found = await shared_assistant(user, slug, need) or await assistant_for(client, slug)
    except WorkspaceUnknown:
        raise unknown from None
    except NotAllowed as exc:
        raise RouteError(403, str(exc)) from None
    if found is None and slug == DEFAULT_WORKSPACE:
        return {"assistant_id": GRAPH, "name": DEFAULT_WORKSPACE}
    if found is None:
        raise unknown
    return found


async def workspaces(client: LangGraphClient, user: str) -> dict[str, Mapping[str, Any]]:
    """The caller's workspaces by slug, each with the assistant that holds its settings; shared ones too."""
    slugs = {workspace_of(a) for a in await workspace_assistants(client)} | {DEFAULT_WORKSPACE}
    slugs |= {ref for ref, _ in await shared_workspaces(user)}
    return {slug: await workspace(client, slug, user) for slug in sorted(slugs)}


def stamp(value: Any) -> Any:
    """A server timestamp as AnythingLLM's JSON writes its dates (ISO 8601); strings pass as they are."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def workspace_record(slug: str, assistant: Mapping[str, Any]) -> dict[str, Any]:
    """A workspace as AnythingLLM lists it (its ``workspaces`` model), read from the assistant's settings.

    ``id`` is the assistant's id, a UUID string where AnythingLLM has an integer: it is what names the
    workspace's settings on this server. Providers and models are the deployment's, not a workspace's, so
    ``chatProvider chatModel agentProvider agentModel`` are ``null`` (AnythingLLM's "use the system's").
    """
    values = {k: v for k, v in settings_of(assistant).items() if k != "user_id"}
    try:
        ctx = Context.from_mapping(values)
    except ContextError:
        ctx = Context()
    return {
        "id": assistant.get("assistant_id"),
        "name": assistant.get("name") if assistant.get("name") not in (None, GRAPH) else slug,
        "slug": path_slug(slug),
        "vectorTag": None,
        "createdAt": stamp(assistant.get("created_at")),
        "openAiTemp": None,
        "openAiHistory": ctx.history_limit,
        "lastUpdatedAt": stamp(assistant.get("updated_at")),
        "openAiPrompt": ctx.system_prompt,
        "similarityThreshold": ctx.similarity_threshold,
        "chatProvider": None,
        "chatModel": None,
        "topN": ctx.top_n,
        "chatMode": ctx.chat_mode,
        "pfpFilename": None,
        "agentProvider": None,
        "agentModel": None,
        "queryRefusalResponse": ctx.query_refusal_response,
        "vectorSearchMode": "default",
        "threads": [],
    }


async def threads_of(client: LangGraphClient, slug: str) -> list[dict[str, Any]]:
    """The caller's threads of a workspace (made by ``thread/new``), oldest first.

    Returned with AnythingLLM's ``workspace_threads`` fields plus this server's ids; each route picks the
    fields its ``include`` selects.
    """
    return [
        thread_record(t) for t in await all_threads(client, slug) if THREAD_KEY in (t.get("metadata") or {})
    ]


async def all_threads(client: LangGraphClient, slug: str) -> list[dict[str, Any]]:
    """Every thread of the caller's in a workspace, its sessions' and its thread slugs', oldest first.

    The server's search shows the caller's own threads only.
    """
    found: list[dict[str, Any]] = []
    while True:
        page = await client.threads.search(
            metadata={WORKSPACE_KEY: slug},
            limit=100,
            offset=len(found),
            sort_by="created_at",
            sort_order="asc",
        )
        found += [dict(t) for t in page]
        if len(page) < 100:
            return found


def thread_record(
    thread: Mapping[str, Any], user: str | None = None, workspace_id: Any = None
) -> dict[str, Any]:
    """A thread as AnythingLLM's ``workspace_threads`` row (``server/prisma/schema.prisma``).

    ``id`` is the server's thread id (a UUID string, not an integer) and ``user_id`` the key's user name.
    """
    metadata = thread.get("metadata") or {}
    return {
        "id": thread.get("thread_id"),
        "name": metadata.get("thread_name") or "Thread",
        "slug": metadata.get(THREAD_KEY),
        "workspace_id": workspace_id,
        "user_id": user if user is not None else metadata.get("owner") or metadata.get("user_id"),
        "createdAt": stamp(thread.get("created_at")),
        "lastUpdatedAt": stamp(thread.get("updated_at")),
    }


@endpoint
async def list_workspaces(request: Request) -> Response:
    """``GET /workspaces``: ``{"workspaces": [...]}``, each with its ``threads`` (``user_id slug name``)."""
    user = await caller(request)
    async with client_of(request) as client:
        found = await workspaces(client, user)
        listed = []
        for slug, assistant in found.items():
            threads = [{k: t[k] for k in ("user_id", "slug", "name")} for t in await threads_of(client, slug)]
            listed.append({**workspace_record(slug, assistant), "threads": threads})
    return JSONResponse({"workspaces": listed})


def document_record(doc: Document, workspace_id: Any) -> dict[str, Any]:
    """A document as AnythingLLM's ``workspace_documents`` row: ``metadata`` is a JSON string there too."""
    metadata = {"title": doc.title, "docSource": doc.source, "chunkSource": doc.source, "chunks": doc.chunks}
    return {
        "id": doc.id,
        "docId": str(doc.id),
        "filename": doc.title,
        "docpath": doc.source,
        "workspaceId": workspace_id,
        "metadata": json.dumps(metadata),
        "pinned": doc.pinned,
        "watched": False,
        "createdAt": stamp(doc.created_at),
        "lastUpdatedAt": stamp(doc.updated_at),
    }


@endpoint
async def get_workspace(request: Request) -> Response:
    """``GET /workspace/{slug}``: ``{"workspace": [ {..., "documents", "threads"} ]}``, a list as there.

    AnythingLLM answers with ``findMany``, so a slug it does not know is 200 ``{"workspace": []}``; a
    workspace of another user's is unknown to the caller and gets the same. ``threads`` has
    ``user_id slug`` as its ``include`` selects.
    """
    user = await caller(request)
    slug = path_workspace(request)
    async with client_of(request) as client:
        try:
            assistant = await workspace(client, slug, user)
        except RouteError:
            return JSONResponse({"workspace": []})
        threads = [{"user_id": t["user_id"], "slug": t["slug"]} for t in await threads_of(client, slug)]
    record = workspace_record(slug, assistant)
    docs = await DocumentStore().list_documents(document_scope(user, slug))
    record |= {"documents": [document_record(d, record["id"]) for d in docs], "threads": threads}
    return JSONResponse({"workspace": [record]})


#: AnythingLLM's writable workspace fields (``Workspace.writable``) that a setting here holds. The others
#: (``chatProvider chatModel agentProvider agentModel vectorSearchMode router_id``) name the deployment's
#: choices, which a workspace cannot change here, and are ignored as AnythingLLM ignores unknown fields.
WRITABLE = {
    "openAiTemp": "temperature",
    "openAiHistory": "history_limit",
    "openAiPrompt": "system_prompt",
    "similarityThreshold": "similarity_threshold",
    "topN": "top_n",
    "chatMode": "chat_mode",
    "queryRefusalResponse": "query_refusal_response",
}


def written_settings(body: Mapping[str, Any], slug: str, base: Mapping[str, Any]) -> dict[str, Any]:
    """The workspace settings a ``workspace/new`` or ``update`` body asks for, over ``base``, checked.

    AnythingLLM coerces what it gets (``"0.7"`` becomes 0.7, a bad value its default); here a value of the
    wrong type or out of range is refused with the field named, as every other way of setting it is.

    Raises:
        ApiError: 400 ``{"workspace": null, "message"}`` naming the field.
    """
    settings = {
        **base,
        **{ours: body[theirs] for theirs, ours in WRITABLE.items() if body.get(theirs) is not None},
    }
    settings["workspace"] = slug
    try:
        Context.from_mapping({k: v for k, v in settings.items() if k != "user_id"})
    except ContextError as exc:
        raise ApiError(400, {"workspace": None, "message": str(exc)}) from None
    return settings


def workspace_name(body: Mapping[str, Any]) -> str | None:
    """The name a body gives, as AnythingLLM keeps it (255 characters); ``None`` when it gives none."""
    name = body.get("name")
    return name.strip()[:255] if isinstance(name, str) and name.strip() else None


@endpoint
async def new_workspace(request: Request) -> Response:
    """``POST /workspace/new``: ``{"workspace": {...}, "message": null}``, as ``Workspace.new`` answers.

    The slug is the name's (``slugify``); a slug the caller already has gets ``-<8 digits>`` as there.
    The workspace is an assistant of the agent graph, the caller's own, holding its settings.
    """
    await caller(request)
    body = await read_json(request, SMALL_BODY)
    name = workspace_name(body)
    if name is None:
        raise ApiError(400, {"workspace": None, "message": "name cannot be null"})
    async with client_of(request) as client:
        taken = set(await workspaces(client, await caller(request)))
        slug = slugify(name)[:64].strip("-_.") or str(uuid.uuid4())
        if slug in taken:
            slug = f"{slug[:55]}-{uuid.uuid4().int % 90_000_000 + 10_000_000}"
        settings = written_settings(body, slug, {})
        created = await client.assistants.create(GRAPH, context=settings, name=name)
    return JSONResponse({"workspace": workspace_record(slug, created), "message": None})


@endpoint
async def update_workspace(request: Request) -> Response:
    """``POST /workspace/{slug}/update``: ``{"workspace": {...}, "message": null}``, as ``Workspace.update``.

    A body with no field a setting holds is 200 ``{"workspace": {"id"}, "message": "No valid fields to
    update!"}`` as there. The built-in ``default`` workspace gets an assistant of the caller's own. A
    shared workspace's manager changes the settings published for its members (its name stays its
    ``owner/slug``); a member is refused with 403.
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    slug = path_workspace(request)
    async with client_of(request) as client:
        assistant = await workspace(client, slug, user, "write")
        name = workspace_name(body)
        if name is None and not any(body.get(theirs) is not None for theirs in WRITABLE):
            return JSONResponse(
                {"workspace": {"id": assistant.get("assistant_id")}, "message": "No valid fields to update!"}
            )
        settings = written_settings(body, slug, settings_of(assistant))
        if "/" in slug:
            try:
                published = await publish_change(user, await require(user, slug, "write"), settings)
            except RouteError as exc:
                raise ApiError(400, {"workspace": None, "message": exc.message}) from None
            shared = {**assistant, "context": {**published, "workspace": slug}}
            return JSONResponse({"workspace": workspace_record(slug, shared), "message": None})
        if (
            assistant.get("assistant_id") == GRAPH
            or (assistant.get("metadata") or {}).get("created_by") == "system"
        ):
            updated = await client.assistants.create(GRAPH, context=settings, name=name or slug)
        elif name:
            updated = await client.assistants.update(
                str(assistant["assistant_id"]), context=settings, name=name
            )
        else:
            updated = await client.assistants.update(str(assistant["assistant_id"]), context=settings)
    return JSONResponse({"workspace": workspace_record(slug, updated), "message": None})


@endpoint
async def delete_workspace(request: Request) -> Response:
    """``DELETE /workspace/{slug}``: 200 with an empty body; an unknown slug is 400, as AnythingLLM answers.

    Everything of the caller's in it goes: the assistants holding its settings, its threads (sessions and
    thread slugs) and its documents. Another user's workspace of that name is unknown to the caller; one
    shared with the caller is its owner's to delete (403).
    """
    user = await caller(request)
    slug = path_workspace(request)
    if "/" in slug:
        try:
            await require(user, slug)
        except WorkspaceUnknown:
            return Response(status_code=400)
        raise RouteError(403, f"{slug} is shared with you: only its owner deletes it")
    async with client_of(request) as client:
        mine = [a for a in await workspace_assistants(client) if workspace_of(a) == slug]
        mine = [a for a in mine if (a.get("metadata") or {}).get("created_by") != "system"]
        if not mine:
            return Response(status_code=400)
        for thread in await all_threads(client, slug):
            await client.threads.delete(str(thread["thread_id"]))
        for assistant in mine:
            await client.assistants.delete(str(assistant["assistant_id"]))
    store = DocumentStore()
    scope = document_scope(user, slug)
    await store.remove_documents(scope, [d.id for d in await store.list_documents(scope)])
    return Response(status_code=200)


@endpoint
async def check_key(request: Request) -> Response:
    """``GET /auth``: ``{"authenticated": true}`` for a valid key (``server/endpoints/api/auth/index.js``).

    Clients call it first to check a key; a wrong one is the 403 every route answers (``endpoint``).
    """
    await caller(request)
    return JSONResponse({"authenticated": True})


async def ping(request: Request) -> Response:
    """``GET /api/ping``: ``{"online": true}``, keyless (``server/endpoints/system.js`` of AnythingLLM)."""
    return JSONResponse({"online": True})


# ── conversations (threads) ────────────────────────────────────────────────────────────────────────────


async def conversation(
    client: LangGraphClient, slug: str, key: str, name: str, *, create: bool, fresh: bool = False
) -> str | None:
    """The thread of one of the caller's conversations: the newest with this metadata, or a new one.

    Args:
        client: The caller's client; the server's search shows the caller's own threads only.
        slug: The workspace.
        key: ``SESSION_KEY`` or ``THREAD_KEY``.
        name: The session id or thread slug.
        create: Start the conversation when it has no thread yet (a session does; a thread slug does not).
        fresh: Start a new thread even when one exists (``reset``).
    """
    metadata = {WORKSPACE_KEY: slug, key: name}
    if not fresh:
        found = await client.threads.search(
            metadata=metadata, limit=1, sort_by="created_at", sort_order="desc"
        )
        if found:
            return str(found[0]["thread_id"])
        if not create:
            return None
    return str((await client.threads.create(metadata=metadata))["thread_id"])


SLUG_WORDS = {"+": " plus ", "!": " bang ", "@": " at ", "*": " splat ", ".": " dot "}


def slugify(text: str) -> str:
    """A thread slug as AnythingLLM makes one from a given slug (``WorkspaceThread.slugify``, lowercase).

    ``+ ! @ * .`` become words, other characters that are no letter, digit, ``-`` or ``_`` are dropped,
    and runs of spaces become one ``-``, so the slug is safe in a URL.
    """
    for char, word in SLUG_WORDS.items():
        text = text.replace(char, word)
    text = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"\s+", "-", text.strip())


@endpoint
async def new_thread(request: Request) -> Response:
    """``POST /workspace/{slug}/thread/new``: ``{"thread": {...}, "message": null}``.

    As ``server/endpoints/api/workspaceThread/index.js``: the thread is a ``workspace_threads`` row
    (``thread_record``); a given slug is slugified; a slug the caller already has in the workspace is
    200 ``{"thread": null, "message": ...}``, as AnythingLLM answers its unique-slug failure.
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    slug = path_workspace(request)
    name = str(body["name"]) if body.get("name") else "Thread"
    given = body.get("slug")
    if given is not None and (not isinstance(given, str) or not given.strip()):
        raise ApiError(400, {"thread": None, "message": "slug must be a non-empty string"})
    thread_slug = slugify(given) if given else str(uuid.uuid4())
    if not thread_slug:
        raise ApiError(400, {"thread": None, "message": f"slug {given!r} has no character a slug can keep"})
    async with client_of(request) as client:
        assistant = await workspace(client, slug, user)
        if given and await conversation(client, slug, THREAD_KEY, thread_slug, create=False):
            message = f"Unique constraint failed on the fields: (`slug`): {thread_slug!r} exists in {slug}"
            return JSONResponse({"thread": None, "message": message})
        created = await client.threads.create(
            metadata={WORKSPACE_KEY: slug, THREAD_KEY: thread_slug, "thread_name": name}
        )
    thread = thread_record(dict(created), user, assistant.get("assistant_id"))
    return JSONResponse({"thread": thread, "message": None})


@endpoint
async def update_thread(request: Request) -> Response:
    """``POST /workspace/{slug}/thread/{thread}/update``: renames it; ``{"thread": {...}, "message": null}``.

    As ``server/endpoints/api/workspaceThread/index.js``: 404 ``{"message": "Thread not found"}`` for a slug
    the caller has no thread of (another user's threads are not the caller's to find).
    """
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ApiError(400, {"thread": None, "message": "name must be a non-empty string"})
    slug, thread_slug = path_workspace(request), request.path_params["thread"]
    async with client_of(request) as client:
        assistant = await workspace(client, slug, user)
        thread_id = await conversation(client, slug, THREAD_KEY, thread_slug, create=False)
        if thread_id is None:
            raise ApiError(404, {"message": "Thread not found"})
        updated = await client.threads.update(thread_id, metadata={"thread_name": name.strip()[:255]})
    return JSONResponse(
        {"thread": thread_record(dict(updated), user, assistant.get("assistant_id")), "message": None}
    )


@endpoint
async def delete_thread(request: Request) -> Response:
    """``DELETE /workspace/{slug}/thread/{thread}``: 200 with an empty body, as AnythingLLM answers.

    Every thread of the caller's with that slug in the workspace goes, with its checkpoints; a slug with none
    is 200 too (AnythingLLM deletes by slug and does not look first).
    """
    user = await caller(request)
    slug, thread_slug = path_workspace(request), request.path_params["thread"]
    async with client_of(request) as client:
        await workspace(client, slug, user)
        found = await client.threads.search(
            metadata={WORKSPACE_KEY: slug, THREAD_KEY: thread_slug}, limit=100
        )
        for thread in found:
            await client.threads.delete(thread["thread_id"])
    return Response(status_code=200)


# ── chat ───────────────────────────────────────────────────────────────────────────────────────────────


def attachment_block(item: Any) -> dict[str, Any]:
    """An AnythingLLM attachment (``{name, mime, contentString: "data:...;base64,..."}``) as a content block.

    Documents (``application/anythingllm-document``) and images become the LangChain blocks the chat's
    upload node reads, so they meet the same caps and the same bounded extraction.
    """
    if not isinstance(item, dict) or not isinstance(item.get("contentString"), str):
        raise ApiError(400, abort("each attachment needs name, mime and contentString (a data URL)"))
    data, mime = item["contentString"], str(item.get("mime") or "")
    if data.startswith("data:") and "," in data:
        head, data = data[5:].split(",", 1)
        mime = head.split(";")[0] or mime
    kind = "image" if mime.startswith("image/") else "file"
    block = {"type": kind, "base64": data, "mime_type": mime}
    return {**block, "filename": str(item["name"])} if isinstance(item.get("name"), str) else block


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """A chat's parts, checked as AnythingLLM checks them (400 ``Message is empty`` and the like)."""
    message, mode, decisions = body.get("message") or "", body.get("mode"), body.get("decisions")
    answer = body.get("answer")
    if answer is not None and (not isinstance(answer, str) or not answer.strip()):
        raise ApiError(400, abort("answer must be the text of your answer to the pending question"))
    if not isinstance(message, str):
        raise ApiError(400, abort("message must be a string"))
    if mode is not None and mode not in VALID_MODES:
        raise ApiError(400, abort(f"{mode} is not a valid mode."))
    if decisions is not None:
        try:
            decisions = checked_decisions(decisions)
        except ResumeError as exc:
            raise ApiError(400, abort(f"decisions: {exc}")) from None
    attachments = body.get("attachments") or []
    if not isinstance(attachments, list):
        raise ApiError(400, abort("attachments must be a list"))
    reset = body.get("reset") is True
    if not message and not decisions and not answer and not reset:
        raise ApiError(400, abort("Message is empty"))
    if decisions and answer:
        raise ApiError(400, abort("send decisions or an answer, not both"))
    blocks = [attachment_block(a) for a in attachments]
    if message and not decisions and not answer:  # the turn's message: what the graph's first node refuses
        check_message(message_content(message, blocks), "message")
    session = body.get("sessionId")
    return {
        "message": message,
        "mode": mode,
        "decisions": decisions,
        "answer": answer,
        "blocks": blocks,
        "reset": reset,
        "session": "" if session in (None, "") else str(session),
    }


def run_payload(parts: dict[str, Any], slug: str) -> dict[str, Any]:
    """The run's input (or resume) and context: the workspace, and the mode when the request names one."""
    context: dict[str, Any] = {"workspace": slug}
    if parts["mode"]:
        context["chat_mode"] = parts["mode"]
    if parts["decisions"]:
        return {"command": {"resume": {"decisions": parts["decisions"]}}, "context": context}
    if parts["answer"]:
        return {"command": {"resume": {"answer": parts["answer"]}}, "context": context}
    content = message_content(parts["message"], parts["blocks"])
    return {"input": {"messages": [{"role": "user", "content": content}]}, "context": context}


def message_content(message: str, blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """The user message's content as the graph takes it: the text, with the attachments' blocks after it."""
    return [{"type": "text", "text": message}, *blocks] if blocks else message


def text_of(content: Any) -> str:
    """A message's text, whether a string or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def answer_of(values: dict[str, Any]) -> str:
    """The turn's answer: the last assistant message after the last user message."""
    text = ""
    for message in values.get("messages") or []:
        if message.get("type") == "human":
            text = ""
        elif message.get("type") == "ai" and not message.get("tool_calls"):
            text = text_of(message.get("content"))
    return text


def source_record(source: Mapping[str, Any]) -> dict[str, Any]:
    """One citation in AnythingLLM's shape (``title``, ``chunk``), with ours beside them."""
    return {
        "id": source.get("document_id"),
        "title": source.get("title") or source.get("document"),
        "chunk": source.get("text"),
        "text": source.get("text"),
        "url": source.get("document"),
        "docSource": source.get("document"),
        "chunkSource": source.get("document"),
        "score": source.get("score"),
        "pinned": bool(source.get("pinned")),
    }


def sources_of(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's citations (``source_record``)."""
    return [source_record(s) for s in values.get("sources") or []]


def pending_of(state: dict[str, Any]) -> dict[str, Any] | None:
    """The approval the thread waits for, as ``pendingApproval``; ``None`` when it waits for none."""
    for task in state.get("tasks") or []:
        for interrupt in task.get("interrupts") or []:
            value = interrupt.get("value") or {}
            if isinstance(value, dict) and value.get("type") == "tool_approval":
                calls = [
                    {
                        "id": a.get("tool_call_id"),
                        "name": a.get("name"),
                        "args": a.get("args"),
                        "description": a.get("description"),
                    }
                    for a in value.get("action_requests") or []
                ]
                return {"calls": calls, "allowedDecisions": list(DECISIONS), "error": value.get("error")}
    return None


def question_of(state: dict[str, Any]) -> dict[str, Any] | None:
    """The model's question the thread waits on (``ask_person``), as ``pendingQuestion``; ``None`` if none.

    AnythingLLM's agent asks through its websocket (``request-user-input``); over this API the question
    comes back like a pending approval, and the same chat route with ``{"answer": "..."}`` answers it.
    """
    for task in state.get("tasks") or []:
        for interrupt in task.get("interrupts") or []:
            value = interrupt.get("value") or {}
            if isinstance(value, dict) and value.get("type") == "question":
                return {
                    "id": value.get("tool_call_id"),
                    "question": value.get("question"),
                    "choices": value.get("choices"),
                    "error": value.get("error"),
                }
    return None


def question_text(question: dict[str, Any]) -> str:
    """What a client that knows nothing of questions shows: the question, its choices, how to answer."""
    choices = f" ({' / '.join(question['choices'])})" if question.get("choices") else ""
    return f'{question["question"]}{choices}\n\nAnswer with the same chat route and {{"answer": "..."}}.'


def waiting_text(pending: dict[str, Any]) -> str:
    """What a client that knows nothing of approvals shows: which calls wait, and how to answer them."""
    calls = ", ".join(f"{c['name']} {json.dumps(c['args'])} (id {c['id']})" for c in pending["calls"])
    return (
        f"Waiting for approval: {calls}. Send the same chat request with "
        '{"decisions": [{"type": "approve" | "edit" | "reject", "tool_call_id": ...}]} to go on.'
    )


def refused(values: dict[str, Any]) -> bool:
    """Whether the turn was query mode's refusal (no document context): the graph's ``stop_reason``."""
    return values.get("stop_reason") == "refused"


def refusal_reply(values: dict[str, Any], answer_id: str, *, streamed: bool) -> dict[str, Any]:
    """Query mode's refusal as AnythingLLM sends it: one ``textResponse``, no sources, ``metrics: {}``.

    ``apiChatHandler.js`` answers it before any model call, so it has no ``chatId``; its streamed form (one
    chunk, ``close: true``) also carries ``attachments: []``.
    """
    reply = chat_reply("textResponse", answer_of(values), answer_id=answer_id)
    return {**reply, "attachments": []} if streamed else reply


def turn_messages(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The running turn's messages: the last user message and everything after it (``turn_start``)."""
    messages = [m for m in values.get("messages") or [] if isinstance(m, dict)]
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("type") == "human"), 0)
    return messages[start:]


def metrics_of(values: dict[str, Any], duration: float, streamed_chunks: int | None = None) -> dict[str, Any]:
    """The turn's ``metrics`` as AnythingLLM computes them (``LLMPerformanceMonitor.js``).

    Tokens are the usage the model reported on each of the turn's AI messages (every model round of an
    agent turn, summed). Where it reported none (a streamed call without usage), AnythingLLM's own
    estimates stand in, as in ``handleDefaultStreamResponseV2`` and ``measureStream``: one completion
    token per streamed chunk (else the answer's tokens), and the prompt's tokens counted with 3 per message
    and 5 for the reply (``providers/tokens.count_messages``' rule) over the thread's messages before the
    answer; system prompt and document context, not kept in the thread, are not counted.
    ``duration`` is the run's wall time in seconds, as AnythingLLM times its model call, and ``outputTps``
    is completion tokens over that duration.
    """
    turn = turn_messages(values)
    answers = [m for m in turn if m.get("type") == "ai"]
    usages = [m.get("usage_metadata") or {} for m in answers]
    prompt = sum(int(u.get("input_tokens") or 0) for u in usages)
    completion = sum(int(u.get("output_tokens") or 0) for u in usages)
    if not prompt and not completion and answers:
        asked = (values.get("messages") or [])[: len(values.get("messages") or []) - len(turn) + 1]
        prompt = 3 * len(asked) + sum(token_count(text_of(m.get("content"))) for m in asked) + 5
        completion = streamed_chunks or token_count(answer_of(values))
    metrics: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "outputTps": completion / duration if duration > 0 else 0,
        "duration": duration,
    }
    model = next(
        (
            str(m["response_metadata"]["model_name"])
            for m in reversed(answers)
            if isinstance(m.get("response_metadata"), dict) and m["response_metadata"].get("model_name")
        ),
        None,
    )
    if model:
        metrics["model"] = model
    return metrics


async def logged_exchange(thread_id: str, values: dict[str, Any]) -> int | None:
    """The chat log row id of the turn just finished: AnythingLLM's ``chatId`` (its ``workspace_chats.id``).

    The graph's ``finish`` node logs each turn keyed by thread, user message id and answer id
    (``checkpoints/chatlog.py``), and does not put the row id in the state; so it is found again by that
    key. The thread is the caller's own (found through the server, which filters by owner). ``None`` when
    the turn logged no row (it waits for an approval, or failed).
    """
    turn = turn_messages(values)
    if not turn or turn[0].get("type") != "human":
        return None
    answer = next((m for m in reversed(turn) if m.get("type") == "ai"), None)
    if answer is None:
        return None
    await ensure_schema("chat_log", CHAT_LOG_SCHEMA)
    async with connection() as conn:
        cur = await conn.execute(
            "SELECT id FROM chat_log WHERE thread_id = %s AND message_id = %s AND answer_id = %s",
            (thread_id, str(turn[0].get("id") or ""), str(answer.get("id") or "")),
        )
        row = await cur.fetchone()
    return int(row["id"]) if row else None


def final_reply(
    state: dict[str, Any],
    answer_id: str,
    *,
    chat_id: int | None = None,
    metrics: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """The status and AnythingLLM reply of a finished run, from the thread's state.

    An answered turn is ``apiChatHandler.js``'s ``chatSync`` reply: ``chatId`` (the chat log row) and
    ``metrics`` beside the text and sources. A refusal is its query-mode refusal (``refusal_reply``).
    """
    values = state.get("values") or {}
    pending, question = pending_of(state), question_of(state)
    if pending is None and question is None and refused(values):
        return 200, refusal_reply(values, answer_id, streamed=False)
    reply = chat_reply(
        "textResponse", answer_of(values), answer_id=answer_id, sources=sources_of(values), metrics=metrics
    )
    reply["chatId"] = chat_id
    if question is not None:
        reply |= {"pendingQuestion": question, "textResponse": question_text(question)}
        return (400, {**reply, "error": question["error"]}) if question["error"] else (200, reply)
    if pending is None:
        return 200, reply
    reply["pendingApproval"] = pending
    reply["textResponse"] = waiting_text(pending)
    if pending["error"]:
        return 400, {**reply, "error": pending["error"]}
    return 200, reply


async def start_chat(
    request: Request, thread_slug: str | None
) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """Check the caller, body, workspace and conversation; return the request's parts, its run and thread.

    The thread is ``None`` for a reset without a message (the new conversation waits for one). The body is
    capped as ``/v1``'s is (``MAX_BODY_BYTES``), by its declared length and as it streams in.

    Decisions answer an approval a conversation already waits for, so they never start one: a session
    with no thread of the caller's (another user's session is none of theirs) is unknown, 404, as an
    unknown thread slug is, and a conversation waiting for no approval is 409; nothing runs either way
    (a resume of a thread with nothing to resume fails on the server).
    """
    user = await caller(request)
    parts = chat_request(await read_json(request))
    slug = path_workspace(request)
    resuming = bool(parts["decisions"] or parts["answer"])
    async with client_of(request) as client:
        assistant = await workspace(client, slug, user)
        key, name = (SESSION_KEY, parts["session"]) if thread_slug is None else (THREAD_KEY, thread_slug)
        opened = thread_slug is None and not parts["reset"] and not resuming  # started by a first message
        thread_id = await conversation(client, slug, key, name, create=opened)
        if thread_id is None and thread_slug is not None:
            raise ApiError(404, abort(f"Thread {thread_slug} not found."))
        if thread_id is None and resuming:
            raise ApiError(404, abort(f"No conversation {parts['session'] or '(the API one)'} in {slug}."))
        if parts["reset"]:
            thread_id = await conversation(client, slug, key, name, create=True, fresh=True)
            thread_id = thread_id if parts["message"] else None
        if resuming and thread_id is not None:
            waiting = dict(await client.threads.get_state(thread_id))
            if parts["decisions"] and pending_of(waiting) is None:
                raise ApiError(409, abort("Nothing in this conversation waits for approval."))
            if parts["answer"] and question_of(waiting) is None:
                raise ApiError(409, abort("Nothing in this conversation waits for an answer."))
    run = {"assistant_id": str(assistant.get("assistant_id") or GRAPH), **run_payload(parts, slug)}
    return parts, run, thread_id


def reset_reply(*, streamed: bool) -> dict[str, Any]:
    """AnythingLLM's answer to ``reset`` alone: ``metrics: {}``, and ``attachments: []`` when streamed."""
    reply = chat_reply("textResponse", "Chat history was reset!")
    return {**reply, "attachments": []} if streamed else reply


async def chat_sync(request: Request, thread_slug: str | None) -> Response:
    """One chat turn, answered whole."""
    _, run, thread_id = await start_chat(request, thread_slug)
    if thread_id is None:
        return JSONResponse(reset_reply(streamed=False))
    assistant_id = run.pop("assistant_id")
    async with client_of(request) as client:
        started = time.monotonic()
        result = await client.runs.wait(thread_id, assistant_id, raise_error=False, **run)
        duration = time.monotonic() - started
        if isinstance(result, dict) and result.get("__error__"):
            error = result["__error__"]
            if (refused_text := refused_message(error)) is not None:  # the graph refused the client's message
                raise ApiError(400, abort(refused_text))
            raise ApiError(500, abort(str(error.get("message") or error.get("error") or error)))
        state: dict[str, Any] = dict(await client.threads.get_state(thread_id))
    values = state.get("values") or {}
    waits = pending_of(state) or question_of(state)
    chat_id = None if waits else await logged_exchange(thread_id, values)
    await ensure_tokenizer()
    status, reply = final_reply(
        state, str(uuid.uuid4()), chat_id=chat_id, metrics=metrics_of(values, duration)
    )
    return JSONResponse(reply, status_code=status)


def sse(data: dict[str, Any]) -> bytes:
    """One chunk as AnythingLLM writes it (``writeResponseChunk``)."""
    return f"data: {json.dumps(data)}\n\n".encode()


def streamed_text(part: Any) -> str:
    """The answer's text in one streamed message event: the model's own words, never a tool's output."""
    if not str(part.event).startswith("messages") or not isinstance(part.data, list | tuple):
        return ""
    message, meta = [*part.data, {}][:2]
    if (
        not isinstance(message, dict)
        or not isinstance(meta, dict)
        or meta.get("langgraph_node") != "call_model"
    ):
        return ""
    if (
        message.get("tool_call_chunks")
        or message.get("tool_calls")
        or "ai" not in str(message.get("type", "")).lower()
    ):
        return ""
    return text_of(message.get("content"))


async def cancel_run(request: Request, thread_id: str, run_id: str) -> None:
    """Cancel a run whose client went away, so no half turn reaches the chat log."""
    async with client_of(request) as client:
        try:
            await client.runs.cancel(thread_id, run_id)
        except httpx.HTTPError:
            pass  # it had finished: a whole turn, logged whole


async def stream_events(request: Request, run: dict[str, Any], thread_id: str) -> AsyncIterator[bytes]:
    """The run's answer as AnythingLLM streams it (``streamChat`` of ``apiChatHandler.js``).

    ``textResponseChunk`` chunks, a closing chunk (``close: true``, ``textResponse: ""``), then
    ``finalizeResponseStream`` with ``chatId``, ``metrics`` and ``sources`` (only ``uuid type close error``
    when nothing was answered). Query mode's refusal is one ``textResponse`` chunk, as there.
    A client that disconnects cancels the run (the server's ``on_disconnect`` and our own cancel).
    """
    answer_id, run_id, shown, done, pieces = str(uuid.uuid4()), None, "", False, 0
    assistant_id = run.pop("assistant_id")
    try:
        async with client_of(request) as client:
            started = time.monotonic()
            async for part in client.runs.stream(
                thread_id, assistant_id, stream_mode="messages-tuple", on_disconnect="cancel", **run
            ):
                if part.event == "metadata" and isinstance(part.data, dict):
                    run_id = part.data.get("run_id") or run_id
                elif part.event == "error":
                    done = True
                    data = part.data if isinstance(part.data, dict) else {"message": part.data}
                    yield sse(abort(str(data.get("message") or data.get("error") or data)))
                    return
                elif text := streamed_text(part):
                    shown, pieces = shown + text, pieces + 1
                    yield sse(chunk(answer_id, text))
            done = True
            duration = time.monotonic() - started
            state: dict[str, Any] = dict(await client.threads.get_state(thread_id))
        values = state.get("values") or {}
        pending = pending_of(state) or question_of(state)
        if pending is None and refused(values) and not shown:
            yield sse(refusal_reply(values, answer_id, streamed=True))
            return
        chat_id = None if pending else await logged_exchange(thread_id, values)
        await ensure_tokenizer()
        metrics = metrics_of(values, duration, pieces)
        _, reply = final_reply(state, answer_id, chat_id=chat_id, metrics=metrics)
        waiting = reply.get("pendingApproval") or reply.get("pendingQuestion")
        if waiting or not shown:  # a waiting approval or question, or an answer no model wrote
            yield sse(chunk(answer_id, reply["textResponse"]))
        extra = {k: v for k, v in reply.items() if k in ("pendingApproval", "pendingQuestion")}
        closing = {**chunk(answer_id, ""), "sources": reply["sources"], **extra, "close": True}
        yield sse({**closing, "error": reply["error"] or False})
        final: dict[str, Any] = {
            "uuid": answer_id,
            "type": "finalizeResponseStream",
            "close": True,
            "error": False,
        }
        if reply["textResponse"]:
            final |= {"chatId": chat_id, "metrics": reply["metrics"], "sources": reply["sources"], **extra}
        yield sse(final)
    except httpx.HTTPStatusError as exc:  # refused by the server after the stream began (busy, 403)
        done = True
        yield sse(abort(_detail(exc.response)))
    finally:
        if not done and run_id:
            with anyio.CancelScope(shield=True):  # the disconnect cancelled us; the cancel must still go out
                await cancel_run(request, thread_id, run_id)


def chunk(answer_id: str, text: str) -> dict[str, Any]:
    """One ``textResponseChunk`` of a streamed answer (``handleDefaultStreamResponseV2`` of ``responses.js``).

    ``id`` is given beside AnythingLLM's ``uuid`` for clients that read whole answers' ``id``.
    """
    return {
        "uuid": answer_id,
        "id": answer_id,
        "sources": [],
        "type": "textResponseChunk",
        "textResponse": text,
        "close": False,
        "error": False,
    }


async def chat_stream(request: Request, thread_slug: str | None) -> Response:
    """One chat turn, streamed as server-sent events."""
    _, run, thread_id = await start_chat(request, thread_slug)
    if thread_id is None:
        return StreamingResponse(iter([sse(reset_reply(streamed=True))]), media_type="text/event-stream")
    return StreamingResponse(
        stream_events(request, run, thread_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "Connection": "keep-alive"},
    )


@endpoint
async def workspace_chat(request: Request) -> Response:
    """``POST /workspace/{slug}/chat``: ``{message, mode, sessionId, attachments, reset}`` (or decisions)."""
    return await chat_sync(request, None)


@endpoint
async def workspace_stream_chat(request: Request) -> Response:
    """``POST /workspace/{slug}/stream-chat``: the same, streamed."""
    return await chat_stream(request, None)


@endpoint
async def thread_chat(request: Request) -> Response:
    """``POST /workspace/{slug}/thread/{threadSlug}/chat`` (also ``/approve``, with ``decisions``)."""
    return await chat_sync(request, request.path_params["thread"])


@endpoint
async def thread_stream_chat(request: Request) -> Response:
    """``POST /workspace/{slug}/thread/{threadSlug}/stream-chat``."""
    return await chat_stream(request, request.path_params["thread"])


def history_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat log rows as AnythingLLM's ``history`` (``convertToChatHistory`` of ``responses.js``).

    Each exchange is a user item (``role content sentAt attachments chatId``) then an assistant item
    (``type role content sources chatId sentAt feedbackScore metrics``). The chat log keeps neither the
    attachments' bytes, a feedback score nor metrics, so those are ``[]``, ``null`` and ``{}``; ``type``
    is the turn's route (``chat``, ``query``, ``agent``).
    """
    history: list[dict[str, Any]] = []
    for row in rows:
        sent = int(row["created_at"].timestamp())
        sources = row.get("sources") or []
        history.append(
            {"role": "user", "content": row["prompt"], "sentAt": sent, "attachments": [], "chatId": row["id"]}
        )
        history.append(
            {
                "type": row.get("route") or "chat",
                "role": "assistant",
                "content": row["response"],
                "sources": [source_record(s) for s in sources if isinstance(s, dict)],
                "chatId": row["id"],
                "sentAt": sent,
                "feedbackScore": None,
                "metrics": {},
            }
        )
    return history


async def logged_rows(
    thread_id: str, *, only_included: bool, limit: int | None, order: str
) -> list[dict[str, Any]]:
    """A thread's chat log rows in id order (``order``: ``asc`` or ``desc``), at most ``limit``."""
    query = "SELECT id, prompt, response, sources, route, created_at FROM chat_log WHERE thread_id = %s"
    query += " AND include" if only_included else ""
    query += " ORDER BY id DESC" if order == "desc" else " ORDER BY id"
    params: tuple[Any, ...] = (thread_id,)
    if limit is not None:
        query, params = query + " LIMIT %s", (thread_id, limit)
    await ensure_schema("chat_log", CHAT_LOG_SCHEMA)
    async with connection() as conn:
        cur = await conn.execute(query, params)
        return list(await cur.fetchall())


async def chat_history(request: Request, key: str, name: str) -> Response:
    """A conversation's ``{"history": [...]}``; an unknown thread slug is 404, an unknown session empty.

    Read from the chat log of the conversation's current thread, as AnythingLLM reads its
    ``workspace_chats``. A thread's chats are its included exchanges, oldest first, whole
    (``workspaceThread/index.js``); a session's honour ``limit`` (default 100) and ``orderBy``
    (``asc``/``desc``) and show refusals too (``forWorkspaceByApiSessionId`` of ``workspaceChats.js``).
    """
    user = await caller(request)
    slug = path_workspace(request)
    async with client_of(request) as client:
        await workspace(client, slug, user)
        thread_id = await conversation(client, slug, key, name, create=False)
    if thread_id is None and key == THREAD_KEY:
        raise ApiError(404, {"message": "Thread not found"})
    if thread_id is None:
        return JSONResponse({"history": []})
    if key == THREAD_KEY:
        rows = await logged_rows(thread_id, only_included=True, limit=None, order="asc")
    else:
        try:
            limit = max(1, int(request.query_params.get("limit") or 100))
        except ValueError:
            limit = 100
        order = request.query_params.get("orderBy")
        rows = await logged_rows(
            thread_id, only_included=False, limit=limit, order=order if order in ("asc", "desc") else "asc"
        )
    return JSONResponse({"history": history_of(rows)})


@endpoint
async def workspace_chats(request: Request) -> Response:
    """``GET /workspace/{slug}/chats?apiSessionId=&limit=&orderBy=``: the API conversation's history."""
    return await chat_history(request, SESSION_KEY, request.query_params.get("apiSessionId") or "")


@endpoint
async def thread_chats(request: Request) -> Response:
    """``GET /workspace/{slug}/thread/{threadSlug}/chats``: the thread's history."""
    return await chat_history(request, THREAD_KEY, request.path_params["thread"])


routes: list[BaseRoute] = [
    Route("/auth", check_key, methods=["GET"]),
    Route("/workspaces", list_workspaces, methods=["GET"]),
    Route("/workspace/new", new_workspace, methods=["POST"]),
    Route("/workspace/{slug}", get_workspace, methods=["GET"]),
    Route("/workspace/{slug}", delete_workspace, methods=["DELETE"]),
    Route("/workspace/{slug}/update", update_workspace, methods=["POST"]),
    Route("/workspace/{slug}/chat", workspace_chat, methods=["POST"]),
    Route("/workspace/{slug}/chats", workspace_chats, methods=["GET"]),
    Route("/workspace/{slug}/stream-chat", workspace_stream_chat, methods=["POST"]),
    Route("/workspace/{slug}/thread/new", new_thread, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}", delete_thread, methods=["DELETE"]),
    Route("/workspace/{slug}/thread/{thread}/update", update_thread, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}/chat", thread_chat, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}/chats", thread_chats, methods=["GET"]),
    Route("/workspace/{slug}/thread/{thread}/approve", thread_chat, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}/stream-chat", thread_stream_chat, methods=["POST"]),
]
