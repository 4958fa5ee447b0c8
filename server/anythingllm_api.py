"""AnythingLLM's developer API under ``/api/v1``, so its integrations keep working.

The routes answer in AnythingLLM's shapes (``server/endpoints/api/workspace``, ``workspaceThread`` and
``document`` of its source), and run the graphs through the very server they are mounted in, as a client of
it with the caller's own key: identity, ownership, the run rules of ``server/policy.py`` and approvals are
enforced by ``server/auth.py`` exactly as for any other client, not by a second copy here. Only the two
routes that touch documents directly (``vector-search`` and ``document/upload``) act in this process, and
they act in the caller's own workspace (``document_scope``), named by the key's user.

Mapping:
    - A workspace is a slug named by one of the caller's ``agent`` assistants (``context.workspace``);
      ``default`` always exists. Its settings are the assistant's.
    - A conversation is a thread of the server. ``sessionId`` (none: the workspace's API conversation) and a
      thread's slug are kept in the thread's metadata, and found again by a search the server filters by
      owner: another user's session or thread is never found (404 for a thread slug, a new conversation of
      one's own for a session id). ``reset: true`` starts a new thread for the conversation, and the
      ``chats`` routes read the conversation back as the thread keeps it.
    - A stream whose client leaves cancels its run, so no half turn reaches the chat log.
    - ``@agent`` and ``mode`` (``automatic``, ``chat``, ``query``) are the graph's own (decision A3).

Better than AnythingLLM, which denies every approval-needing tool in API runs: a chat that stops at an
approval answers ``type: "textResponse"`` with a sentence naming the waiting calls, and an extra field
``pendingApproval: {"calls": [{"id", "name", "args", "description"}], "allowedDecisions": [...]}``.
The same chat route (or ``POST /workspace/{slug}/thread/{threadSlug}/approve``) with
``{"decisions": [{"type": "approve" | "edit" | "reject", "tool_call_id": ...}]}`` resumes the thread with
``Command(resume=...)``; the thread then goes on. Nothing in a request can loosen approval or name a file
on the server: an upload is bytes only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from langgraph_sdk.client import LangGraphClient
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..checkpoints.chunks import DocumentStore
from ..graphs.approval import ResumeError, checked_decisions
from ..graphs.context import Context, ContextError, document_scope
from ..nodes.uploads import MIME_SUFFIXES, upload_limit
from ..skills.documents import index_document, search
from ..skills.extraction import extract_bounded
from ..skills.loaders import SUPPORTED_SUFFIXES, content_hash
from .http_common import (
    RouteError,
    assistant_for,
    caller,
    check_message,
    read_json,
    refused_message,
    server_client,
    workspace_assistants,
    workspace_of,
)

GRAPH = "agent"
DEFAULT_WORKSPACE = "default"
VALID_MODES = ("automatic", "chat", "query")
WORKSPACE_KEY, SESSION_KEY, THREAD_KEY = "anythingllm_workspace", "anythingllm_session", "anythingllm_thread"
SOURCE_PREFIX = "api-upload:"
NO_KEY = "No valid api key found."
SMALL_BODY = 1024 * 1024
DECISIONS = ("approve", "edit", "reject")

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
) -> dict[str, Any]:
    """A chat answer or stream chunk in AnythingLLM's shape (its chunks name the id ``uuid``: both given)."""
    answer_id = answer_id or str(uuid.uuid4())
    return {
        "id": answer_id,
        "uuid": answer_id,
        "type": kind,
        "textResponse": text,
        "sources": sources or [],
        "close": close,
        "error": error,
    }


def abort(error: str) -> dict[str, Any]:
    """AnythingLLM's failed chat: ``type: "abort"`` with the reason in ``error``."""
    return chat_reply("abort", None, error=error)


