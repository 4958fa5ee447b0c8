"""Issue 21.1: every content-block shape real clients send for a dropped file or image.

Each block is written as its client builds it, and a comment names the source it was read from:
- Agent Chat UI, ``src/lib/multimodal-utils.ts`` ``fileToContentBlock`` (its form since November 2025:
  ``mimeType`` and plain ``data``, no ``source_type``), sent as the user message's content by
  ``src/components/thread/index.tsx`` ``handleSubmit``; the same function before that change for the
  older form (``source_type: "base64"``, ``mime_type``);
- LangChain v1's standard blocks, ``langchain_core/messages/content.py`` (``FileContentBlock``,
  ``ImageContentBlock``, as ``create_file_block`` / ``create_image_block`` build them);
- OpenAI's chat-completions content parts, ``openai/types/chat/chat_completion_content_part_param.py``
  (``File``, ``FileFile``) and ``chat_completion_content_part_image_param.py`` (``image_url``).

Before, Agent Chat UI's current PDF was refused as "not inline", so the person read that no document
mentioned what they had just dropped; its image got that wrong reason too and lost its bytes, so the UI
showed a broken image after the answer.
"""

from __future__ import annotations

import base64
import struct
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langgraph_sdk import get_client

from tests.support.helpers import decisions_of, turn_text, user_message
from tests.unit.test_ingest_loaders import make_pdf
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply

