"""Issue 13 item 3: the ingest graph reads only under the deployment's documents roots.

A remote client names paths; the server decides which folders may be read (``DOCUMENT_ROOTS``, default the
project's data folder and ``samples/``). These run through ``langgraph dev`` with ``langgraph_sdk``, as an
attacker would: a server file outside the roots, and a symlink from inside a root to that file.
"""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from workspace_agent.checkpoints.db import run
from workspace_agent.skills.document_tools import document_tools
from workspace_agent.skills.documents import NO_CONTEXT, list_documents
from workspace_agent.skills.loaders import OutsideRoots, document_roots, read_document

SECRET = "db-password=hunter2-correct-horse"


@pytest.fixture
def embed(monkeypatch, llm):
    """Embeddings from the scripted server (the real OpenAI-compatible client path)."""
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A server file outside every documents root (the test's temporary folder is not one)."""
    path = tmp_path / "server-secrets.json"
    path.write_text(f'{{"note": "{SECRET}"}}')
    return path


@pytest.fixture
def inside_root(home: str) -> Path:
    """A fresh folder under ``documents/`` of the project's data folder, a default documents root."""
    folder = Path(home) / "documents" / f"docs-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    return folder


async def search_finds_nothing(workspace: str) -> None:
    [search] = [t for t in document_tools(workspace) if t.name == "search_documents"]
    text = await search.ainvoke({"query": SECRET})
    assert text.startswith(NO_CONTEXT) and SECRET not in text


async def test_a_client_cannot_ingest_a_server_file_outside_the_roots(dev_server, workspace, secret, home):
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    thread = await client.threads.create()
    database_files = [home, str(Path(home) / "pgdata" / "postgresql.conf")]  # data folder, not documents/
    out = await client.runs.wait(
        thread["thread_id"],
        "ingest",
        input={
            "paths": [str(secret), str(secret.parent), str(secret.parent / "missing.json"), *database_files]
        },
        context={"workspace": workspace},
    )
    assert out["added"] == [] and out["replaced"] == []
    reasons = {f["path"]: f["reason"] for f in out["failed"]}
    assert len(reasons) == 5 and all("DOCUMENT_ROOTS" in r and "outside" in r for r in reasons.values())
    assert reasons[str(secret)].startswith(str(secret)), "the error names the path"
    missing = reasons[str(secret.parent / "missing.json")]
    assert "no such file" not in missing, "whether a file exists outside the roots is not revealed"
    assert await list_documents(workspace) == []
    await search_finds_nothing(workspace)


async def test_a_symlink_out_of_a_root_is_refused_after_resolving(dev_server, workspace, secret, inside_root):
    from langgraph_sdk import get_client

    (inside_root / "ok.md").write_text("The blue door opens at nine.")
    (inside_root / "leak.md").symlink_to(secret)
    (inside_root / "outside").symlink_to(secret.parent, target_is_directory=True)
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"],
        "ingest",
        input={"paths": [str(inside_root), str(inside_root / "leak.md"), str(inside_root / "outside")]},
        context={"workspace": workspace},
    )
    assert [e["title"] for e in out["added"]] == ["ok.md"]
    failed = sorted((f["title"], "DOCUMENT_ROOTS" in f["reason"]) for f in out["failed"])
    assert failed == [("leak.md", True), ("leak.md", True), ("outside", True)], out["failed"]
    assert str(secret) not in str(out), "the link's target is not revealed either"
    docs = await list_documents(workspace)
    assert [d.title for d in docs] == ["ok.md"]
    await search_finds_nothing(workspace)


async def test_a_state_update_cannot_send_a_file_past_discover(embed, workspace, secret):
    """A task's path may reach ``index_file`` without ``discover`` (a state write): the read checks again.

    The dev server refuses state writes from clients; a program holding the graph can still make one.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from workspace_agent.graphs.ingest import IngestContext, build_graph

    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "injected"}}
    await graph.aupdate_state(config, {"paths": [], "files": [str(secret)]}, as_node="discover")
    out = await graph.ainvoke(None, config, context=IngestContext(workspace=workspace))
    assert out.get("added") in (None, []), out
    assert ["DOCUMENT_ROOTS" in f["reason"] for f in out["failed"]] == [True]
    assert await list_documents(workspace) == []


def test_reading_checks_roots_type_and_size(tmp_path, monkeypatch, secret):
    roots = [tmp_path / "root"]
    roots[0].mkdir()
    (roots[0] / "link.txt").symlink_to(secret)
    with pytest.raises(OutsideRoots, match="DOCUMENT_ROOTS"):
        read_document(roots[0] / "link.txt", roots)
    with pytest.raises(OutsideRoots):
        read_document(roots[0] / ".." / secret.name, roots)
    os.mkfifo(roots[0] / "pipe.txt")
    with pytest.raises(ValueError, match="not a regular file"):
        read_document(roots[0] / "pipe.txt", roots)  # a FIFO would block forever on open or read
    monkeypatch.setenv("DOCUMENT_ROOTS", os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")]))
    assert document_roots(["extra"]) == [tmp_path / "a", tmp_path / "b", Path("extra").resolve()]


def test_the_cli_reads_what_its_user_typed_but_no_symlink_out_of_it(embed, database_url, secret):
    """The local user may ingest any path they name; a folder's link elsewhere is still refused."""
    from workspace_agent.cli.documents import ingest_command

    folder = secret.parent / "typed"
    folder.mkdir()
    (folder / "notes.md").write_text("The blue door opens at nine.")
    (folder / "leak.md").symlink_to(secret)
    workspace = f"ws-{uuid.uuid4().hex[:8]}"
    buffer = io.StringIO()
    assert ingest_command([str(folder)], workspace, Console(file=buffer, width=300)) == 1
    assert "1 added" in buffer.getvalue() and "1 failed" in buffer.getvalue()
    assert "DOCUMENT_ROOTS" in buffer.getvalue()
    assert ingest_command([str(secret)], workspace, Console(file=buffer, width=300)) == 0, "typed: allowed"
    assert sorted(d.title for d in run(list_documents(workspace))) == ["notes.md", secret.name]