def endpoint(handler: Handler) -> Handler:
    """Answer a refusal in AnythingLLM's shape: ``{"error"}`` for a key, the route's own body otherwise.

    A ``RouteError`` (``http_common``: 401, 403, 404, 400, 413) and an error of the server behind the route
    (its 404 for another's thread, 409 for a busy one, 403 for a refused run) are answered alike.
    """

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return JSONResponse(exc.body, status_code=exc.status)
        except RouteError as exc:
            if exc.status in (401, 403):
                key_error = NO_KEY if exc.status == 401 else exc.message
                return JSONResponse({"error": key_error}, status_code=exc.status)
            return JSONResponse(abort(exc.message), status_code=exc.status)
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            if status == 401:
                return JSONResponse({"error": NO_KEY}, status_code=401)
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


async def workspace(client: LangGraphClient, slug: str) -> Mapping[str, Any]:
    """The caller's assistant for ``slug``; 404 when the caller has no such workspace.

    The server shows each caller their own assistants only, so a stranger's workspace is unknown here.
    """
    found = await assistant_for(client, slug)
    if found is None and slug == DEFAULT_WORKSPACE:
        return {"assistant_id": GRAPH, "name": DEFAULT_WORKSPACE}
    if found is None:
        raise RouteError(404, f"Workspace {slug} is not a valid workspace.")
    return found


async def workspaces(client: LangGraphClient) -> dict[str, Mapping[str, Any]]:
    """The caller's workspaces by slug, each with the assistant that holds its settings."""
    slugs = {workspace_of(a) for a in await workspace_assistants(client)} | {DEFAULT_WORKSPACE}
    return {slug: await workspace(client, slug) for slug in sorted(slugs)}


def workspace_record(slug: str, assistant: Mapping[str, Any]) -> dict[str, Any]:
    """A workspace as AnythingLLM lists it, its settings read from the assistant (defaults filled in)."""
    values = {k: v for k, v in settings_of(assistant).items() if k != "user_id"}
    try:
        ctx = Context.from_mapping(values)
    except ContextError:
        ctx = Context()
    return {
        "id": assistant.get("assistant_id"),
        "name": assistant.get("name") if assistant.get("name") not in (None, GRAPH) else slug,
        "slug": slug,
        "createdAt": assistant.get("created_at"),
        "lastUpdatedAt": assistant.get("updated_at"),
        "openAiTemp": None,
        "openAiHistory": ctx.history_limit,
        "openAiPrompt": ctx.system_prompt,
        "similarityThreshold": ctx.similarity_threshold,
        "topN": ctx.top_n,
        "chatMode": ctx.chat_mode,
        "queryRefusalResponse": ctx.query_refusal_response,
        "threads": [],
    }


@endpoint
async def list_workspaces(request: Request) -> Response:
    """``GET /workspaces``: the caller's workspaces (``{"workspaces": [...]}``)."""
    await caller(request)
    async with client_of(request) as client:
        found = await workspaces(client)
    return JSONResponse({"workspaces": [workspace_record(slug, a) for slug, a in found.items()]})


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


