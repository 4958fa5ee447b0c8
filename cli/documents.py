"""Documents from the command line: ingest with a progress bar, list, remove, pin and unpin.

Each ``*_command`` is synchronous, prints to the console it is given and returns an exit code, so it can be
wired as a subcommand directly. ``seed_samples`` is the async first-run helper: it fills an empty workspace
with the sample documents of ``samples/workspace``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..checkpoints.chunks import Document, EmbeddingMismatch
from ..checkpoints.db import run
from ..core.context import LOCAL_USER, IngestContext, document_scope
from ..providers.embeddings import EmbeddingUnavailable
from ..skills.documents import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    list_documents,
    pin_documents,
    remove_documents,
)

#: The sample documents a first run puts into an empty workspace.
# `samples/` sits beside `cli/`: at the repository root, and as `workspace_agent.samples` once installed.
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "workspace"
OUTCOMES = ("added", "replaced", "unchanged", "failed")
STYLE = {"added": "green", "replaced": "yellow", "unchanged": "dim", "failed": "red"}


async def ingest_paths(
    paths: Sequence[str],
    workspace: str,
    console: Console,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    user_id: str = LOCAL_USER,
) -> dict[str, Any]:
    """Run the ingest graph with a progress bar (files done; chunks embedded of the file in hand).

    The paths given are added to the documents roots (``DOCUMENT_ROOTS``) for this run: the CLI's user may
    ingest any file they can name, while a folder's symlinks that lead elsewhere are still refused.

    Returns the graph's output: ``added``, ``unchanged``, ``replaced``, ``failed`` and ``decisions``.

    Raises:
        EmbeddingMismatch: The workspace's vectors came from another embedding model.
        EmbeddingUnavailable: No embedding model is configured.
    """
    from ..graphs.ingest import build_graph

    # The person typing the paths is the local user acting on their own files, so the paths they name are
    # roots of this run; a symlink inside a typed folder still cannot lead out of it.
    graph = build_graph(document_roots=list(paths))
    context = IngestContext(
        workspace=workspace, user_id=user_id, chunk_size=chunk_size, chunk_overlap=chunk_overlap
    )
    values: dict[str, Any] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("finding documents", total=None)
        stream = graph.astream(
            {"paths": list(paths)}, context=context, stream_mode=["updates", "custom", "values"]
        )
        async for mode, data in cast("AsyncIterator[tuple[str, Any]]", stream):  # a list of modes: pairs
            if mode == "values":
                values = data
            elif mode == "custom":
                name = Path(data["path"]).name
                bar.update(task, description=f"embedding {name} ({data['embedded']}/{data['chunks']} chunks)")
            elif "discover" in data:
                bar.update(task, total=len(data["discover"].get("files") or []), description="reading files")
            elif "index_file" in data:
                bar.advance(task)
    return {key: values.get(key) or [] for key in (*OUTCOMES, "decisions")}


def _report(console: Console, result: dict[str, Any], workspace: str) -> None:
    table = Table("outcome", "document", "chunks", "detail", title=f"ingested into {workspace}")
    for outcome in OUTCOMES:
        for entry in result[outcome]:
            detail = entry.get("reason") or entry["path"]
            table.add_row(
                f"[{STYLE[outcome]}]{outcome}[/]",
                entry.get("title", ""),
                str(entry.get("chunks", "")),
                detail,
            )
    if table.row_count:
        console.print(table)
    console.print(", ".join(f"{len(result[o])} {o}" for o in OUTCOMES))


def ingest_command(
    paths: Sequence[str],
    workspace: str,
    console: Console,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    user_id: str = LOCAL_USER,
) -> int:
    """``ingest PATH...``: add files and folders to a workspace, with a progress bar and a summary table.

    Unchanged files are skipped, changed ones replaced; a file that cannot be read is listed with its
    reason and the others are stored. Returns 0 when every file was stored or already there, 1 when any
    failed or the workspace's embedding model does not match.
    """
    try:
        result = run(
            ingest_paths(
                paths, workspace, console, chunk_size=chunk_size, chunk_overlap=chunk_overlap, user_id=user_id
            )
        )
    except (EmbeddingMismatch, EmbeddingUnavailable) as exc:
        console.print(f"[red]error:[/] {exc}")
        return 1
    _report(console, result, workspace)
    return 1 if result["failed"] else 0


def _documents_table(documents: list[Document], title: str) -> Table:
    table = Table("id", "title", "chunks", "tokens", "pinned", "updated", "source", title=title)
    for d in documents:
        updated = f"{d.updated_at:%Y-%m-%d %H:%M}" if d.updated_at else ""
        table.add_row(
            str(d.id), d.title, str(d.chunks), str(d.tokens), "yes" if d.pinned else "", updated, d.source
        )
    return table


def list_command(workspace: str, console: Console) -> int:
    """``documents``: the workspace's documents with chunk counts and pinned flags. Always returns 0."""
    documents = run(list_documents(workspace))
    if not documents:
        console.print(f"workspace {workspace!r} has no documents; add some with: workspace-agent ingest PATH")
        return 0
    console.print(_documents_table(documents, f"documents of {workspace}"))
    return 0


def _unknown(console: Console, unknown: list[str]) -> int:
    for name in unknown:
        console.print(f"[red]no document {name!r}[/] (name it by id, path or title; see the documents list)")
    return 1 if unknown else 0


def remove_command(names: Sequence[str], workspace: str, console: Console) -> int:
    """``remove NAME...``: delete documents (by id, path or title) and their chunks.

    Returns 1 when a name matched no document (the others are still removed), else 0.
    """
    removed, unknown = run(remove_documents(workspace, list(names)))
    for d in removed:
        console.print(f"removed {d.title} [dim]({d.source})[/]")
    return _unknown(console, unknown)


def pin_command(names: Sequence[str], workspace: str, console: Console, pinned: bool) -> int:
    """``pin NAME...`` / ``unpin NAME...``: a pinned document goes into every prompt whole.

    Returns 1 when a name matched no document (the others are still changed), else 0.
    """
    changed, unknown = run(pin_documents(workspace, list(names), pinned))
    for d in changed:
        console.print(f"{'pinned' if pinned else 'unpinned'} {d.title} [dim]({d.source})[/]")
    return _unknown(console, unknown)


async def seed_samples(workspace: str, console: Console, user_id: str = LOCAL_USER) -> bool:
    """Fill an empty workspace with the sample documents (a first run); True when it did.

    A workspace that has documents, or a checkout without ``samples/workspace``, is left as it is.
    """
    if not await asyncio.to_thread(SAMPLES.is_dir):
        return False
    if await list_documents(document_scope(user_id, workspace)):
        return False
    console.print(f"[dim]workspace {workspace!r} is empty: adding the sample documents of {SAMPLES}[/]")
    result = await ingest_paths([str(SAMPLES)], workspace, console, user_id=user_id)
    _report(console, result, workspace)
    return bool(result["added"])
