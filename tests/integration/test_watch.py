"""Issue 35, item 4: watched folders, on the embedded PostgreSQL and the real local embedder.

A file added to a watched folder is indexed; a changed one replaced (re-embedded only when its content
hash changes); a deleted one's chunks removed, so they never reach a prompt again; a file still being
written (modified within ``WATCH_SETTLE_SECONDS``) waits for the next pass; a symlink leading out of the
documents roots is refused as ``ingest`` refuses it; and a folder outside the roots cannot be watched. The
command line adds, lists and removes folders; ``make serve``'s watcher is in ``tests/serving``.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.support.helpers import decisions_of, user_message
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.watched import WatchedFolder, WatchedFolders
from workspace_agent.cli.main import main as cli
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.watch import sync_folder
from workspace_agent.samples.scripted_model import text_reply
from workspace_agent.skills import documents

PAST = time.time() - 3600


def settled(path: Path, text: str) -> Path:
    """Write a file whose last change is an hour old: a file nobody is writing any more."""
    path.write_text(text)
    os.utime(path, (PAST, PAST))
    return path


@pytest.fixture
def roots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A documents root of the test's own, holding the watched folder; a second folder outside any root."""
    root = tmp_path / "root"
    (root / "handbook").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    monkeypatch.setenv("DOCUMENT_ROOTS", str(root))
    return root


async def found(database_url: str, workspace: str, query: str) -> list[str]:
    """The texts of the chunks a search of the workspace finds, any similarity."""
    hits = await documents.search(DocumentStore(database_url), workspace, query, top_n=10, threshold=0.0)
    return [h.text for h in hits.hits]


async def test_added_changed_and_deleted_files_are_followed(
    roots, database_url, workspace, saver, llm, thread
):
    folder = WatchedFolder("default", workspace, str(roots / "handbook"))
    store = DocumentStore(database_url)
    hours = settled(roots / "handbook" / "hours.md", "The harbour office opens at 07:30 on weekdays.")
    first = await sync_folder(folder)
    assert first.added == [str(hours)] and not first.failed, first
    assert any("07:30" in t for t in await found(database_url, workspace, "When does the office open?"))

    again = await sync_folder(folder)
    assert again.unchanged == 1 and not again.added and not again.replaced, "same hash: nothing re-embedded"

    settled(hours, "The harbour office opens at 08:15 on weekdays.")
    changed = await sync_folder(folder)
    assert changed.replaced == [str(hours)]
    texts = await found(database_url, workspace, "When does the office open?")
    assert any("08:15" in t for t in texts) and not any("07:30" in t for t in texts)

    hours.unlink()
    gone = await sync_folder(folder)
    assert gone.removed == [str(hours)]
    assert await store.list_documents(workspace) == []
    llm.push(text_reply("I do not know."))
    out = await build_graph(checkpointer=saver).ainvoke(
        user_message("When does the office open?"),
        thread,
        context=Context(workspace=workspace, chat_mode="chat", similarity_threshold=0.0),
    )
    assert "08:15" not in str(llm.requests[-1]["messages"]), "a deleted file never reaches a prompt"
    assert decisions_of(out, "B8")[0]["outcome"]["chunks"] == 0


async def test_a_file_being_written_waits_and_a_symlink_out_is_refused(
    roots, tmp_path, database_url, workspace
):
    folder = WatchedFolder("default", workspace, str(roots / "handbook"))
    half = roots / "handbook" / "report.md"
    half.write_text("The first half of the report, still being written")  # modified just now
    secret = settled(tmp_path / "outside" / "secret.md", "The vault code is 4417.")
    (roots / "handbook" / "link.md").symlink_to(secret)

    pass_one = await sync_folder(folder)
    assert pass_one.settling == [str(half)] and not pass_one.added, pass_one
    assert [Path(f["path"]).name for f in pass_one.failed] == ["link.md"]
    assert "outside the documents roots" in pass_one.failed[0]["reason"]
    assert await DocumentStore(database_url).list_documents(workspace) == []

    settled(half, "The whole report: sales rose by a third.")
    pass_two = await sync_folder(folder)
    assert pass_two.added == [str(half)]
    texts = await found(database_url, workspace, "report")
    assert any("sales rose by a third" in t for t in texts) and not any("vault" in t for t in texts)


async def test_a_folder_outside_the_roots_reports_and_removes_nothing(
    roots, tmp_path, database_url, workspace
):
    settled(roots / "handbook" / "a.md", "Alpha.")
    inside = WatchedFolder("default", workspace, str(roots / "handbook"))
    assert (await sync_folder(inside)).added
    outside = await sync_folder(WatchedFolder("default", workspace, str(tmp_path / "outside")))
    assert outside.problem and "outside the documents roots" in outside.problem
    (roots / "handbook").rename(roots / "moved")
    missing = await sync_folder(inside)
    assert missing.problem and not missing.removed, "a folder gone as a whole is not a deletion"
    assert len(await DocumentStore(database_url).list_documents(workspace)) == 1


def test_the_command_line_adds_lists_and_removes(roots, tmp_path, database_url, workspace, capsys):
    settled(roots / "handbook" / "a.md", "Alpha bravo.")
    base = ["--workspace", workspace, "watch"]
    assert cli([*base, "add", str(roots / "handbook")]) == 0
    said = " ".join(capsys.readouterr().out.split())  # rich folds long lines where the width ends
    assert "watching" in said and "1 added" in said
    assert cli([*base, "add", str(tmp_path / "outside")]) == 1
    assert "outside the documents roots" in " ".join(capsys.readouterr().err.split())
    assert cli([*base, "list"]) == 0
    listed = capsys.readouterr().out
    cells = re.sub(r"[\s│┃]", "", listed)  # a long path is folded over lines of the table's last column
    assert workspace in listed and str(roots / "handbook") in cells, listed
    assert "never" not in listed, "synced when added"
    assert cli([*base, "remove", str(roots / "handbook")]) == 0
    assert cli([*base, "remove", str(roots / "handbook")]) == 1, "not watched any more"


async def test_the_watched_folders_table_keeps_users_apart(database_url, workspace):
    folders = WatchedFolders(database_url)
    assert await folders.add("alice", workspace, "/data/handbook")
    assert not await folders.add("alice", workspace, "/data/handbook"), "added once"
    assert await folders.add("bob", workspace, "/data/handbook")
    mine = await folders.list("alice", workspace)
    assert [(f.user_id, f.path) for f in mine] == [("alice", "/data/handbook")]
    assert await folders.remove("alice", workspace, "/data/handbook")
    assert [f.user_id for f in await folders.list(None, workspace)] == ["bob"]
