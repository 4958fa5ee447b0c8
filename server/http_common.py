"""What the custom HTTP routes share: who the caller is, and a client of this very server in their name.

The routes of ``http_app.py`` answer other apps (OpenAI's and AnythingLLM's clients) but decide nothing
about identity or approval themselves. They check the caller's key with the deployment's own handler
(``server/auth.py`` ``authenticate``), so a missing or wrong key is refused in the API's own error shape,
and then run the graphs through the server they are mounted in, as a client holding the caller's own
credentials. Ownership, the run rules of ``server/policy.py`` and approvals are therefore enforced by the
server exactly as for any other client, and the threads made are the caller's.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, cast

from langgraph_sdk import Auth, get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Assistant
from starlette.requests import Request

from ..checkpoints.members import Members, Need, published_settings, require
from ..core.conversation import ATTACHMENT_TYPES, message_text
from ..nodes.route import MAX_MESSAGE_CHARS
from .auth import LOCAL_USER, SERVICE, api_keys, authenticate

#: The largest request body the routes read (bytes), a chat's on either API included; more is refused with
#: 413 before it is parsed, by its declared length or as it streams in.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: The deepest nesting of arrays and objects a request body may have. No body of either API needs more
#: than a handful of levels; the parser and the server's own encoder recurse, and fail far below 2,000.
MAX_JSON_DEPTH = 32
#: The headers that carry a caller's credentials, forwarded as they came to the server's own API.
CREDENTIAL_HEADERS = ("x-api-key", "authorization")
#: The graph whose built-in assistant a member's runs in a shared workspace start from.
AGENT = "agent"
#: The error class a run fails with when the graph refuses the client's message (``nodes/route.py``).
INVALID_MESSAGE = "InvalidMessage"


class RouteError(Exception):
    """A request the routes refuse: an HTTP status and a message; each API renders it in its own shape.

    Args:
        status: The HTTP status code.
        message: What the caller is told.
        code: A short machine-readable reason (OpenAI's ``code``/``type``), when there is one.
        param: The request field at fault, when there is one (OpenAI's ``param``).
    """

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def credentials(request: Request) -> dict[str, str]:
    """The caller's credential headers, to be sent on as they came (never the server's own key)."""
    return {name: request.headers[name] for name in CREDENTIAL_HEADERS if name in request.headers}


async def caller(request: Request) -> str:
    """The authenticated user, by the same handler and keys as the server's own API.

    Authentication is off while no keys are configured: everyone is the local user, as for the graphs.
    The service identity is no user and has no workspace, so it is refused here as it is for turns.

    Raises:
        RouteError: 401 for no key or a wrong one, 403 for the service identity.
    """
    try:
        user = (await authenticate(headers=credentials(request)))["identity"]
    except Auth.exceptions.HTTPException as exc:
        raise RouteError(401, str(exc.detail or "a valid API key is required"), "invalid_api_key") from None
    if user == SERVICE:
        raise RouteError(403, "the service identity has no workspaces", "forbidden")
    return str(user) if api_keys() else LOCAL_USER


def server_url(request: Request) -> str:
    """The base URL of the server this request reached, by the socket it arrived on.

    The socket's own address (``scope["server"]``) is used rather than the ``Host`` header: a client names
    the server however it can reach it, and that name need not resolve from inside the server.
    """
    server = request.scope.get("server")
    if not server or server[1] is None:
        return f"{request.url.scheme}://{request.url.netloc}"
    host, port = server
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def server_client(request: Request) -> LangGraphClient:
    """A LangGraph SDK client of this very server, carrying the caller's credentials and nothing else.

    The SDK sends ``x-api-key`` itself and refuses it among extra headers, so a key that came as
    ``x-api-key`` goes on as the SDK's ``api_key`` and ``Authorization`` as a header. Without an
    ``x-api-key`` the key is ``None``, which keeps the SDK from reading ``LANGGRAPH_API_KEY`` or
    ``LANGSMITH_API_KEY`` from the server's environment: the runs must be the caller's, never the
    deployment's.
    """
    given = credentials(request)
    key = given.pop("x-api-key", None) or None
    return get_client(url=server_url(request), api_key=key, headers=given, timeout=None)


TOO_DEEP = f"the request body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels"
NOT_TEXT = "the request body holds a lone surrogate (a \\ud800-\\udfff escape without its pair): no text"


def body_problem(value: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why a parsed body is unusable (nested deeper than ``limit``, or a string that is no text), or ``None``.

    Iterative because recursion is what fails on such values: a value the parser took (300 levels) still
    breaks the server's own encoder and every recursive reader after it. A lone surrogate is valid JSON
    but no text: no encoder takes it, so it could reach neither the server nor the database.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = itertools.chain(node, node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        for child in children:
            if isinstance(child, str):
                try:
                    child.encode("utf-8")
                except UnicodeEncodeError:
                    return NOT_TEXT
            elif isinstance(child, (dict, list)):
                if depth >= limit:
                    return TOO_DEEP
                stack.append((child, depth + 1))
    return None


def parse_json(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object no deeper than ``MAX_JSON_DEPTH``, its strings all text.

    Raises:
        RouteError: 400 naming what is wrong: not JSON, nested too deep, no text, or not an object.
    """
    try:
        value = json.loads(body or b"null")
    except RecursionError:  # the parser's own limit, far deeper than ours
        raise RouteError(400, TOO_DEEP, "too_deep") from None
    except (ValueError, UnicodeDecodeError):
        raise RouteError(400, "the request body is not valid JSON", "invalid_json") from None
    if not isinstance(value, dict):
        raise RouteError(400, "the request body must be a JSON object", "invalid_request")
    if problem := body_problem(value):
        raise RouteError(400, problem, "too_deep" if problem == TOO_DEEP else "invalid_text")
    return value


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The request's JSON object, read up to ``limit`` bytes and no deeper than ``MAX_JSON_DEPTH``.

    Raises:
        RouteError: 413 for a larger body (declared or streamed), 400 for anything but a JSON object or
            for one nested too deep.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RouteError(413, f"the request body is over {limit} bytes", "request_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RouteError(413, f"the request body is over {limit} bytes", "request_too_large")
    return parse_json(bytes(body))


def _holds_nul(value: Any) -> bool:
    """Whether any string in ``value`` (a message's content) holds a NUL, which PostgreSQL text cannot."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str) and "\x00" in node:
            return True
        stack.extend(node.values() if isinstance(node, dict) else node if isinstance(node, list) else ())
    return False


def check_message(content: Any, field: str) -> None:
    """Refuse a user's message the graph would refuse at its first node: empty, too long, or unstorable.

    The graph's ``route`` node checks the same (``nodes/route.py``), but only once the run has begun: its
    refusal would reach the client as a failed turn, or as an error inside a stream already answered 200,
    and the message would stay in the thread. A lone surrogate never gets here (``parse_json``).

    Args:
        content: The message's content as the graph takes it: a string, or a list of content parts.
        field: The request field holding it, named in the refusal.

    Raises:
        RouteError: 400 naming ``field``.
    """
    text = message_text({"content": content})
    files = isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in ATTACHMENT_TYPES for p in content
    )
    if not text.strip() and not files:
        raise RouteError(400, f"{field} is empty: a message needs text or a file", "invalid_value", field)
    if len(text) > MAX_MESSAGE_CHARS:
        raise RouteError(
            400,
            f"{field} has {len(text)} characters; a message may have at most {MAX_MESSAGE_CHARS}",
            "invalid_value",
            field,
        )
    if _holds_nul(content):
        raise RouteError(
            400, f"{field} contains a NUL character (\\x00), which cannot be stored", "invalid_value", field
        )


def refused_message(error: Any) -> str | None:
    """The graph's reason when a run failed because of the client's message, else ``None``.

    ``error`` is a run's error as the server reports it (``{"error": class name, "message": ...}``). A
    message the route node refuses (unstorable text, say) is the client's mistake, answered with 400.
    """
    if isinstance(error, dict) and error.get("error") == INVALID_MESSAGE:
        return str(error.get("message") or "the message cannot start a turn")
    return None


async def workspace_assistants(client: LangGraphClient) -> list[Assistant]:
    """The caller's agent assistants (the server shows each caller their own and the built-in one).

    Raises:
        httpx.HTTPStatusError: The server refused the search.
    """
    found: list[Assistant] = []
    while True:
        page = await client.assistants.search(graph_id="agent", limit=100, offset=len(found))
        found += page
        if len(page) < 100:
            return found


def workspace_of(assistant: Assistant) -> str:
    """The workspace slug an assistant serves: its context's ``workspace``, else ``default``."""
    context = assistant.get("context") or (assistant.get("config") or {}).get("configurable") or {}
    workspace = context.get("workspace") if isinstance(context, dict) else None
    return workspace if isinstance(workspace, str) and workspace else "default"


async def assistant_for(client: LangGraphClient, workspace: str) -> Assistant | None:
    """The caller's assistant for a workspace: their own newest one, else the built-in one for ``default``.

    Another user's assistants are never returned (the server does not show them), so another user's
    workspace is simply unknown here.
    """
    assistants = await workspace_assistants(client)
    mine = [
        a
        for a in assistants
        if workspace_of(a) == workspace and (a.get("metadata") or {}).get("created_by") != "system"
    ]
    if mine:
        return max(mine, key=lambda a: str(a.get("updated_at") or ""))
    builtin = [a for a in assistants if workspace_of(a) == workspace]
    return builtin[0] if builtin else None


async def shared_workspaces(user: str) -> list[tuple[str, str]]:
    """The workspaces others shared with the caller, as ``(owner/slug, role)``; none without API keys."""
    if not api_keys():
        return []
    return [(f"{m.owner}/{m.workspace}", m.role) for m in await Members().shared_with(user)]


async def shared_assistant(user: str, ref: str, need: Need = "read") -> Assistant | None:
    """A workspace shared with the caller, as the assistant its runs start from; ``None`` for a bare slug.

    Another's assistant cannot be used (the server scopes assistants to their creator), so a member's run
    starts from the agent graph's built-in one and the server's admission writes the workspace's published
    settings into its context (``server/auth.py``). The assistant returned holds those same settings, so a
    route that reads or checks them before the run sees what the run will.

    Raises:
        WorkspaceUnknown: Not shared with the caller, or no such workspace (the same to them).
        NotAllowed: A member asking for a manager's action.
    """
    if "/" not in ref:
        return None
    access = await require(user, ref, need)
    settings = await published_settings(access) if access.role != "owner" else {}
    context = {**settings, "workspace": ref}
    return cast(
        Assistant,
        {"assistant_id": AGENT, "graph_id": AGENT, "name": ref, "context": context, "metadata": {}},
    )
