"""Watched folders from the command line: ``watch add|list|remove PATH`` and ``watch run``.

A folder is followed only under ``DOCUMENT_ROOTS``, the roots a served deployment reads, since the watcher
of ``make serve`` syncs it too; adding one syncs it at once and prints what that did.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..checkpoints.db import run
from ..checkpoints.watched import WatchedFolder, WatchedFolders
from ..graphs.watch import folder_inside_roots, sync_folder, watch


def add_command(path: str, workspace: str, user_id: str, console: Console) -> int:
    """Follow a folder under the documents roots and sync it once now."""
    folder = folder_inside_roots(path)  # OutsideRoots (a ValueError) or NotADirectoryError: main says why

    async def add() -> str:
        record = WatchedFolder(user_id, workspace, str(folder))
        new = await WatchedFolders().add(user_id, workspace, str(folder))
        report = await sync_folder(record)
        await WatchedFolders().synced(record)
        return ("watching " if new else "already watched: ") + report.summary()

    console.print(run(add()))
    return 0


def remove_command(path: str, workspace: str, user_id: str, console: Console) -> int:
    """Stop following a folder; its documents stay in the workspace (``docs remove`` takes them out)."""
    given = Path(path).expanduser()
    resolved = str(given.resolve()) if given.exists() else str(given.absolute())
    gone = run(WatchedFolders().remove(user_id, workspace, resolved))
    console.print(f"no longer watching {resolved}" if gone else f"{resolved} was not watched")
    return 0 if gone else 1


def list_command(workspace: str | None, user_id: str, console: Console) -> int:
    """The folders the user's workspaces follow, with when each was last synced."""
    folders = run(WatchedFolders().list(user_id, workspace))
    if not folders:
        console.print("no watched folders")
        return 0
    table = Table("workspace", "last synced")
    table.add_column("folder", overflow="fold")  # a path is shown whole, folded, never cut short
    for folder in folders:
        synced = folder.synced_at.strftime("%Y-%m-%d %H:%M:%S") if folder.synced_at else "never"
        table.add_row(folder.workspace, synced, folder.path)
    console.print(table)
    return 0


def run_command(console: Console, *, once: bool, interval: float | None) -> int:
    """The watcher, by hand: every watched folder of every user, until Ctrl-C (one pass: ``--once``)."""
    try:
        run(watch(once=once, interval=interval, say=console.print))
    except KeyboardInterrupt:
        pass
    return 0
