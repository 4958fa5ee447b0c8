"""The custom HTTP routes both servers mount (``langgraph.json`` ``"http": {"app": ...}``): other apps' APIs.

``/v1`` speaks OpenAI's chat completions (``server/openai_api.py``); ``/api/v1`` speaks AnythingLLM's
developer API (``server/anythingllm_api.py``). Both are clients of the server they are mounted in: they run
the graphs through its own API with the caller's own key, so identity, ownership, the run rules and
approvals are the ones ``server/auth.py`` already enforces, not a second copy of them.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Mount

from workspace_agent.server.anythingllm_api import routes as anythingllm_routes
from workspace_agent.server.openai_api import routes as openai_routes

app = Starlette(routes=[Mount("/v1", routes=openai_routes), Mount("/api/v1", routes=anythingllm_routes)])
