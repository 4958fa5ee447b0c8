"""Issue 19, finding 2: a few kilobytes of upload must not take the server down.

Each test makes its own hostile file: a DOCX whose ``word/document.xml`` unpacks to hundreds of MB, a PDF
whose many pages share one content stream (kilobytes on disk, millions of characters of text), and a page
tree nested thousands deep. Extraction runs in a separate process with limits on CPU time, memory and
characters: the bombs are refused with the setting named, a cancelled run kills its worker, and the server
answers another thread's ordinary turn while bombs are being refused. Time limits here only catch a hang.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from tests.support.helpers import user_message
from tests.unit.test_ingest_loaders import make_docx, raw_pdf
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.ingest import IngestContext
from workspace_agent.graphs.ingest import graph as ingest_graph
from workspace_agent.samples.scripted_model import text_reply

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
WORKER_MODULE = "workspace_agent.skills.extraction"
#: A hang catcher, generous for a busy two-core machine: the refusals take about a second.
HANG = 90


def docx_bomb(unpacked_mb: int = 200) -> bytes:
    """A real DOCX whose ``word/document.xml`` is ``unpacked_mb`` MB of paragraphs (small on disk)."""
    base = zipfile.ZipFile(io.BytesIO(make_docx("cover page")))
    head = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    )
    chunk = b"<w:p><w:r><w:t>The quick brown fox jumps over the lazy dog.</w:t></w:r></w:p>" * (1 << 14)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as bomb:
        for info in base.infolist():
            if info.filename != "word/document.xml":
                bomb.writestr(info, base.read(info))
        with bomb.open("word/document.xml", "w", force_zip64=True) as member:
            member.write(head)
            for _ in range(unpacked_mb * 1024 * 1024 // len(chunk)):
                member.write(chunk)
            member.write(b"</w:body></w:document>")
    return out.getvalue()


def shared_stream_pdf(pages: int = 2000, words: int = 2000) -> bytes:
    """``pages`` pages that all show one compressed content stream of ``words`` words: 30 kB per page."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"(harbour ferry ) Tj " * words + b"ET"
    packed = zlib.compress(content, 9)
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
        b" /Resources << /Font << /F1 4 0 R >> >> >>"
    )
    return raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
            _stream(packed),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            *[page] * pages,
        ]
    )


def slow_pdf(pages: int = 2000, words: int = 2000) -> bytes:
    """``pages`` pages, each with a content stream of its own: slow to read however it is read (no page's text
    can be reused for another's), and still only a few hundred kB."""
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i in range(pages):
        content = b"BT /F1 12 Tf 72 720 Td (page %d) Tj " % i + b"(harbour ferry ) Tj " * words + b"ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
            b" /Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * i)
        )
        objects.append(_stream(zlib.compress(content, 9)))
    return raw_pdf(objects)


def _stream(packed: bytes) -> bytes:
    return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"


def deep_tree_pdf(depth: int = 5000) -> bytes:
    """One page under ``depth`` nested ``/Pages`` nodes."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(depth):
        number = 2 + level
        parent = b" /Parent %d 0 R" % (number - 1) if level else b""
        objects.append(b"<< /Type /Pages /Kids [%d 0 R] /Count 1%s >>" % (number + 1, parent))
    page = 2 + depth
    stream = b"BT /F1 12 Tf 72 720 Td (deep) Tj ET"
    objects.append(
        b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>" % (page - 1, page + 1)
    )
    objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return raw_pdf(objects)


def file_block(name: str, mime: str, data: bytes) -> dict:
    """A file block as Agent Chat UI sends it."""
    return {
        "type": "file",
        "source_type": "base64",
        "mime_type": mime,
        "data": base64.b64encode(data).decode(),
        "metadata": {"filename": name},
    }


def worker_pids() -> set[int]:
    """Extraction workers started by this process (children whose command line runs the worker module)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and WORKER_MODULE.encode() in cmdline:
            found.add(int(entry.name))
    return found


@pytest.fixture
def embed(monkeypatch, llm):
    """The real embeddings client path, pointed at the scripted server."""
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


