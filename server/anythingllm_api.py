"""AnythingLLM's developer API under ``/api/v1``, so its integrations keep working."""

from __future__ import annotations

from starlette.routing import BaseRoute

routes: list[BaseRoute] = []
