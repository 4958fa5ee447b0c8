"""Where requests for the chat model go: the endpoint's URL, or the shared local server's, started if need be.

The settings themselves (which model, what it can do) are read from the environment in ``core/settings.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from ...core.settings import ModelSettings


def endpoint_url(settings: ModelSettings, progress: Callable[[int, int], None] | None = None) -> str:
    """The URL to send requests to; for the local model, its shared server's, started if none is live."""
    if settings.base_url:
        return settings.base_url
    from ..local.model_server import shared_model_server

    return shared_model_server(progress).base_url
