"""Where the project keeps its data: the embedded database, caches, model files."""

from __future__ import annotations

import os
from pathlib import Path


def data_home() -> Path:
    """The project's data folder: ``WORKSPACE_AGENT_HOME`` or ``.workspace-agent`` in the working directory.

    The working directory is the project folder both for ``langgraph dev`` and for the CLI, so every
    process of one checkout finds the same embedded database.
    """
    home = Path(os.environ.get("WORKSPACE_AGENT_HOME") or Path.cwd() / ".workspace-agent")
    home.mkdir(parents=True, exist_ok=True)
    return home.resolve()
