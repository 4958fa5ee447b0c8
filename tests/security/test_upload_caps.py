"""Issue 19, findings 5 and 10: caps per message, refused bytes not kept, unnamed and wrapped uploads.

Before, 300 files in one message were all added and nothing capped their total; every unnamed upload was
stored as "the attached file", replacing the one before; and base64 wrapped over lines, as mail clients and
some SDKs send it, was refused as invalid.
"""

from __future__ import annotations

import base64
import json

from tests.security.test_upload_bombs import embed, upload
from tests.support.helpers import decisions_of
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply

__all__ = ["embed"]  # the fixture, used by name


def text_file(name: str | None, text: str, *, wrap: int = 0) -> dict:
    """A text file block as Agent Chat UI sends it; ``wrap`` breaks its base64 into lines of that length."""
    data = base64.b64encode(text.encode()).decode()
    if wrap:
        data = "\r\n".join(data[i : i + wrap] for i in range(0, len(data), wrap)) + "\n"
    block = {"type": "file", "source_type": "base64", "mime_type": "text/plain", "data": data}
    return block | ({"metadata": {"filename": name}} if name else {})


async def stored_message(saver, thread: dict) -> list:
    state = await build_graph(checkpointer=saver).aget_state(thread)
    return next(m for m in state.values["messages"] if m.type == "human").content


async def test_files_past_the_per_message_cap_are_refused_naming_the_setting(
    embed, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("UPLOAD_MAX_FILES", "3")
    embed.push(text_reply("ok"))
    files = [text_file(f"note{i}.txt", f"Note number {i} about the harbour ferry.") for i in range(30)]
    out = await upload(saver, workspace, thread, *files)
    outcomes = [u["outcome"] for u in out["uploads"]]
    assert outcomes == ["added"] * 3 + ["refused"] * 27, outcomes
    reason = out["uploads"][3]["reason"]
    assert "carries 30 files" in reason and "at most 3" in reason and "UPLOAD_MAX_FILES" in reason
    assert len(decisions_of(out, "I2")) == 30
    assert await DocumentStore().get_document(workspace, "chat-upload:note3.txt") is None
    assert all("data" not in b for b in await stored_message(saver, thread)), "no bytes kept"


async def test_a_file_over_the_message_total_is_refused_and_smaller_ones_still_fit(
    embed, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("UPLOAD_MAX_TOTAL_BYTES", "5000")
    embed.push(text_reply("ok"))
    first, big, small = "ferry " * 500, "lighthouse " * 400, "The kiln fires at dawn."  # 3000, 4400, 23
    files = [text_file("a.txt", first), text_file("b.txt", big), text_file("c.txt", small)]
    out = await upload(saver, workspace, thread, *files)
    assert [u["outcome"] for u in out["uploads"]] == ["added", "refused", "added"]
    reason = out["uploads"][1]["reason"]
    assert "7400 bytes" in reason and "5000 bytes" in reason and "UPLOAD_MAX_TOTAL_BYTES" in reason


async def test_refused_bytes_do_not_stay_in_the_thread(embed, saver, workspace, thread, monkeypatch):
    """Six refused files of 400 kB: neither the thread's state nor its latest checkpoint keeps them."""
    monkeypatch.setenv("UPLOAD_MAX_BYTES", "100000")
    embed.push(text_reply("ok"))
    files = [text_file(f"big{i}.txt", f"{i} " + "x" * 400_000) for i in range(6)]
    out = await upload(saver, workspace, thread, *files)
    assert [u["outcome"] for u in out["uploads"]] == ["refused"] * 6
    stored = await stored_message(saver, thread)
    assert [b.get("metadata", {}).get("filename") for b in stored[1:]] == [f"big{i}.txt" for i in range(6)]
    assert all(not ({"data", "base64", "file"} & set(b)) for b in stored[1:]), stored
    latest = await build_graph(checkpointer=saver).aget_state(thread)
    assert len(json.dumps([m.content for m in latest.values["messages"]], default=str)) < 20_000


async def test_unnamed_uploads_each_keep_their_own_document(embed, saver, workspace, thread):
    embed.push(text_reply("ok"), text_reply("ok"))
    out = await upload(saver, workspace, thread, text_file(None, "The ferry leaves at nine."))
    first = out["uploads"][0]["name"]
    assert first.startswith("upload-") and first.endswith(".txt"), first
    out = await upload(saver, workspace, thread, text_file(None, "The museum opens at ten."))
    second = out["uploads"][0]["name"]
    assert second != first and out["uploads"][0]["outcome"] == "added"
    store = DocumentStore()
    assert await store.get_document(workspace, f"chat-upload:{first}") is not None, "not replaced"
    assert await store.get_document(workspace, f"chat-upload:{second}") is not None


async def test_base64_wrapped_over_lines_is_read_and_real_garbage_is_still_refused(
    embed, saver, workspace, thread
):
    embed.push(text_reply("ok"))
    text = "The glacier hike starts at the blue hut, " * 20
    garbage = {**text_file("bad.txt", "x"), "data": "not*base64!!"}
    out = await upload(saver, workspace, thread, text_file("wrapped.txt", text, wrap=76), garbage)
    assert [u["outcome"] for u in out["uploads"]] == ["added", "refused"], out["uploads"]
    assert "not valid base64" in out["uploads"][1]["reason"]
    assert out["sources"][0]["title"] == "wrapped.txt" and "blue hut" in out["sources"][0]["text"]