@endpoint
async def new_thread(request: Request) -> Response:
    """``POST /workspace/{slug}/thread/new``: ``{"thread": {id, name, slug, user_id, workspace_id}}``."""
    user = await caller(request)
    body = await read_json(request, SMALL_BODY)
    slug = request.path_params["slug"]
    name = body.get("name") if isinstance(body.get("name"), str) else "Thread"
    given = body.get("slug")
    if given is not None and (not isinstance(given, str) or not given.strip()):
        raise ApiError(400, {"thread": None, "message": "slug must be a non-empty string"})
    async with client_of(request) as client:
        assistant = await workspace(client, slug)
        if given and await conversation(client, slug, THREAD_KEY, given, create=False):
            raise ApiError(400, {"thread": None, "message": f"a thread {given!r} exists in {slug} already"})
        thread_slug = given or str(uuid.uuid4())
        created = await client.threads.create(
            metadata={WORKSPACE_KEY: slug, THREAD_KEY: thread_slug, "thread_name": name}
        )
    thread = {
        "id": created["thread_id"],
        "name": name,
        "slug": thread_slug,
        "user_id": user,
        "workspace_id": assistant.get("assistant_id"),
    }
    return JSONResponse({"thread": thread, "message": None})


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
    if not message and not decisions and not reset:
        raise ApiError(400, abort("Message is empty"))
    blocks = [attachment_block(a) for a in attachments]
    if message and not decisions:  # the turn's message: what the graph's first node would refuse
        check_message(message_content(message, blocks), "message")
    session = body.get("sessionId")
    return {
        "message": message,
        "mode": mode,
        "decisions": decisions,
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


def sources_of(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The turn's citations in AnythingLLM's shape (``title``, ``chunk``), with ours beside them."""
    return [
        {
            "id": s.get("document_id"),
            "title": s.get("title") or s.get("document"),
            "chunk": s.get("text"),
            "text": s.get("text"),
            "url": s.get("document"),
            "docSource": s.get("document"),
            "chunkSource": s.get("document"),
            "score": s.get("score"),
            "pinned": bool(s.get("pinned")),
        }
        for s in values.get("sources") or []
    ]


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


def waiting_text(pending: dict[str, Any]) -> str:
    """What a client that knows nothing of approvals shows: which calls wait, and how to answer them."""
    calls = ", ".join(f"{c['name']} {json.dumps(c['args'])} (id {c['id']})" for c in pending["calls"])
    return (
        f"Waiting for approval: {calls}. Send the same chat request with "
        '{"decisions": [{"type": "approve" | "edit" | "reject", "tool_call_id": ...}]} to go on.'
    )


def final_reply(state: dict[str, Any], answer_id: str) -> tuple[int, dict[str, Any]]:
    """The status and AnythingLLM reply of a finished run, from the thread's state."""
    values = state.get("values") or {}
    pending = pending_of(state)
    reply = chat_reply("textResponse", answer_of(values), answer_id=answer_id, sources=sources_of(values))
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
    await caller(request)
    parts = chat_request(await read_json(request))
    slug = request.path_params["slug"]
    resuming = bool(parts["decisions"])
    async with client_of(request) as client:
        assistant = await workspace(client, slug)
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
            if pending_of(dict(await client.threads.get_state(thread_id))) is None:
                raise ApiError(409, abort("Nothing in this conversation waits for approval."))
    run = {"assistant_id": str(assistant.get("assistant_id") or GRAPH), **run_payload(parts, slug)}
    return parts, run, thread_id


def reset_reply() -> dict[str, Any]:
    """AnythingLLM's answer to ``reset`` without a message."""
    return chat_reply("textResponse", "Chat history was reset!")


async def chat_sync(request: Request, thread_slug: str | None) -> Response:
    """One chat turn, answered whole."""
    _, run, thread_id = await start_chat(request, thread_slug)
    if thread_id is None:
        return JSONResponse(reset_reply())
    assistant_id = run.pop("assistant_id")
    async with client_of(request) as client:
        result = await client.runs.wait(thread_id, assistant_id, raise_error=False, **run)
        if isinstance(result, dict) and result.get("__error__"):
            error = result["__error__"]
            if (refused := refused_message(error)) is not None:  # the graph refused the client's message
                raise ApiError(400, abort(refused))
            raise ApiError(500, abort(str(error.get("message") or error.get("error") or error)))
        state = await client.threads.get_state(thread_id)
    status, reply = final_reply(dict(state), str(uuid.uuid4()))
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
    """The run's answer as AnythingLLM streams it: ``textResponseChunk`` chunks, then ``close: true``.

    A client that disconnects cancels the run (the server's ``on_disconnect`` and our own cancel).
    """
    answer_id, run_id, shown, done = str(uuid.uuid4()), None, "", False
    assistant_id = run.pop("assistant_id")
    try:
        async with client_of(request) as client:
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
                    shown += text
                    yield sse(chunk(answer_id, text))
            done = True
            state = dict(await client.threads.get_state(thread_id))
        _, reply = final_reply(state, answer_id)
        if reply.get("pendingApproval") or not shown:  # a waiting approval, or an answer no model wrote
            yield sse(chunk(answer_id, reply["textResponse"]))
        last = {k: v for k, v in reply.items() if k in ("sources", "pendingApproval")}
        yield sse({**chunk(answer_id, ""), **last, "close": True, "error": reply["error"] or False})
        yield sse({**chat_reply("finalizeResponseStream", None, answer_id=answer_id, error=False), **last})
    except httpx.HTTPStatusError as exc:  # refused by the server after the stream began (busy, 403)
        done = True
        yield sse(abort(_detail(exc.response)))
    finally:
        if not done and run_id:
            with anyio.CancelScope(shield=True):  # the disconnect cancelled us; the cancel must still go out
                await cancel_run(request, thread_id, run_id)


def chunk(answer_id: str, text: str) -> dict[str, Any]:
    """One ``textResponseChunk`` of a streamed answer."""
    return chat_reply("textResponseChunk", text, answer_id=answer_id, close=False, error=False)


async def chat_stream(request: Request, thread_slug: str | None) -> Response:
    """One chat turn, streamed as server-sent events."""
    _, run, thread_id = await start_chat(request, thread_slug)
    if thread_id is None:
        return StreamingResponse(iter([sse(reset_reply())]), media_type="text/event-stream")
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


def history_of(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation as the thread keeps it, in AnythingLLM's ``history`` shape.

    That is what the thread shows and the model is given: each user message and each answer, without the
    tool rounds between them.
    """
    history: list[dict[str, Any]] = []
    for message in values.get("messages") or []:
        text = text_of(message.get("content"))
        if message.get("type") == "human":
            history.append({"role": "user", "content": text})
        elif message.get("type") == "ai" and not message.get("tool_calls") and text:
            history.append({"role": "assistant", "content": text, "sources": []})
    return history


async def chat_history(request: Request, key: str, name: str) -> Response:
    """A conversation's ``{"history": [...]}``; an unknown thread slug is 404, an unknown session empty."""
    await caller(request)
    slug = request.path_params["slug"]
    async with client_of(request) as client:
        await workspace(client, slug)
        thread_id = await conversation(client, slug, key, name, create=False)
        if thread_id is None and key == THREAD_KEY:
            raise ApiError(404, {"message": "Thread not found"})
        state: Mapping[str, Any] = await client.threads.get_state(thread_id) if thread_id else {}
    return JSONResponse({"history": history_of(state.get("values") or {})})


@endpoint
async def workspace_chats(request: Request) -> Response:
    """``GET /workspace/{slug}/chats?apiSessionId=...``: the API conversation's history."""
    return await chat_history(request, SESSION_KEY, request.query_params.get("apiSessionId") or "")


@endpoint
async def thread_chats(request: Request) -> Response:
    """``GET /workspace/{slug}/thread/{threadSlug}/chats``: the thread's history."""
    return await chat_history(request, THREAD_KEY, request.path_params["thread"])


# ── documents ──────────────────────────────────────────────────────────────────────────────────────────


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
    slug = request.path_params["slug"]
    async with client_of(request) as client:
        settings = settings_of(await workspace(client, slug))
    query = body.get("query")
    if not isinstance(query, str) or not query:
        raise ApiError(400, {"message": "Query parameter cannot be empty."})
    top_n = int(_number(body.get("topN"), 1, 1000, settings.get("top_n", 4)))
    threshold = _number(body.get("scoreThreshold"), 0.0, 1.0, settings.get("similarity_threshold", 0.25))
    found = await search(DocumentStore(), document_scope(user, slug), query, top_n=top_n, threshold=threshold)
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


async def uploaded_file(request: Request) -> tuple[str, bytes, str, list[str]]:
    """The multipart upload's file name, bytes and MIME type, and the workspaces to add it to.

    The body is capped at ``UPLOAD_MAX_BYTES`` (plus a margin for the form) before it is parsed.
    """
    limit = upload_limit()
    await read_body(request, limit + SMALL_BODY)
    try:
        async with request.form(max_files=1, max_fields=10) as form:  # its spooled file closed after
            file, targets = form.get("file"), form.get("addToWorkspaces") or ""
            raw = await file.read() if isinstance(file, UploadFile) else b""
    except MultiPartException as exc:  # malformed multipart, or more than one file
        raise ApiError(400, {"success": False, "error": f"not a valid upload form: {exc}"}) from None
    if not isinstance(file, UploadFile):
        raise ApiError(400, {"success": False, "error": "the form needs a file field"})
    if not isinstance(targets, str):
        raise ApiError(422, {"success": False, "error": "addToWorkspaces must be a string of slugs"})
    if len(raw) > limit:
        raise ApiError(413, {"success": False, "error": f"the file is over {limit} bytes (UPLOAD_MAX_BYTES)"})
    name = Path(file.filename or "").name or f"upload-{content_hash(raw)[:12]}"
    slugs = [s.strip() for s in targets.split(",") if s.strip()] or [DEFAULT_WORKSPACE]
    return name, raw, file.content_type or "", slugs


async def add_upload(scope: str, name: str, raw: bytes, text: str) -> dict[str, Any]:
    """Index an extracted upload into one workspace scope; an identical upload is left as it is."""
    store, source, digest = DocumentStore(), SOURCE_PREFIX + name, content_hash(raw)
    known = await store.get_document(scope, source)
    if known and known.content_hash == digest:
        return {"outcome": "unchanged", "documentId": known.id, "chunks": known.chunks}
    doc, replaced = await index_document(store, scope, source=source, title=name, text=text, digest=digest)
    return {"outcome": "replaced" if replaced else "added", "documentId": doc.id, "chunks": doc.chunks}


@endpoint
async def upload_document(request: Request) -> Response:
    """``POST /document/upload`` (multipart ``file``, ``addToWorkspaces``): ``{success, error, documents}``.

    The file goes through the chat uploads' bounded extraction (``extract_bounded``) and caps, then into each
    named workspace of the caller's (``default`` when none is named); only bytes are taken, never a path.
    """
    user = await caller(request)
    name, raw, mime, slugs = await uploaded_file(request)
    async with client_of(request) as client:
        known = await workspaces(client)
    missing = [s for s in slugs if s not in known]
    if missing:
        raise ApiError(404, {"success": False, "error": f"Workspace {missing[0]} is not a valid workspace."})
    suffix = Path(name).suffix.lower()
    suffix = suffix if suffix in SUPPORTED_SUFFIXES else MIME_SUFFIXES.get(mime.lower(), suffix)
    try:
        text = await extract_bounded(Path(Path(name).stem + suffix), raw)
        added = {slug: await add_upload(document_scope(user, slug), name, raw, text) for slug in slugs}
    except Exception as exc:  # unreadable, unsupported, over a limit, no embedding model: say why
        return JSONResponse({"success": False, "error": str(exc) or type(exc).__name__, "documents": []}, 422)
    document = {
        "location": SOURCE_PREFIX + name,
        "name": name,
        "url": SOURCE_PREFIX + name,
        "title": name,
        "docAuthor": "Unknown",
        "description": "Unknown",
        "docSource": "a file uploaded through the API.",
        "chunkSource": name,
        "published": None,
        "wordCount": len(text.split()),
        "token_count_estimate": None,
        "workspaces": [{"slug": slug, **entry} for slug, entry in added.items()],
    }
    return JSONResponse({"success": True, "error": None, "documents": [document]})


routes: list[BaseRoute] = [
    Route("/workspaces", list_workspaces, methods=["GET"]),
    Route("/workspace/{slug}/chat", workspace_chat, methods=["POST"]),
    Route("/workspace/{slug}/chats", workspace_chats, methods=["GET"]),
    Route("/workspace/{slug}/stream-chat", workspace_stream_chat, methods=["POST"]),
    Route("/workspace/{slug}/thread/new", new_thread, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}/chat", thread_chat, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}/chats", thread_chats, methods=["GET"]),
    Route("/workspace/{slug}/thread/{thread}/approve", thread_chat, methods=["POST"]),
    Route("/workspace/{slug}/thread/{thread}/stream-chat", thread_stream_chat, methods=["POST"]),
    Route("/workspace/{slug}/vector-search", vector_search, methods=["POST"]),
    Route("/document/upload", upload_document, methods=["POST"]),
]
