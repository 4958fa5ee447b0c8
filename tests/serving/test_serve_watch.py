"""Issue 35, item 4: ``make serve`` runs the folder watcher as a job, and a change is indexed within a minute.

The launcher starts ``workspace-agent watch run`` beside the instances, in their environment (the same
database, embedder and ``DOCUMENT_ROOTS``). A folder recorded as watched is followed: a new file appears in
the workspace's documents, a deleted one disappears, each well within a minute; ``WATCH_INTERVAL=off``
leaves the watcher out.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.serving.conftest import serve, serving_env  # noqa: F401 - the Aegra fixtures
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.watched import WatchedFolders

WITHIN = 60.0


async def sources_until(database_url: str, workspace: str, wanted: set[str]) -> float:
    """Seconds until the workspace's documents are exactly ``wanted`` (polled; fails after a minute)."""
    store, began = DocumentStore(database_url), time.monotonic()
    while True:
        now = {d.source for d in await store.list_documents(workspace)}
        if now == wanted:
            return time.monotonic() - began
        assert time.monotonic() - began < WITHIN, f"after {WITHIN:.0f} s the documents are {now}"
        await asyncio.sleep(0.5)


async def test_the_served_watcher_follows_a_folder(serve, database_url, workspace, tmp_path: Path):  # noqa: F811
    root = tmp_path / "root"
    folder = root / "handbook"
    folder.mkdir(parents=True)
    await WatchedFolders(database_url).add("default", workspace, str(folder.resolve()))
    served = serve(DOCUMENT_ROOTS=str(root), WATCH_INTERVAL="1", WATCH_SETTLE_SECONDS="1")
    assert "watched folders: every WATCH_INTERVAL" in served.logs()
    assert any("cli.main watch run" in line for line in _children(served.proc.pid)), "its own process"

    note = folder / "refunds.md"
    note.write_text("Refunds are paid within 14 days.")
    took = await sources_until(database_url, workspace, {str(note.resolve())})
    note.unlink()
    gone = await sources_until(database_url, workspace, set())
    print(f"indexed after {took:.1f} s, removed after {gone:.1f} s")
    synced = (await WatchedFolders(database_url).list("default", workspace))[0].synced_at
    assert synced is not None, "the watcher records each pass"


async def test_the_watcher_can_be_switched_off(serve, database_url, workspace, tmp_path: Path):  # noqa: F811
    served = serve(WATCH_INTERVAL="off")
    assert "watched folders: off" in served.logs()
    assert not any("cli.main watch run" in line for line in _children(served.proc.pid))


def _children(pid: int) -> list[str]:
    """Command lines of a process's children (from /proc), to see which jobs a launcher started."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
            if f"\nPPid:\t{pid}\n" in text:
                found.append((status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found