async def upload(saver, workspace: str, thread: dict, *blocks: dict) -> dict:
    """One chat-mode turn of the agent graph carrying ``blocks`` after a line of text."""
    graph = build_graph(checkpointer=saver)
    return await graph.ainvoke(
        user_message([{"type": "text", "text": "read these"}, *blocks]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )


@pytest.mark.timeout(HANG * 2)
async def test_a_docx_zip_bomb_is_refused_before_it_is_unpacked(embed, saver, workspace, thread):
    bomb = docx_bomb(200)
    assert len(bomb) < 1_000_000, "a small file on disk"
    embed.push(text_reply("ok"))
    started = time.monotonic()
    out = await upload(saver, workspace, thread, file_block("bomb.docx", DOCX, bomb))
    took = time.monotonic() - started
    [entry] = out["uploads"]
    assert entry["outcome"] == "refused", entry
    assert "unpacks to" in entry["reason"] and "EXTRACT_MEMORY_MB" in entry["reason"], entry["reason"]
    assert took < HANG, f"refusing took {took:.0f} s"
    assert await DocumentStore().get_document(workspace, "chat-upload:bomb.docx") is None


@pytest.mark.timeout(HANG * 2)
async def test_a_pdf_whose_pages_share_one_stream_stops_at_the_character_cap(
    embed, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("EXTRACT_MAX_CHARS", "200000")
    bomb = shared_stream_pdf(pages=2000)
    assert len(bomb) < 400_000, "a few hundred kB on disk, 60 million characters of text"
    embed.push(text_reply("ok"))
    started = time.monotonic()
    out = await upload(saver, workspace, thread, file_block("pages.pdf", "application/pdf", bomb))
    took = time.monotonic() - started
    [entry] = out["uploads"]
    assert entry["outcome"] == "refused", entry
    assert "more than 200000 characters" in entry["reason"] and "EXTRACT_MAX_CHARS" in entry["reason"]
    assert took < HANG, f"refusing took {took:.0f} s: extraction did not stop at the cap"


@pytest.mark.timeout(HANG * 2)
async def test_the_cpu_limit_stops_a_slow_extraction(embed, saver, workspace, thread, monkeypatch):
    monkeypatch.setenv("EXTRACT_CPU_SECONDS", "2")
    monkeypatch.setenv("EXTRACT_MAX_CHARS", "1000000000")
    embed.push(text_reply("ok"))
    slow = file_block("slow.pdf", "application/pdf", slow_pdf())
    out = await upload(saver, workspace, thread, slow)
    [entry] = out["uploads"]
    assert entry["outcome"] == "refused", entry
    # A niced worker on a busy machine may reach the wall-clock bound (derived from the same setting) first.
    assert "EXTRACT_CPU_SECONDS" in entry["reason"], entry["reason"]
    assert "2 s of processor time" in entry["reason"] or "wall-clock" in entry["reason"]


@pytest.mark.timeout(HANG * 2)
async def test_a_deep_page_tree_is_refused_with_a_reason(embed, saver, workspace, thread):
    embed.push(text_reply("ok"))
    out = await upload(saver, workspace, thread, file_block("deep.pdf", "application/pdf", deep_tree_pdf()))
    [entry] = out["uploads"]
    assert entry["outcome"] == "refused" and "not a readable PDF" in entry["reason"], entry


@pytest.mark.timeout(HANG * 2)
async def test_ingest_refuses_the_same_bombs(llm, workspace, tmp_path, monkeypatch, database_url):
    monkeypatch.setenv("DOCUMENT_ROOTS", str(tmp_path))
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    monkeypatch.setenv("EXTRACT_MAX_CHARS", "200000")
    (tmp_path / "bomb.docx").write_bytes(docx_bomb(200))
    (tmp_path / "pages.pdf").write_bytes(shared_stream_pdf())
    (tmp_path / "fine.md").write_text("The ferry leaves at nine.")
    out = await ingest_graph.ainvoke({"paths": [str(tmp_path)]}, context=IngestContext(workspace=workspace))
    assert [e["title"] for e in out["added"]] == ["fine.md"]
    reasons = {f["title"]: f["reason"] for f in out["failed"]}
    assert "EXTRACT_MEMORY_MB" in reasons["bomb.docx"] and "EXTRACT_MAX_CHARS" in reasons["pages.pdf"]


@pytest.mark.timeout(HANG * 2)
async def test_a_cancelled_run_kills_its_extraction_worker(embed, saver, workspace, thread, monkeypatch):
    monkeypatch.setenv("EXTRACT_CPU_SECONDS", "600")
    monkeypatch.setenv("EXTRACT_MAX_CHARS", "1000000000")
    turn = asyncio.create_task(
        upload(saver, workspace, thread, file_block("slow.pdf", "application/pdf", slow_pdf()))
    )
    deadline = time.monotonic() + HANG
    while not (running := worker_pids()):
        assert not turn.done(), "the turn ended without an extraction worker"
        assert time.monotonic() < deadline, "no extraction worker process was started"
        await asyncio.sleep(0.05)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    deadline = time.monotonic() + 30
    while running & worker_pids():
        assert time.monotonic() < deadline, f"worker {running} still runs after its run was cancelled"
        await asyncio.sleep(0.1)


@pytest.mark.timeout(HANG * 4)
async def test_the_server_answers_another_thread_while_bombs_are_refused(dev_server, llm, workspace):
    """Six bombs on six threads, then an ordinary turn on another: it is answered, and every bomb refused."""
    client = get_client(url=dev_server)
    context = {"workspace": workspace, "chat_mode": "chat"}
    docx, pdf = docx_bomb(200), shared_stream_pdf()
    bombs = []
    for i in range(6):
        block = file_block(f"bomb{i}.docx", DOCX, docx) if i % 2 else file_block(f"bomb{i}.pdf", PDF, pdf)
        thread_id = (await client.threads.create())["thread_id"]
        llm.push(text_reply("could not read it"))
        run = await client.runs.create(thread_id, "agent", input=user_message([block]), context=context)
        bombs.append((thread_id, run["run_id"]))

    other = (await client.threads.create())["thread_id"]
    llm.push(text_reply("The ferry leaves at nine."))
    started = time.monotonic()
    out = await asyncio.wait_for(
        client.runs.wait(other, "agent", input=user_message("When does the ferry leave?"), context=context),
        HANG * 2,
    )
    took = time.monotonic() - started
    assert out["stop_reason"] == "answered" and out["messages"][-1]["content"], out
    assert took < HANG, f"the other thread's turn took {took:.0f} s"

    for thread_id, run_id in bombs:
        await asyncio.wait_for(client.runs.join(thread_id, run_id), HANG * 2)
        state = (await client.threads.get_state(thread_id))["values"]
        assert [u["outcome"] for u in state["uploads"]] == ["refused"], state["uploads"]
