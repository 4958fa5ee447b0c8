"""Memory commands: run the memory graph once or on a schedule; list, edit and forget memories.

Each ``*_command`` takes a rich console, does its work, prints the outcome and returns an exit code, so the
CLI's parser only maps flags to arguments. A run's exit code is 1 when some batch failed: its chats stay
unprocessed for the next run, and the report's table says why.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from ..checkpoints.db import run
from ..core.context import MemoryContext
from ..graphs.schedule import DEFAULT_INTERVAL, parse_interval


def _prepare_endpoint(console: Console) -> None:
    """Use the embedded local model when no endpoint is configured; never the scripted demo server.

    Without any model the run still happens and reports the model's error per batch, leaving every chat
    unprocessed, which is the truthful outcome.
    """
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return
    try:
        from ..providers.local.model_server import shared_model_server

        with console.status("starting the local model…"):
            shared_model_server()  # started now, with a spinner; the graph's model calls then find it
    except Exception as exc:  # not installed or not startable: each batch will report the model error
        console.print(f"[yellow]no model endpoint and no local model ({exc})[/]")


async def run_once(context: MemoryContext, database_url: str | None = None) -> dict[str, Any]:
    """One run of the memory graph; returns its output (``report`` and ``decisions``)."""
    from ..checkpoints.memories import PostgresMemories
    from ..graphs.memory import build_graph

    graph = build_graph(memories=PostgresMemories(database_url))
    return await graph.ainvoke({}, context=context)


def report_table(report: list[dict[str, Any]]) -> Table:
    """A run's report as a table: one row per group left alone and per batch."""
    table = Table("user", "workspace", "batch", "read", "stored", "marked", "note", title="memory extraction")
    for row in report:
        if row.get("skipped"):
            note = f"[dim]skipped: {row['skipped']}[/]"
        elif row.get("error"):
            note = f"[red]left unprocessed: {row['error']}[/]"
        elif row.get("dropped"):
            note = f"dropped: {'; '.join(row['dropped'])}"
        else:
            note = ""
        table.add_row(
            row["user_id"],
            row["workspace"],
            "-" if row.get("batch") is None else str(row["batch"]),
            str(row.get("read", 0)),
            str(row.get("stored", 0)),
            str(row.get("marked", 0)),
            note,
        )
    return table


def _summary(report: list[dict[str, Any]]) -> tuple[str, bool]:
    batches = [r for r in report if r.get("batch") is not None]
    failed = [r for r in batches if r.get("error")]
    text = (
        f"{sum(r['read'] for r in batches)} chats read, {sum(r['marked'] for r in batches)} marked, "
        f"{sum(r['stored'] for r in batches)} memories stored"
        + (f"; {len(failed)} batch(es) left for the next run" if failed else "")
    )
    return text, bool(failed)


def _context(**options: Any) -> MemoryContext:
    return MemoryContext(**{k: v for k, v in options.items() if v is not None})


def _print_run(console: Console, out: dict[str, Any]) -> bool:
    report = out.get("report") or []
    if report:
        console.print(report_table(report))
    else:
        console.print("no unprocessed chats")
    text, failed = _summary(report)
    console.print(f"[{'red' if failed else 'green'}]{text}[/]")
    return failed


def run_command(
    console: Console,
    *,
    workspace: str | None = None,
    user_id: str | None = None,
    min_chats: int | None = None,
    idle_minutes: float | None = None,
    batch_size: int | None = None,
    model: str | None = None,
    local_model: bool = True,
) -> int:
    """Run memory extraction once and print its report.

    Args:
        console: Where the report goes.
        workspace: Only this workspace's chats (default: all).
        user_id: Only this user's chats (default: all).
        min_chats: Chats a group needs before it is read (default 5).
        idle_minutes: Minutes of quiet a group needs before it is read (default 20; 0 = off).
        batch_size: Chats per observer call (default 20).
        model: Model name at the endpoint (default ``MEMORY_MODEL``, else ``CHAT_MODEL``).
        local_model: Start the embedded local model when no endpoint is configured.

    Returns:
        0 when every batch read was stored and marked, 1 when some batch was left for the next run.
    """
    if local_model:
        _prepare_endpoint(console)
    context = _context(
        workspace=workspace,
        user_id=user_id,
        min_chats=min_chats,
        idle_minutes=idle_minutes,
        batch_size=batch_size,
        model=model,
    )
    out = run(run_once(context))
    return 1 if _print_run(console, out) else 0


def schedule_command(console: Console, interval: str | None = None, **options: Any) -> int:
    """Run memory extraction now and then every ``interval``, until Ctrl-C.

    Args:
        console: Where each run's report goes.
        interval: Time between the starts of two runs, e.g. ``"3h"``, ``"30m"`` or seconds; default
            ``MEMORY_EXTRACTION_INTERVAL``, else 3 hours (AnythingLLM's default).
        **options: The settings of ``run_command`` (workspace, user_id, min_chats, idle_minutes, batch_size,
            model, local_model).

    Returns:
        0 after Ctrl-C. A failed run is reported and the schedule goes on: its chats wait for the next one.
    """
    seconds = parse_interval(interval or os.environ.get("MEMORY_EXTRACTION_INTERVAL") or DEFAULT_INTERVAL)
    if options.pop("local_model", True):
        _prepare_endpoint(console)
    context = _context(**options)

    async def loop() -> None:
        while True:
            started = time.monotonic()
            console.rule(f"memory extraction {datetime.now().astimezone():%Y-%m-%d %H:%M:%S}")
            try:
                _print_run(console, await run_once(context))
            except Exception as exc:  # the next run retries whatever this one could not do
                console.print(f"[red]run failed: {type(exc).__name__}: {exc}[/]")
            wait = max(seconds - (time.monotonic() - started), 0)
            console.print(f"[dim]next run in {wait / 60:.1f} min (Ctrl-C to stop)[/]")
            await asyncio.sleep(wait)

    try:
        run(loop())
    except KeyboardInterrupt:
        console.print("stopped")
    return 0


def list_command(console: Console, *, user_id: str | None = None, workspace: str | None = None) -> int:
    """Print memories, optionally of one user and one workspace (with that user's global ones).

    Returns:
        0.
    """
    from ..checkpoints.memories import PostgresMemories

    memories = run(PostgresMemories().list_memories(user_id, workspace))
    table = Table("id", "user", "scope", "workspace", "memory", "updated", title="memories")
    for m in memories:
        updated = f"{m.updated_at:%Y-%m-%d %H:%M}" if m.updated_at else ""
        table.add_row(str(m.id), m.user_id, m.scope, m.workspace or "-", m.content, updated)
    console.print(table if memories else "no memories")
    return 0


def edit_command(console: Console, memory_id: int, content: str) -> int:
    """Replace the text of memory ``memory_id``.

    Returns:
        0 when it was changed, 1 when there is no such memory or the text is empty.
    """
    from ..checkpoints.memories import PostgresMemories

    try:
        changed = run(PostgresMemories().edit(memory_id, content))
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        return 1
    console.print(f"memory {memory_id} updated" if changed else f"[red]no memory {memory_id}[/]")
    return 0 if changed else 1


def delete_command(console: Console, memory_id: int) -> int:
    """Forget memory ``memory_id``.

    Returns:
        0 when it was deleted, 1 when there is no such memory.
    """
    from ..checkpoints.memories import PostgresMemories

    deleted = run(PostgresMemories().delete(memory_id))
    console.print(f"memory {memory_id} deleted" if deleted else f"[red]no memory {memory_id}[/]")
    return 0 if deleted else 1
