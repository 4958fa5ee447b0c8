"""Documents dropped into the chat: a file content block is added to the workspace, then answers the turn.

Most tests here send the older form, ``{"type": "file", "source_type": "base64", "mime_type", "data",
"metadata": {"filename"}}`` (Agent Chat UI's until November 2025); LangChain's v1 blocks (``"base64"``,
``"filename"``) and OpenAI's (``{"type": "file", "file": {"filename", "file_data": "data:...;base64,..."}}``)
are read as well. Each client's current form, and images, are in ``test_block_shapes.py``.
"""

from __future__ import annotations

import base64

import pytest
from langgraph_sdk import get_client

from tests.support.helpers import decisions_of, turn_text, user_message
from tests.unit.test_ingest_loaders import make_docx, make_pdf
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply

PDF_TEXT = "The aurora survey budget is 4200 euros for the winter season."
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chat_ui_file(name: str, mime: str, data: bytes) -> dict:
    """A file block in the older form (``source_type``), as Agent Chat UI sent it until November 2025."""
    return {
        "type": "file",
        "source_type": "base64",
        "mime_type": mime,
        "data": b64(data),
        "metadata": {"filename": name},
    }


@pytest.fixture
def embed(monkeypatch, llm):
    """The real embeddings client path, pointed at the scripted server."""
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


async def test_a_pdf_dropped_into_the_chat_answers_the_turn_through_the_sdk(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread_id = (await client.threads.create())["thread_id"]
    context = {"workspace": workspace, "chat_mode": "chat"}
    question = "What is the aurora survey budget?"
    blocks = [
        {"type": "text", "text": question},
        chat_ui_file("aurora.pdf", "application/pdf", make_pdf(PDF_TEXT)),
    ]
    llm.push(text_reply("The budget is 4200 euros."))
    out = await client.runs.wait(thread_id, "agent", input=user_message(blocks), context=context)

    assert [(u["name"], u["outcome"]) for u in out["uploads"]] == [("aurora.pdf", "added")]
    assert [d["outcome"] for d in decisions_of(out, "I2")] == ["added"]
    assert any(s["title"] == "aurora.pdf" and "4200 euros" in s["text"] for s in out["sources"])
    request = llm.requests[-1]["messages"]
    assert "4200 euros" in request[-1]["content"], "retrieval put the PDF's text into the prompt"
    assert "4200 euros" not in request[0]["content"], "after the history, not in the system prompt"
    assert request[-1]["content"].split("[END CONTEXT 0]\n\n")[-1].startswith(question)
    assert "[Attached aurora.pdf: added to this workspace's documents" in request[-1]["content"]
    shown = (await client.threads.get_state(thread_id))["values"]["messages"][0]["content"]
    assert shown[0] == {"type": "text", "text": question}
    assert shown[1]["metadata"]["filename"] == "aurora.pdf" and "data" not in shown[1], (
        "the bytes left the thread"
    )

    llm.push(text_reply("Still 4200 euros."))
    again = [
        {"type": "text", "text": "And again?"},
        chat_ui_file("aurora.pdf", "application/pdf", make_pdf(PDF_TEXT)),
    ]
    out = await client.runs.wait(thread_id, "agent", input=user_message(again), context=context)
    assert [(u["name"], u["outcome"]) for u in out["uploads"]] == [("aurora.pdf", "unchanged")]
    assert "already in this workspace's documents, unchanged" in llm.requests[-1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("block", "question"),
    [
        (
            chat_ui_file("ferry.txt", "text/plain", b"The harbour ferry leaves pier four at nine."),
            "harbour ferry leaves pier four",
        ),
        (
            chat_ui_file("notes.md", "text/markdown", b"# Kiln\n\nThe kiln fires pottery at 1200 degrees."),
            "kiln fires pottery",
        ),
        (
            {
                "type": "file",
                "base64": b64(b"<html><body><p>The lighthouse opens at dawn.</p></body></html>"),
                "mime_type": "text/html",
                "filename": "light.html",
            },
            "lighthouse opens at dawn",
        ),
        (
            {
                "type": "file",
                "file": {
                    "filename": "plans.docx",
                    "file_data": f"data:{DOCX};base64,"
                    + b64(make_docx("The glacier hike starts at the blue hut.")),
                },
            },
            "glacier hike starts at the blue hut",
        ),
    ],
)
async def test_every_document_type_and_block_form_is_added_and_found(
    embed, saver, workspace, thread, block, question
):
    graph = build_graph(checkpointer=saver)
    embed.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": f"What about the {question}?"}, block]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    name = out["uploads"][0]["name"]
    assert out["uploads"][0]["outcome"] == "added", out["uploads"]
    assert any(s["title"] == name for s in out["sources"]), "retrieval found the dropped document"
    assert (await DocumentStore().get_document(workspace, f"chat-upload:{name}")) is not None


async def test_an_image_gets_a_clear_answer_not_a_crash(embed, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    png = {
        "type": "image",
        "source_type": "base64",
        "mime_type": "image/png",
        "data": b64(b"\x89PNG\r\n\x1a\n"),
    }
    out = await graph.ainvoke(
        user_message([png]), thread, context=Context(workspace=workspace, chat_mode="chat")
    )
    assert out["stop_reason"] == "answered"
    assert out["uploads"][0]["outcome"] == "refused" and "image" in out["uploads"][0]["reason"]
    told = embed.requests[-1]["messages"][-1]["content"]
    assert "not added: it is an image; this model reads text only" in told
    assert await DocumentStore().space(workspace) is None, "nothing was stored"


async def test_a_file_over_the_limit_is_refused_with_its_size(embed, saver, workspace, thread, monkeypatch):
    monkeypatch.setenv("UPLOAD_MAX_BYTES", "1000")
    graph = build_graph(checkpointer=saver)
    big = chat_ui_file("big.txt", "text/plain", b"word " * 600)
    embed.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "read this"}, big]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    reason = out["uploads"][0]["reason"]
    assert out["uploads"][0]["outcome"] == "refused"
    assert "3000 bytes" in reason and "at most 1000 bytes" in reason and "UPLOAD_MAX_BYTES" in reason
    assert [d["outcome"] for d in decisions_of(out, "I2")] == ["refused"]
    assert await DocumentStore().get_document(workspace, "chat-upload:big.txt") is None


