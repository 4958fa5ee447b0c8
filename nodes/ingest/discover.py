"""I1 — which of the given paths are documents to ingest."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from ...checkpoints.chunks import DocumentStore
from ...checkpoints.members import require
from ...core.context import IngestContext
from ...core.state import IngestState, decision
from ...skills.documents import embedder
from ...skills.loaders import SUPPORTED_SUFFIXES, OutsideRoots, document_roots, inside_roots


def walk(paths: list[str], roots: list[Path]) -> tuple[list[str], list[dict[str, str]], int]:
    """Supported files under ``paths`` (hidden ones skipped), the failures, and how many were skipped.

    Every path, and every file found in a folder, is resolved and checked against the documents roots
    before anything else is asked of it: a symlink out of an allowed folder is refused by name, and a path
    outside the roots gets the same answer whether it exists or not.
    """
    found: dict[str, None] = {}
    failed: list[dict[str, str]] = []
    skipped = 0
    for given in paths:
        if not isinstance(given, str) or not given.strip():
            failed.append({"path": str(given), "title": "", "reason": "a path must be a non-empty string"})
            continue
        try:
            path = inside_roots(given, roots)
        except OutsideRoots as exc:
            failed.append({"path": given, "title": Path(given).name, "reason": str(exc)})
            continue
        if path.is_dir():
            for item in sorted(path.rglob("*")):
                if any(part.startswith(".") for part in item.relative_to(path).parts):
                    continue
                if item.suffix.lower() not in SUPPORTED_SUFFIXES:
                    skipped += int(not item.is_symlink() and item.is_file())
                    continue
                try:
                    resolved = inside_roots(item, roots)
                except OutsideRoots as exc:
                    failed.append({"path": str(item), "title": item.name, "reason": str(exc)})
                    continue
                if resolved.is_file():
                    found[str(resolved)] = None
        elif path.is_file():
            found[str(path)] = None  # an explicit file is tried whatever its type, and reported
        else:
            failed.append({"path": given, "title": path.name, "reason": "no such file or folder"})
    return list(found), failed, skipped


async def discover(
    state: IngestState, runtime: Runtime[IngestContext], *, extra_roots: Sequence[Path] = ()
) -> dict:
    """Expand files and folders into the documents to ingest, after checking the workspace's embedding model.

    Folders are searched recursively for supported types; other files in them are counted, not reported one
    by one. A path outside the documents roots (the deployment's, plus ``extra_roots`` from the program that
    compiled the graph) or that does not exist is a failure of that path only. A workspace whose vectors
    came from another embedding model stops the run here, before anything is read or embedded, and so
    does a shared workspace named by one of its members who is not a manager (or by a stranger).
    """
    ctx = runtime.context
    await require(ctx.user_id, ctx.workspace, "write")  # a shared workspace takes documents from managers
    _, space = await embedder()
    await DocumentStore().check_space(ctx.documents, space)
    roots = await asyncio.to_thread(document_roots, extra_roots)
    files, failed, skipped = await asyncio.to_thread(walk, list(state.get("paths") or []), roots)
    why = f"{len(files)} file(s) to ingest into {ctx.workspace!r} with {space}"
    if skipped:
        why += f"; {skipped} file(s) of unsupported types in folders skipped"
    if failed:
        why += f"; {len(failed)} path(s) refused or not found"
    return {"files": files, "failed": failed, "decisions": [decision("I1", "code", len(files), why)]}


def route_files(state: IngestState) -> list[Send] | Literal["report"]:
    """One ``index_file`` task per file, in parallel; nothing to do goes straight to the report."""
    files = state.get("files") or []
    return [Send("index_file", {"path": path}) for path in files] if files else "report"
