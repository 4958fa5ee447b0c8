"""The end of an ingest run: its outcome lists in path order, whatever order the files finished in."""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from .state import IngestContext, IngestState

OUTCOMES = ("added", "unchanged", "replaced", "failed")


async def report(state: IngestState, runtime: Runtime[IngestContext]) -> dict:
    """Sort each outcome list by path, so a client (and a test) reads the same report every time."""
    return {key: Overwrite(sorted(state.get(key) or [], key=lambda e: e["path"])) for key in OUTCOMES}