PDF_TEXT = "The aurora survey budget is 4200 euros for the winter season."
QUESTION = "What is the aurora survey budget?"
TEXT_ONLY = "it is an image; this model reads text only"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tiny_png() -> bytes:
    """A valid one-pixel PNG, so what is kept is an image a browser can draw."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixel = zlib.compress(b"\x00\xff\x80\x00\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixel) + chunk(b"IEND", b"")


PDF, PNG = b64(make_pdf(PDF_TEXT)), b64(tiny_png())


class Hits(ThreadingHTTPServer):
    """A loopback web server that records every request: a link in a block must never be fetched."""

    paths: list[str]


@pytest.fixture
def origin() -> Iterator[Hits]:
    class Record(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.server.paths.append(self.path)  # type: ignore[attr-defined]
            self.send_response(200)
            self.end_headers()
            self.wfile.write(make_pdf(PDF_TEXT) if self.path.endswith(".pdf") else tiny_png())

        def log_message(self, *args: object) -> None:
            pass

    server = Hits(("127.0.0.1", 0), Record)
    server.paths = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def link(server: Hits, path: str) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}{path}"


@pytest.fixture
def embed(monkeypatch, llm):
    """The real embeddings client path, pointed at the scripted server."""
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


def pdf_forms() -> list:
    return [
        pytest.param(
            # agent-chat-ui src/lib/multimodal-utils.ts fileToContentBlock, the PDF branch
            {
                "type": "file",
                "mimeType": "application/pdf",
                "data": PDF,
                "metadata": {"filename": "aurora.pdf"},
            },
            id="agent-chat-ui",
        ),
        pytest.param(
            # langchain_core/messages/content.py FileContentBlock, as create_file_block(base64=, mime_type=,
            # filename=) builds it: the name goes to extras
            {
                "type": "file",
                "id": "lc_3f1c9a52-8d7e-4b1a-9c0f-2e6d5a7b8c91",
                "base64": PDF,
                "mime_type": "application/pdf",
                "extras": {"filename": "aurora.pdf"},
            },
            id="langchain-v1",
        ),
        pytest.param(
            # openai/types/chat/chat_completion_content_part_param.py File / FileFile
            {
                "type": "file",
                "file": {"filename": "aurora.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
            },
            id="openai-file-data",
        ),
        pytest.param(
            # agent-chat-ui src/lib/multimodal-utils.ts fileToContentBlock before d93ba24 (November 2025)
            {
                "type": "file",
                "source_type": "base64",
                "mime_type": "application/pdf",
                "data": PDF,
                "metadata": {"filename": "aurora.pdf"},
            },
            id="older-source-type",
        ),
    ]


@pytest.mark.parametrize("block", pdf_forms())
async def test_a_pdf_in_each_clients_form_is_added_and_answers_the_turn(
    embed, saver, workspace, thread, block
):
    graph = build_graph(checkpointer=saver)
    embed.push(text_reply("The budget is 4200 euros."))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": QUESTION}, block]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    assert [(u["name"], u["outcome"]) for u in out["uploads"]] == [("aurora.pdf", "added")], out["uploads"]
    assert [d["outcome"] for d in decisions_of(out, "I2")] == ["added"]
    assert [s["title"] for s in out["sources"]] == ["aurora.pdf"]
    told = turn_text(embed.requests[-1])
    assert "4200 euros" in told and "[Attached aurora.pdf: added to this workspace's documents" in told
    stored = (await graph.aget_state(thread)).values["messages"][0].content[1]
    assert PDF not in str(stored), "a document's bytes leave the thread once it is in the workspace"
    assert stored["metadata"]["filename"] == "aurora.pdf"


PDF_ID, AS_LINK, AS_ID = "file-6F2ksmvXxt4VdoqmHRw6kL", "it was sent as a link", "it was sent as a file id"
#: Each file sent by reference, built from the link of a server that records its requests.
FILE_REFERENCES = [
    # langchain_core/messages/content.py FileContentBlock with url (create_file_block(url=...))
    pytest.param(lambda url: {"type": "file", "id": "lc_7a0e", "url": url}, AS_LINK, id="langchain-v1-url"),
    # langchain_core/messages/content.py FileContentBlock with file_id (create_file_block(file_id=...))
    pytest.param(
        lambda url: {"type": "file", "id": "lc_9b1f", "file_id": PDF_ID}, AS_ID, id="langchain-v1-file-id"
    ),
    # openai/types/chat/chat_completion_content_part_param.py FileFile.file_id
    pytest.param(lambda url: {"type": "file", "file": {"file_id": PDF_ID}}, AS_ID, id="openai-file-id"),
    # langchain_core/messages/block_translators/langchain_v0.py: source_type "url" and "id"
    pytest.param(
        lambda url: {"type": "file", "source_type": "url", "url": url, "mime_type": "application/pdf"},
        AS_LINK,
        id="older-url",
    ),
    pytest.param(lambda url: {"type": "file", "source_type": "id", "id": PDF_ID}, AS_ID, id="older-id"),
]


@pytest.mark.parametrize(("make", "how"), FILE_REFERENCES)
async def test_a_file_sent_by_reference_is_refused_naming_it_and_never_fetched(
    embed, saver, workspace, thread, origin, make, how
):
    url = link(origin, "/budget.pdf")
    block = make(url)
    graph = build_graph(checkpointer=saver)
    embed.push(text_reply("I cannot open it."))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "Summarise the budget file."}, block]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    (entry,) = out["uploads"]
    assert entry["outcome"] == "refused" and entry["reason"].startswith(how), entry
    assert (url if how == AS_LINK else PDF_ID) in entry["reason"] and "inline (base64)" in entry["reason"]
    assert [d["outcome"] for d in decisions_of(out, "I2")] == ["refused"]
    assert f"not added: {how}" in turn_text(embed.requests[-1]), "the model is told why"
    assert origin.paths == [], "the server never fetches a link a client sent"
    assert await DocumentStore().space(workspace) is None


#: Each image form, built from the link of a server that records its requests (for the forms that link).
IMAGE_FORMS = [
    pytest.param(
        # agent-chat-ui src/lib/multimodal-utils.ts fileToContentBlock, the image branch
        lambda url: {"type": "image", "mimeType": "image/png", "data": PNG, "metadata": {"name": "cat.png"}},
        id="agent-chat-ui",
    ),
    pytest.param(
        # langchain_core/messages/content.py ImageContentBlock, as create_image_block(base64=, mime_type=,
        # filename=) builds it
        lambda url: {
            "type": "image",
            "id": "lc_c2d4",
            "base64": PNG,
            "mime_type": "image/png",
            "extras": {"filename": "cat.png"},
        },
        id="langchain-v1",
    ),
    pytest.param(
        # openai/types/chat/chat_completion_content_part_image_param.py, a data URL
        lambda url: {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        },
        id="openai-image-url-data",
    ),
    pytest.param(
        # agent-chat-ui src/lib/multimodal-utils.ts fileToContentBlock before d93ba24
        lambda url: {
            "type": "image",
            "source_type": "base64",
            "mime_type": "image/png",
            "data": PNG,
            "metadata": {"name": "cat.png"},
        },
        id="older-source-type",
    ),
    # langchain_core/messages/content.py ImageContentBlock with url, and with file_id
    pytest.param(lambda url: {"type": "image", "id": "lc_e5f6", "url": url}, id="langchain-v1-url"),
    pytest.param(
        lambda url: {"type": "image", "id": "lc_a7b8", "file_id": "file-Kc81pQ2"}, id="langchain-v1-file-id"
    ),
    # openai/types/chat/chat_completion_content_part_image_param.py, a link
    pytest.param(lambda url: {"type": "image_url", "image_url": {"url": url}}, id="openai-image-url-link"),
]


@pytest.mark.parametrize("make", IMAGE_FORMS)
async def test_an_image_in_each_clients_form_stays_as_sent_and_the_prompt_says_why(
    embed, saver, workspace, thread, origin, make
):
    block = make(link(origin, "/cat.png"))
    graph = build_graph(checkpointer=saver)
    embed.push(text_reply("I cannot see images."))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "What is in this picture?"}, block]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    (entry,) = out["uploads"]
    assert entry["outcome"] == "refused" and entry["reason"].startswith(TEXT_ONLY), entry
    assert entry["kept"] is True, "the image stays in the conversation"
    assert [d["outcome"] for d in decisions_of(out, "I2")] == ["refused"]
    assert TEXT_ONLY in decisions_of(out, "I2")[0]["why"]
    told = turn_text(embed.requests[-1])
    assert f"[Attached {entry['name']}: not added: {TEXT_ONLY}" in told
    assert PNG not in told, "the model is sent no bytes"
    stored = (await graph.aget_state(thread)).values["messages"][0].content[1]
    assert {k: stored.get(k) for k in block} == block, "every part the client sent is kept, bytes included"
    assert stored.keys() - block.keys() <= {"outcome", "metadata"}, "an unnamed one gains only its name"
    assert origin.paths == [], "an image link is not fetched either"
    assert await DocumentStore().space(workspace) is None


def chat_ui_image(name: str, data: bytes) -> dict:
    """An image as Agent Chat UI sends it (src/lib/multimodal-utils.ts fileToContentBlock)."""
    return {"type": "image", "mimeType": "image/png", "data": b64(data), "metadata": {"name": name}}


async def test_an_image_over_the_size_limit_is_refused_and_its_bytes_dropped(
    embed, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("UPLOAD_MAX_BYTES", "1000")
    graph = build_graph(checkpointer=saver)
    small, big = chat_ui_image("small.png", tiny_png()), chat_ui_image("big.png", tiny_png() + b"\x00" * 3000)
    embed.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "look"}, small, big]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    kept, dropped = out["uploads"]
    assert kept["kept"] is True and dropped["kept"] is False
    assert "at most 1000 bytes" in dropped["reason"] and "UPLOAD_MAX_BYTES" in dropped["reason"]
    assert "neither read nor kept" in dropped["reason"]
    told = turn_text(embed.requests[-1])
    assert "[Attached big.png: not added: it is 3" in told and "(UPLOAD_MAX_BYTES)" in told
    stored = (await graph.aget_state(thread)).values["messages"][0].content
    assert stored[1]["data"] == small["data"] and "data" not in stored[2], "the oversized image's bytes left"
    assert stored[2]["metadata"]["name"] == "big.png" and stored[2]["mimeType"] == "image/png"


async def test_images_past_the_per_message_caps_lose_their_bytes(
    embed, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("UPLOAD_MAX_FILES", "3")
    monkeypatch.setenv("UPLOAD_MAX_TOTAL_BYTES", str(2 * len(tiny_png()) + 10))
    graph = build_graph(checkpointer=saver)
    images = [chat_ui_image(f"p{i}.png", tiny_png() + bytes([i])) for i in range(4)]
    embed.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message([{"type": "text", "text": "look"}, *images]),
        thread,
        context=Context(workspace=workspace, chat_mode="chat"),
    )
    assert [u["kept"] for u in out["uploads"]] == [True, True, False, False]
    assert "UPLOAD_MAX_TOTAL_BYTES" in out["uploads"][2]["reason"]
    assert "UPLOAD_MAX_FILES" in out["uploads"][3]["reason"]
    stored = (await graph.aget_state(thread)).values["messages"][0].content
    assert ["data" in b for b in stored[1:]] == [True, True, False, False]


def chat_ui_pdf(name: str) -> dict:
    """A PDF as Agent Chat UI sends it (src/lib/multimodal-utils.ts fileToContentBlock)."""
    return {"type": "file", "mimeType": "application/pdf", "data": PDF, "metadata": {"filename": name}}


async def test_agent_chat_uis_pdf_answers_the_turn_through_langgraph_dev(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread_id = (await client.threads.create())["thread_id"]
    # agent-chat-ui src/components/thread/index.tsx handleSubmit: the text block, then the file blocks
    message = {
        "id": "0b8e3f7c-5a1d-4c2e-9f6b-7d3a1e2c4b5f",
        "type": "human",
        "content": [{"type": "text", "text": QUESTION}, chat_ui_pdf("aurora.pdf")],
    }
    llm.push(text_reply("The budget is 4200 euros."))
    out = await client.runs.wait(
        thread_id,
        "agent",
        input={"messages": [message]},
        context={"workspace": workspace, "chat_mode": "chat"},
    )
    assert [(u["name"], u["outcome"]) for u in out["uploads"]] == [("aurora.pdf", "added")], out["uploads"]
    assert [s["title"] for s in out["sources"]] == ["aurora.pdf"]
    told = turn_text(llm.requests[-1])
    assert "4200 euros" in told and "[Attached aurora.pdf: added to this workspace's documents" in told
    shown = (await client.threads.get_state(thread_id))["values"]["messages"][0]["content"]
    assert shown[1]["mimeType"] == "application/pdf" and shown[1]["metadata"]["filename"] == "aurora.pdf", (
        "what the UI draws a PDF card from"
    )
    assert "data" not in shown[1]


async def test_agent_chat_uis_image_is_still_shown_after_later_turns_through_langgraph_dev(
    dev_server, llm, workspace
):
    client = get_client(url=dev_server)
    thread_id = (await client.threads.create())["thread_id"]
    context = {"workspace": workspace, "chat_mode": "chat"}
    image = chat_ui_image("cat.png", tiny_png())
    message = {"type": "human", "content": [{"type": "text", "text": "What is in this picture?"}, image]}
    llm.push(text_reply("I cannot see images."))
    out = await client.runs.wait(thread_id, "agent", input={"messages": [message]}, context=context)
    assert out["uploads"][0]["kept"] is True and out["uploads"][0]["reason"].startswith(TEXT_ONLY)
    assert f"[Attached cat.png: not added: {TEXT_ONLY}" in turn_text(llm.requests[-1])

    llm.push(text_reply("Still cannot."))
    later = {"type": "human", "content": [{"type": "text", "text": "Describe it anyway."}]}
    await client.runs.wait(thread_id, "agent", input={"messages": [later]}, context=context)
    history = llm.requests[-1]["messages"]
    assert any(f"[Attached cat.png: not added: {TEXT_ONLY}" in str(m["content"]) for m in history[:-1]), (
        "the earlier exchange still says why"
    )
    shown = (await client.threads.get_state(thread_id))["values"]["messages"][0]["content"]
    assert {k: v for k, v in shown[1].items() if k != "outcome"} == image, "after a reload the UI draws it"
