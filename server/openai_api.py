"""OpenAI-compatible routes under ``/v1``: a workspace is a model."""

from __future__ import annotations

from starlette.routing import BaseRoute

routes: list[BaseRoute] = []
