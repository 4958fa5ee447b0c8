"""Workspace documents end to end: ingest graph, retrieval (B8), the agent's document tools, CLI functions.

Real PostgreSQL with pgvector, the real OpenAI embeddings client against the scripted server, whose
embedding is a deterministic bag of words: the expected ranking of every search is computed here from the
stored chunks with the same function, so the tests check the exact top_n / threshold / pin semantics.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from langgraph.types import Command
from rich.console import Console

from tests.support.helpers import decisions_of, turn_text, user_message
from tests.unit.test_ingest_loaders import make_docx, make_pdf
from workspace_agent.checkpoints.chunks import DocumentStore, EmbeddingMismatch
from workspace_agent.checkpoints.db import connection
from workspace_agent.core.context import QUERY_REFUSAL, Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.ingest import IngestContext
from workspace_agent.graphs.ingest import graph as ingest_graph
from workspace_agent.providers.embeddings import EmbeddingUnavailable
from workspace_agent.samples.scripted_model import hashed_embedding, text_reply, tool_reply
from workspace_agent.skills import documents
from workspace_agent.skills.documents import metadata_header, pin_documents

QUESTION = "When does the harbour ferry leave the pier in the morning?"
DOCS = {
    "harbour.md": "The harbour ferry leaves at nine from pier four every morning, and returns at six.",
    "tickets.md": "Tickets for the harbour ferry cost six euros, sold at the pier kiosk.",
    "garden.md": "Tomatoes in the garden need water every morning in the summer months.",
    "kitchen.md": "The kitchen oven bakes rye bread at two hundred degrees for an hour.",
    "museum.md": "The maritime museum opens on Sundays and shows old ship models.",
}
PINNED_SENTENCE = "Harbour ferry timetable: the ferry leaves the pier every morning at nine and at noon."


@pytest.fixture(autouse=True)
def roots(monkeypatch, tmp_path):
    """The test's own folder is a documents root, as a deployment sets ``DOCUMENT_ROOTS`` for its server."""
    monkeypatch.setenv("DOCUMENT_ROOTS", str(tmp_path))


@pytest.fixture
def embed(monkeypatch, llm):
    """The real embeddings client path, pointed at the scripted server."""
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


