"""I1 — which of the given paths are documents to ingest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.graphs.state import decision
from workspace_agent.nodes.ingest.state import IngestContext, IngestState
from workspace_agent.skills.documents import SUPPORTED_SUFFIXES, embedder


def _walk(paths: list[str]) -> tuple[list[str], list[dict[str, str]], int]:
    """Supported files under ``paths`` (hidden ones skipped), the failures, and how many were skipped."""
    found: dict[str, None] = {}
    failed: list[dict[str, str]] = []
    skipped = 0
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            for item in sorted(path.rglob("*")):
                relative = item.relative_to(path).parts
                if not item.is_file() or any(part.startswith(".") for part in relative):
                    continue
                if item.suffix.lower() in SUPPORTED_SUFFIXES:
                    found[str(item.resolve())] = None
                else:
                    skipped += 1
        elif path.is_file():
            found[str(path.resolve())] = None  # an explicit file is tried whatever its type, and reported
        else:
            failed.append({"path": given, "title": path.name, "reason": "no such file or folder"})
    return list(found), failed, skipped


async def discover(state: IngestState, runtime: Runtime[IngestContext]) -> dict:
    """Expand files and folders into the documents to ingest, after checking the workspace's embedding model.

    Folders are searched recursively for supported types; other files in them are counted, not reported one
    by one. A path that does not exist is a failure of that path only. A workspace whose vectors came from
    another embedding model stops the run here, before anything is read or embedded.
    """
    ctx = runtime.context
    _, space = await embedder()
    await DocumentStore().check_space(ctx.workspace, space)
    files, failed, skipped = await asyncio.to_thread(_walk, list(state.get("paths") or []))
    why = f"{len(files)} file(s) to ingest into {ctx.workspace!r} with {space}"
    if skipped:
        why += f"; {skipped} file(s) of unsupported types in folders skipped"
    if failed:
        why += f"; {len(failed)} path(s) not found"
    return {"files": files, "failed": failed, "decisions": [decision("I1", "code", len(files), why)]}


def route_files(state: IngestState) -> list[Send] | Literal["report"]:
    """One ``index_file`` task per file, in parallel; nothing to do goes straight to the report."""
    files = state.get("files") or []
    return [Send("index_file", {"path": path}) for path in files] if files else "report"