MEMO = (
    "Glacier ferry timetable: departures at seven and eleven from harbour pier nine; "
    "the evening boat returns by dusk."
)


@pytest.mark.parametrize(
    "block",
    [
        chat_ui_file("memo.txt", "text/plain", MEMO.encode()),
        chat_ui_file("memo.pdf", "application/pdf", make_pdf(MEMO)),
    ],
    ids=["txt", "pdf"],
)
async def test_summarise_this_sends_the_dropped_file_whole_and_only_in_its_turn(
    embed, saver, workspace, thread, block
):
    """'summarise this' shares no word with the file: a similarity search alone would miss it."""
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, chat_mode="chat")
    name = block["metadata"]["filename"]
    embed.push(text_reply("A ferry timetable."))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "summarise this"}, block]), thread, context=context
    )
    assert out["uploads"][0]["outcome"] == "added"
    system = turn_text(embed.requests[-1])
    assert "departures at seven and eleven from harbour pier nine" in system, "the file went into the prompt"
    assert [s["title"] for s in out["sources"]] == [name] and out["sources"][0]["uploaded"] is True
    (b8,) = decisions_of(out, "B8")
    assert b8["outcome"]["uploaded"] == {name: "whole"} and "dropped into this message" in b8["why"]

    embed.push(text_reply("Nothing attached."))
    out = await graph.ainvoke(user_message("summarise this"), thread, context=context)
    assert "harbour pier nine" not in turn_text(embed.requests[-1]), "not forced in again"
    assert out["sources"] == [] and "uploaded" not in decisions_of(out, "B8")[0]["outcome"]


async def test_the_dropped_files_chunks_are_not_searched_so_it_is_sent_once(embed, saver, workspace, thread):
    """A question sharing the file's words would find its chunks too; they must not take a place again."""
    graph = build_graph(checkpointer=saver)
    text = "\n\n".join(
        f"Section {i}: the glacier ferry leaves harbour pier nine at {i} o'clock." for i in range(40)
    )
    block = chat_ui_file("ferry.txt", "text/plain", text.encode())
    embed.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message(
            [{"type": "text", "text": "When does the glacier ferry leave harbour pier nine?"}, block]
        ),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    assert out["uploads"][0]["chunks"] > 1
    system = turn_text(embed.requests[-1])
    assert system.count("Section 7: the glacier ferry") == 1
    assert [(s["title"], s.get("uploaded")) for s in out["sources"]] == [("ferry.txt", True)]
    assert decisions_of(out, "B8")[0]["outcome"]["chunks"] == 0


async def test_a_dropped_file_over_the_context_share_is_sent_cut_in_the_middle(
    embed, saver, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    words = " ".join(f"w{i}" for i in range(6000))
    block = chat_ui_file("long.txt", "text/plain", f"OPENING LINE. {words} CLOSING LINE.".encode())
    embed.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "summarise this"}, block]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat", context_window=8192),
    )
    (b8,) = decisions_of(out, "B8")
    assert b8["outcome"]["uploaded"] == {"long.txt": "cut"}
    system = turn_text(embed.requests[-1])
    assert "OPENING LINE." in system and "CLOSING LINE." in system and "w3000 " not in system
    assert out["sources"][0]["title"] == "long.txt"