def write(folder: Path, files: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


async def ingest(workspace: str, *paths: Path | str, **settings) -> dict:
    return await ingest_graph.ainvoke(
        {"paths": [str(p) for p in paths]}, context=IngestContext(workspace=workspace, **settings)
    )


async def stored_chunks(database_url: str, workspace: str) -> list[dict]:
    async with connection(database_url) as conn:
        cur = await conn.execute(
            "SELECT c.id, c.document_id, c.text, d.title, d.source, d.pinned FROM chunks c"
            " JOIN documents d ON d.id = c.document_id WHERE c.workspace = %s ORDER BY c.id",
            (workspace,),
        )
        return await cur.fetchall()


def similarity(query: str, chunk: dict) -> float:
    a = hashed_embedding(query)
    b = hashed_embedding(metadata_header(chunk["title"], chunk["source"]) + chunk["text"])
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


async def ranked(database_url: str, workspace: str, query: str) -> list[tuple[float, dict]]:
    """Every unpinned chunk of the workspace with its exact similarity to ``query``, best first."""
    chunks = [c for c in await stored_chunks(database_url, workspace) if not c["pinned"]]
    return sorted(((similarity(query, c), c) for c in chunks), key=lambda pair: -pair[0])


async def pinned_workspace(tmp_path: Path, workspace: str) -> Path:
    """The five one-chunk documents, plus a long timetable (several chunks) pinned."""
    folder = write(tmp_path / "docs", DOCS)
    write(
        folder, {"timetable.md": "\n\n".join([PINNED_SENTENCE] + [f"Extra sailing {i}." for i in range(30)])}
    )
    out = await ingest(workspace, folder, chunk_size=120)
    assert len(out["added"]) == 6 and not out["failed"]
    return folder


def system_text(request: dict) -> str:
    """Where the turn's document context goes: with the user's message, after what stays the same."""
    return turn_text(request)


async def test_chat_retrieval_keeps_top_n_above_threshold_and_pinned_documents_whole(
    embed, saver, database_url, workspace, thread, tmp_path
):
    folder = await pinned_workspace(tmp_path, workspace)
    store = DocumentStore(database_url)
    before = await documents.search(store, workspace, QUESTION, top_n=3, threshold=0.0)
    assert "timetable.md" in [h.title for h in before.hits], "unpinned, the timetable would be a top hit"

    await pin_documents(workspace, ["timetable.md"], True, store)
    order = await ranked(database_url, workspace, QUESTION)
    scores = [s for s, _ in order]
    assert scores[1] - scores[2] > 0.002 and scores[2] > 0, "the data must separate 2nd and 3rd"
    threshold = (scores[1] + scores[2]) / 2  # top 3 asked, the third falls below the threshold
    expected = [c for _, c in order[:2]]

    graph = build_graph(checkpointer=saver)
    embed.push(text_reply("At nine."))
    out = await graph.ainvoke(
        user_message(QUESTION),
        thread,
        context=Context(workspace=workspace, chat_mode="chat", top_n=3, similarity_threshold=threshold),
    )
    pinned, *hits = out["sources"]
    assert pinned["pinned"] is True and "score" not in pinned and pinned["title"] == "timetable.md"
    assert pinned["text"].startswith(PINNED_SENTENCE)
    assert {h["text"] for h in hits} == {c["text"] for c in expected}
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True), "nearest first"
    assert sorted(h["score"] for h in hits) == pytest.approx(sorted(scores[:2]), abs=1e-3)
    assert all(h["score"] >= threshold for h in hits) and len(hits) == 2
    assert "timetable.md" not in [h["title"] for h in hits], "a pinned document is never a chunk result"

    system = system_text(embed.requests[0])
    timetable = (folder / "timetable.md").read_text()
    assert timetable in system, "the pinned document goes in whole"
    assert system.count(PINNED_SENTENCE) == 1, "and never again as a chunk"
    assert all(c["text"] in system for c in expected)
    assert order[2][1]["text"] not in system, "the chunk below the threshold is dropped"
    b8 = decisions_of(out, "B8")[0]
    assert b8["outcome"] == {
        "pinned": ["timetable.md"],
        "chunks": 2,
        "below_threshold": 1,
        "search_mode": "dense",
    }


async def test_query_mode_refuses_without_a_match_and_answers_with_sources_with_one(
    embed, saver, database_url, workspace, thread, tmp_path
):
    await ingest(workspace, write(tmp_path / "docs", DOCS))
    unrelated, matching = "quantum zebra violin", DOCS["kitchen.md"]
    worst = (await ranked(database_url, workspace, unrelated))[0][0]
    order = await ranked(database_url, workspace, matching)
    assert order[0][1]["title"] == "kitchen.md" and order[0][0] - worst > 0.1
    threshold = (order[0][0] + worst) / 2
    expected = [c["title"] for score, c in order[:4] if score >= threshold]
    graph = build_graph(checkpointer=saver)
    ctx = Context(workspace=workspace, chat_mode="query", similarity_threshold=threshold)

    out = await graph.ainvoke(user_message(unrelated), thread, context=ctx)
    assert out["stop_reason"] == "refused" and out["messages"][-1].content == QUERY_REFUSAL
    assert embed.requests == [] and out["sources"] == []
    assert "0 of the top 4 chunks" in decisions_of(out, "B8")[0]["why"]

    embed.push(text_reply("Two hundred degrees."))
    out = await graph.ainvoke(user_message(matching), thread, context=ctx)
    assert out["stop_reason"] == "answered"
    assert [s["title"] for s in out["sources"]] == expected and expected[0] == "kitchen.md"
    assert all(s["score"] >= threshold for s in out["sources"])
    assert DOCS["kitchen.md"] in system_text(embed.requests[0])

    async with connection(database_url) as conn:
        cur = await conn.execute(
            "SELECT include, sources FROM chat_log WHERE workspace = %s ORDER BY id", (workspace,)
        )
        rows = await cur.fetchall()
    assert [r["include"] for r in rows] == [False, True]
    assert rows[1]["sources"][0]["title"] == "kitchen.md"


