"""The end of an ingest run: its outcome lists in path order, whatever order the files finished in."""

from __future__ import annotations

from typing import Any, cast

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from ...core.context import IngestContext
from ...core.state import IngestState

OUTCOMES = ("added", "unchanged", "replaced", "failed")


async def report(state: IngestState, runtime: Runtime[IngestContext]) -> dict:
    """Sort each outcome list by path, so a client (and a test) reads the same report every time."""
    lists = {key: cast("list[dict[str, Any]]", state.get(key) or []) for key in OUTCOMES}
    return {key: Overwrite(sorted(entries, key=lambda e: e["path"])) for key, entries in lists.items()}
