"""The custom HTTP routes both servers mount (``langgraph.json`` ``"http": {"app": ...}``): other apps' APIs.

``/v1`` speaks OpenAI's chat completions (``server/openai_api.py``); ``/api/v1`` speaks AnythingLLM's
developer API (``server/anythingllm_api.py``; its document routes: ``anythingllm_documents.py``). Both are
clients of the server they are mounted in: they run the graphs through its own API with the caller's own
key, so identity, ownership, the run rules and approvals are the ones ``server/auth.py`` already enforces,
not a second copy of them.

Each route authenticates its caller itself, with ``auth.py``'s own handler (``http_common.caller``), so
a missing or wrong key is refused in the shape that API's clients expect. The servers'
``enable_custom_route_auth`` is therefore not set: ``langgraph dev`` would answer in LangGraph's error body
before the route could, and Aegra covers FastAPI routes only, not these mounted Starlette ones.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from .anythingllm_api import ping as anythingllm_ping
from .anythingllm_api import routes as anythingllm_routes
from .anythingllm_documents import routes as document_routes
from .http_common import RouteError, caller
from .members_api import routes as member_routes
from .openai_api import routes as openai_routes


def _application_class() -> type[Starlette]:
    """FastAPI where it is installed: Aegra mounts only a FastAPI app. ``langgraph dev`` takes either."""
    try:
        # optional, and absent from the dev venv (as mypy's config says); pyright has no per-module switch
        from fastapi import FastAPI  # pyright: ignore[reportMissingImports]
    except ImportError:
        return Starlette
    return FastAPI


async def whoami(request: Request) -> Response:
    """``GET /whoami``: the caller's user, by their key (``default`` with authentication off).

    A scheduled job's runs keep the context their cron was made with, and Aegra stores that context as sent,
    so a client names the job's user in it (``server/auth.py``, ``_admit_cron``): this is how it learns it.
    """
    try:
        return JSONResponse({"user": await caller(request)})
    except RouteError as exc:
        return JSONResponse({"error": exc.message}, status_code=exc.status)


app = _application_class()(
    routes=[
        Mount("/v1", routes=openai_routes),
        Mount("/api/v1/openai", routes=openai_routes),  # where AnythingLLM serves it; before /api/v1
        Mount("/api/v1", routes=[*anythingllm_routes, *document_routes]),
        Route("/api/ping", anythingllm_ping, methods=["GET"]),  # AnythingLLM's, outside /api/v1
        Route("/whoami", whoami, methods=["GET"]),
        *member_routes,
    ]
)