async def test_the_agent_search_tool_drops_below_threshold_and_honours_pins(
    embed, saver, database_url, workspace, thread, tmp_path
):
    await pinned_workspace(tmp_path, workspace)
    await pin_documents(workspace, ["timetable.md"], True)
    order = await ranked(database_url, workspace, QUESTION)
    scores = [s for s, _ in order]
    assert scores[1] - scores[2] > 0.002 and scores[2] > 0, "the data must separate 2nd and 3rd"
    threshold = (scores[1] + scores[2]) / 2
    kept, dropped = [c for _, c in order[:2]], order[2][1]

    graph = build_graph(checkpointer=saver)
    embed.push(tool_reply(("search_documents", {"query": QUESTION})), text_reply("At nine."))
    out = await graph.ainvoke(
        user_message(QUESTION),
        thread,
        context=Context(workspace=workspace, top_n=3, similarity_threshold=threshold),
    )
    assert out["route"] == "agent" and out["stop_reason"] == "answered"
    assert PINNED_SENTENCE in system_text(embed.requests[0]), "agent mode: pinned documents are in context"
    b8 = decisions_of(out, "B8")[0]
    assert b8["outcome"] == {
        "pinned": ["timetable.md"],
        "chunks": 2,
        "below_threshold": 1,
        "search_mode": "dense",
    }, "agent mode gets the chunks chat would"
    assert "search_documents" in b8["why"]
    first_user = embed.requests[0]["messages"][-1]["content"]
    assert all(c["text"] in first_user for c in kept) and dropped["text"] not in first_user
    result = next(m for m in embed.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert all(c["text"] in result for c in kept)
    assert dropped["text"] not in result and PINNED_SENTENCE not in result
    pinned, *hits = out["sources"]
    assert pinned["pinned"] is True and pinned["title"] == "timetable.md"
    assert [h["text"] for h in hits] == [c["text"] for c in kept], "retrieved, then found again: cited once"
    assert all(h["score"] >= threshold for h in hits)


async def test_save_to_workspace_asks_first_and_the_saved_text_is_then_found(
    embed, saver, database_url, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    ctx = Context(workspace=workspace)
    note = {
        "text": "The lighthouse key hangs behind the blue door of the boathouse.",
        "title": "lighthouse key",
    }
    embed.push(tool_reply(("save_to_workspace", note)))
    out = await graph.ainvoke(user_message("remember where the lighthouse key is"), thread, context=ctx)
    request = out["__interrupt__"][0].value
    assert [a["name"] for a in request["action_requests"]] == ["save_to_workspace"]
    assert await documents.list_documents(workspace) == [], "nothing is saved before approval"

    embed.push(text_reply("Saved."))
    out = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), thread, context=ctx)
    assert out["stop_reason"] == "answered"
    [doc] = await documents.list_documents(workspace)
    assert doc.title == "lighthouse key" and doc.chunks == 1

    embed.push(text_reply("Behind the blue door."))
    out = await graph.ainvoke(
        user_message("Where does the lighthouse key hang?"),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    assert [s["title"] for s in out["sources"]] == ["lighthouse key"]
    assert "behind the blue door" in system_text(embed.requests[-1])


async def test_workspaces_with_the_same_document_never_see_each_other(embed, database_url, tmp_path):
    first, second = "ws-a-" + tmp_path.name[-6:], "ws-b-" + tmp_path.name[-6:]
    shared = write(tmp_path / "shared", {"harbour.md": DOCS["harbour.md"]})
    only_second = write(tmp_path / "other", {"ferry.md": QUESTION + " " + DOCS["harbour.md"]})
    await ingest(first, shared)
    await ingest(second, shared, only_second)
    store = DocumentStore(database_url)
    ids = {ws: {d.id for d in await store.list_documents(ws)} for ws in (first, second)}
    assert not ids[first] & ids[second]

    found = await documents.search(store, first, QUESTION, top_n=10, threshold=0.0)
    assert {h.document_id for h in found.hits} == ids[first] and len(found.hits) == 1
    found = await documents.search(store, second, QUESTION, top_n=10, threshold=0.0)
    assert {h.document_id for h in found.hits} == ids[second] and found.hits[0].title == "ferry.md"

    await documents.remove_documents(second, ["harbour.md"], store)
    assert len((await documents.search(store, first, QUESTION, top_n=10, threshold=0.0)).hits) == 1


async def test_reingest_skips_unchanged_replaces_changed_and_reports_a_broken_file(
    embed, database_url, workspace, tmp_path
):
    folder = write(
        tmp_path / "mixed",
        {
            "a.md": "# Alpha\n\nThe alpha document about ferries.",
            "b.txt": "Bravo notes: the first version.",
            "c.html": "<html><body><p>Charlie page</p></body></html>",
            "d.docx": make_docx("Delta paragraph"),
            "e.pdf": make_pdf("Echo portable document"),
            "broken.pdf": b"%PDF-1.7 truncated garbage",
            "image.png": b"\x89PNG not a document",
        },
    )
    out = await ingest(workspace, folder)
    assert [e["title"] for e in out["added"]] == ["a.md", "b.txt", "c.html", "d.docx", "e.pdf"]
    assert [(e["title"], "PDF" in e["reason"]) for e in out["failed"]] == [("broken.pdf", True)]
    assert "1 file(s) of unsupported types in folders skipped" in decisions_of(out, "I1")[0]["why"]
    rows = await stored_chunks(database_url, workspace)
    texts = " ".join(r["text"] for r in rows)
    assert all(word in texts for word in ("Alpha", "Bravo", "Charlie", "Delta", "Echo"))

    again = await ingest(workspace, folder)
    assert len(again["unchanged"]) == 5 and again["added"] == again["replaced"] == []
    assert [e["title"] for e in again["failed"]] == ["broken.pdf"]
    assert await stored_chunks(database_url, workspace) == rows, "no new rows for unchanged files"

    (folder / "b.txt").write_text("Bravo notes: the second version, rewritten.")
    changed = await ingest(workspace, folder)
    assert [e["title"] for e in changed["replaced"]] == ["b.txt"] and len(changed["unchanged"]) == 4
    assert changed["replaced"][0]["document_id"] == out["added"][1]["document_id"]
    now = await stored_chunks(database_url, workspace)
    assert len(now) == len(rows)
    bravo = [r["text"] for r in now if r["title"] == "b.txt"]
    assert bravo == ["Bravo notes: the second version, rewritten."]

    rechunked = await ingest(workspace, folder / "a.md", chunk_size=20, chunk_overlap=0)
    assert [e["title"] for e in rechunked["replaced"]] == ["a.md"] and rechunked["replaced"][0]["chunks"] > 1


async def test_a_workspace_embedded_by_another_model_is_a_clear_error(
    embed, saver, monkeypatch, workspace, thread, tmp_path
):
    await ingest(workspace, write(tmp_path / "docs", DOCS))
    monkeypatch.setenv("EMBEDDING_MODEL", "other-embed")
    graph = build_graph(checkpointer=saver)
    with pytest.raises(EmbeddingMismatch) as raised:
        await graph.ainvoke(
            user_message(QUESTION), thread, context=Context(workspace=workspace, chat_mode="chat")
        )
    message = str(raised.value)
    assert "openai-compatible:scripted-embed" in message and "openai-compatible:other-embed" in message
    assert embed.requests == [], "the model is never asked with garbage context"
    with pytest.raises(EmbeddingMismatch):
        await ingest(workspace, tmp_path / "docs")


async def test_chat_goes_on_without_documents_or_embedding_model_and_says_so(
    embed, saver, monkeypatch, workspace, thread, tmp_path
):
    graph = build_graph(checkpointer=saver)
    ctx = Context(workspace=workspace, chat_mode="chat")
    embed.push(text_reply("hello"))
    out = await graph.ainvoke(user_message("hi"), thread, context=ctx)
    assert out["stop_reason"] == "answered" and "has no documents" in decisions_of(out, "B8")[0]["why"]

    await ingest(workspace, write(tmp_path / "docs", DOCS))
    await pin_documents(workspace, ["museum.md"], True)

    def unavailable():
        raise EmbeddingUnavailable("no embedding model: set EMBEDDING_MODEL")

    monkeypatch.setattr(documents, "get_embeddings", unavailable)
    embed.push(text_reply("hello again"))
    out = await graph.ainvoke(user_message(QUESTION), thread, context=ctx)
    assert out["stop_reason"] == "answered"
    why = decisions_of(out, "B8")[0]["why"]
    assert "cannot be searched" in why and "no embedding model" in why
    assert [s["title"] for s in out["sources"]] == ["museum.md"], "pins need no embeddings"


PLANS = (
    "Ferry passes by season.\n\n| Pass | Price | Crossings |\n|------|-------|-----------|\n"
    "| Summer | 40 euros | 60 |\n| Winter | 25 euros | 30 |\n"
)
PLAN_ROWS = ("Pass: Summer; Price: 40 euros; Crossings: 60", "Pass: Winter; Price: 25 euros; Crossings: 30")


async def test_a_table_reaches_the_model_as_named_rows_but_is_cited_as_written(
    embed, saver, database_url, workspace, thread, tmp_path
):
    await ingest(workspace, write(tmp_path / "docs", {"passes.md": PLANS, "museum.md": DOCS["museum.md"]}))
    question = "What does the winter ferry pass cost, and how many crossings does it hold?"
    graph = build_graph(checkpointer=saver)
    search = tool_reply(("search_documents", {"query": "winter ferry pass price"}))
    embed.push(search, text_reply("25 euros."))
    out = await graph.ainvoke(
        user_message(question), thread, context=Context(workspace=workspace, similarity_threshold=0.0)
    )
    assert out["stop_reason"] == "answered"
    first = turn_text(embed.requests[0])
    assert all(row in first for row in PLAN_ROWS), "retrieved for the turn: one named row a line"
    assert "| Winter |" not in first and "|------|" not in first
    result = next(m for m in embed.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert all(row in result for row in PLAN_ROWS) and "| Winter |" not in result, "found by the tool: same"
    cited = next(s for s in out["sources"] if s["title"] == "passes.md")
    assert cited["text"] == PLANS.strip(), "the citation shows the document as it was written"

    await pin_documents(workspace, ["passes.md"], True)
    embed.push(text_reply("25 euros."))
    out = await graph.ainvoke(user_message(question), thread, context=Context(workspace=workspace))
    assert all(row in turn_text(embed.requests[-1]) for row in PLAN_ROWS), "a pinned document: the same"
    assert "| Winter |" not in turn_text(embed.requests[-1])


async def test_pinned_documents_are_capped_by_the_context_share_of_the_window(
    embed, saver, workspace, thread, tmp_path
):
    folder = write(
        tmp_path / "pins",
        {"short.md": "Opening hours: nine to five.", "long.md": "A long handbook. " * 400},
    )
    await ingest(workspace, folder)
    await pin_documents(workspace, ["short.md", "long.md"], True)
    graph = build_graph(checkpointer=saver)
    embed.push(text_reply("ok"), text_reply("ok"))
    small = Context(workspace=workspace, chat_mode="chat", context_window=4000)
    out = await graph.ainvoke(user_message("opening hours?"), thread, context=small)
    b8 = decisions_of(out, "B8")[0]
    assert b8["outcome"]["pinned"] == ["short.md"] and b8["outcome"]["pinned_left_out"] == ["long.md"]
    assert "'long.md' left out: over the" in b8["why"]
    assert "A long handbook" not in system_text(embed.requests[0])

    large = Context(workspace=workspace, chat_mode="chat", context_window=32_000)
    out = await graph.ainvoke(user_message("opening hours?"), thread, context=large)
    assert sorted(decisions_of(out, "B8")[0]["outcome"]["pinned"]) == ["long.md", "short.md"]
    assert ("A long handbook. " * 400).strip() in system_text(embed.requests[1])


def test_cli_functions_ingest_list_pin_and_remove(embed, database_url, workspace):
    from workspace_agent.cli.documents import (
        SAMPLES,
        ingest_command,
        list_command,
        pin_command,
        remove_command,
    )

    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    assert ingest_command([str(SAMPLES)], workspace, console) == 0
    assert "4 added, 0 replaced, 0 unchanged, 0 failed" in buffer.getvalue()
    assert ingest_command([str(SAMPLES), "missing.md"], workspace, console) == 1
    assert "0 added, 0 replaced, 4 unchanged, 1 failed" in buffer.getvalue()
    assert pin_command(["faq.md"], workspace, console, pinned=True) == 0
    assert remove_command(["pricing.md", "nope"], workspace, console) == 1
    assert "no document 'nope'" in buffer.getvalue()
    buffer.truncate(0)
    assert list_command(workspace, console) == 0
    listing = buffer.getvalue()
    assert "faq.md" in listing and "setup.md" in listing and "pricing.md" not in listing
    faq = next(line for line in listing.splitlines() if "faq.md" in line)
    assert "yes" in faq


def test_the_ingest_graph_describes_itself_to_studio_and_rejects_bad_settings():
    schemas = (
        ingest_graph.get_input_jsonschema(),
        ingest_graph.get_output_jsonschema(),
        ingest_graph.get_context_jsonschema(),
    )
    assert list(schemas[0]["properties"]) == ["paths"]
    assert {"added", "unchanged", "replaced", "failed", "decisions"} <= set(schemas[1]["properties"])
    assert all(f.get("description") for f in schemas[2]["properties"].values())
    with pytest.raises(ValueError, match="chunk_overlap"):
        IngestContext(chunk_size=100, chunk_overlap=100)


async def test_ingest_and_query_through_the_dev_server(llm, dev_server, workspace):
    """Studio's way: the ingest graph fills a workspace, then a query-mode turn answers with sources."""
    from langgraph_sdk import get_client

    from workspace_agent.cli.documents import SAMPLES

    client = get_client(url=dev_server)
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"], "ingest", input={"paths": [str(SAMPLES)]}, context={"workspace": workspace}
    )
    assert sorted(d["title"] for d in out["added"]) == [
        "faq.md",
        "pricing.md",
        "setup.md",
        "troubleshooting.txt",
    ]
    llm.push(text_reply("Team costs 12 EUR a month."))
    chat = await client.threads.create()
    out = await client.runs.wait(
        chat["thread_id"],
        "agent",
        input=user_message("How much does the Team plan cost per month?"),
        context={"workspace": workspace, "chat_mode": "query"},
    )
    assert out["stop_reason"] == "answered"
    assert any(s["title"] == "pricing.md" and s["score"] > 0 for s in out["sources"])
    assert "12 EUR a month" in turn_text(llm.requests[-1])
