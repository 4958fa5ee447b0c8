"""Watched folders kept in step with their workspaces: files added, changed and deleted are followed.

One sync of a folder (``sync_folder``):

- The files under it are found as the ingest graph finds them (``nodes.ingest.discover.walk``): supported
  types, hidden ones skipped, each resolved and checked against ``DOCUMENT_ROOTS``, so a symlink leading
  out of a root is refused as ``ingest`` refuses it. The folder itself must lie under a root.
- A file modified in the last ``WATCH_SETTLE_SECONDS`` (5) is left for the next pass: one being written is
  never half-indexed. The settled ones go through the ingest graph, which reads them through the bounded
  extraction and re-chunks and re-embeds only a file whose content hash changed.
- A document of the workspace whose file was under the folder and is gone (deleted, renamed, or now a
  symlink out of the roots) is removed with its chunks, so it never reaches a prompt again. A folder that
  is missing as a whole removes nothing: an unmounted disk is not a deletion.

``watch`` runs a sync of every watched folder every ``WATCH_INTERVAL`` seconds (15), so a change is in the
index within about 20 seconds plus its embedding. ``make serve`` starts it as a job beside the instances;
``workspace-agent watch run`` starts it by hand. Two watchers on one database never sync at once: a pass
holds an advisory lock, and a watcher that finds it held skips that pass.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..checkpoints.chunks import DocumentStore
from ..checkpoints.db import connection, resolve_url
from ..checkpoints.watched import WatchedFolder, WatchedFolders
from ..core.context import IngestContext, document_scope
from ..core.state import IngestInput
from ..nodes.ingest.discover import walk
from ..skills.loaders import OutsideRoots, document_roots, inside_roots, positive_setting
from .ingest import build_graph

logger = logging.getLogger(__name__)

SETTLE_ENV, INTERVAL_ENV = "WATCH_SETTLE_SECONDS", "WATCH_INTERVAL"
DEFAULT_SETTLE, DEFAULT_INTERVAL = 5, 15


@dataclass
class Synced:
    """What one sync of a folder did: the ingest graph's outcomes by path, removals, files left to settle."""

    folder: str
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    settling: list[str] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    problem: str | None = None

    def summary(self) -> str:
        """One line for a log or a terminal."""
        if self.problem:
            return f"{self.folder}: {self.problem}"
        parts = [
            f"{len(self.added)} added",
            f"{len(self.replaced)} replaced",
            f"{self.unchanged} unchanged",
            f"{len(self.removed)} removed",
        ]
        if self.settling:
            parts.append(f"{len(self.settling)} still being written")
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        return f"{self.folder}: " + ", ".join(parts)


def folder_inside_roots(path: str) -> Path:
    """The folder as a watcher reads it: resolved, under ``DOCUMENT_ROOTS``, and a folder.

    Raises:
        OutsideRoots: It is not under a documents root (a symlink is resolved first).
        NotADirectoryError: It is not a folder.
    """
    resolved = inside_roots(path, document_roots())
    if not resolved.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")
    return resolved


async def sync_folder(folder: WatchedFolder, *, now: float | None = None) -> Synced:
    """Bring one watched folder's documents in step with its files (see the module's docstring)."""
    report = Synced(folder.path)
    try:
        base = await asyncio.to_thread(folder_inside_roots, folder.path)
    except (OutsideRoots, NotADirectoryError, OSError) as exc:
        report.problem = f"not synced: {exc}"
        return report
    roots = await asyncio.to_thread(document_roots)
    files, refused, _ = await asyncio.to_thread(walk, [str(base)], roots)
    report.failed += refused
    settle = positive_setting(SETTLE_ENV, DEFAULT_SETTLE, "seconds")
    clock = time.time() if now is None else now
    settled: list[str] = []
    for path in files:
        try:
            fresh = clock - (await asyncio.to_thread(os.stat, path)).st_mtime < settle
        except OSError:
            continue  # gone since the walk: the next pass removes its document
        (report.settling if fresh else settled).append(path)
    context = IngestContext(workspace=folder.workspace, user_id=folder.user_id)
    if settled:
        out = await build_graph().ainvoke(IngestInput(paths=settled), context=context)
        report.added = [entry["path"] for entry in out.get("added", [])]
        report.replaced = [entry["path"] for entry in out.get("replaced", [])]
        report.unchanged = len(out.get("unchanged", []))
        report.failed += list(out.get("failed", []))
    store, scope = DocumentStore(), document_scope(folder.user_id, folder.workspace)
    present, prefix = set(files), str(base) + os.sep
    held = await store.list_documents(scope)
    gone = [d for d in held if d.source.startswith(prefix) and d.source not in present]
    if gone:
        await store.remove_documents(scope, [d.id for d in gone])
        report.removed = [d.source for d in gone]
    return report


async def sync_all(folders: WatchedFolders | None = None) -> list[Synced] | None:
    """One pass over every watched folder; ``None`` when another watcher holds the pass."""
    folders = folders or WatchedFolders()
    async with connection(await resolve_url(folders.url)) as conn:
        cur = await conn.execute("SELECT pg_try_advisory_lock(hashtext('workspace-agent watch')) AS mine")
        row = await cur.fetchone()
        if not (row and row["mine"]):
            return None
        try:
            reports = []
            for folder in await folders.list():
                try:
                    reports.append(await sync_folder(folder))
                except Exception as exc:  # one folder's failure (its embedder, its database) is its own
                    reports.append(Synced(folder.path, problem=f"sync failed: {type(exc).__name__}: {exc}"))
                    continue
                await folders.synced(folder)
            return reports
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtext('workspace-agent watch'))")


async def watch(
    *, once: bool = False, interval: float | None = None, say: Callable[[str], None] | None = None
) -> None:
    """Sync every watched folder now and then every ``interval`` seconds (``WATCH_INTERVAL``), until stopped.

    ``say`` gets a line per folder synced (the log's, else).
    """
    every = positive_setting(INTERVAL_ENV, DEFAULT_INTERVAL, "seconds") if interval is None else interval
    tell = say or (lambda line: logger.info("watch: %s", line))
    while True:
        reports = await sync_all()
        for report in reports or []:
            tell(report.summary())
        if reports is None:
            tell("another watcher is syncing; this pass skipped")
        if once:
            return
        await asyncio.sleep(every)
