"""What the custom HTTP routes share: who the caller is, and a client of this very server in their name.

The routes of ``http_app.py`` answer other apps (OpenAI's and AnythingLLM's clients) but decide nothing
about identity or approval themselves. They check the caller's key with the deployment's own handler
(``server/auth.py`` ``authenticate``), so a missing or wrong key is refused in the API's own error shape,
and then run the graphs through the server they are mounted in, as a client holding the caller's own
credentials. Ownership, the run rules of ``server/policy.py`` and approvals are therefore enforced by the
server exactly as for any other client, and the threads made are the caller's.
"""

from __future__ import annotations

import json
from typing import Any

from langgraph_sdk import Auth, get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Assistant
from starlette.requests import Request

from .auth import LOCAL_USER, SERVICE, api_keys, authenticate

#: The largest request body the routes read (bytes); more is refused with 413 before it is parsed.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: The headers that carry a caller's credentials, forwarded as they came to the server's own API.
CREDENTIAL_HEADERS = ("x-api-key", "authorization")


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

    ``api_key=None`` keeps the SDK from reading ``LANGGRAPH_API_KEY`` or ``LANGSMITH_API_KEY`` from the
    server's environment: the runs must be the caller's, never the deployment's.
    """
    return get_client(url=server_url(request), api_key=None, headers=credentials(request), timeout=None)


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The request's JSON object, read up to ``limit`` bytes.

    Raises:
        RouteError: 413 for a larger body (declared or streamed), 400 for anything but a JSON object.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RouteError(413, f"the request body is over {limit} bytes", "request_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RouteError(413, f"the request body is over {limit} bytes", "request_too_large")
    try:
        value = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise RouteError(400, "the request body is not valid JSON", "invalid_json") from None
    if not isinstance(value, dict):
        raise RouteError(400, "the request body must be a JSON object", "invalid_request")
    return value


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
