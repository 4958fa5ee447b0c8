"""Issue 19, finding 5: files over a message's caps are refused at the door, before the server stores them.

The server checkpoints a run's input before any node runs, so the ``ingest_uploads`` node dropping a
refused file's bytes left them in the thread's first checkpoint for good (six refused 19 MB files: 319 MB
of checkpoint rows). The auth handler sees the run's input first and refuses a message over the caps.
"""

from __future__ import annotations

import base64

import httpx
import pytest
from langgraph_sdk import get_client

from tests.support.helpers import user_message
from workspace_agent.server.policy import TooLarge, check_input


def text_file(name: str, size: int) -> dict:
    data = base64.b64encode(b"x" * size).decode()
    return {"type": "file", "mimeType": "text/plain", "data": data, "metadata": {"filename": name}}


async def test_a_message_over_the_file_cap_is_refused_and_nothing_of_it_is_stored(dev_server, workspace):
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    files = [text_file(f"f{i}.txt", 100) for i in range(11)]  # the default cap is 10
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.runs.wait(
            thread["thread_id"],
            "agent",
            input=user_message([{"type": "text", "text": "read these"}, *files]),
            context={"workspace": workspace},
        )
    assert refused.value.response.status_code == 413
    assert "UPLOAD_MAX_FILES" in refused.value.response.text
    assert await client.threads.get_history(thread["thread_id"]) == [], "no checkpoint holds the files"


def test_the_total_cap_counts_every_form_a_client_sends_bytes_in(monkeypatch):
    monkeypatch.setenv("UPLOAD_MAX_TOTAL_BYTES", "3000")
    chat_ui = text_file("a.txt", 2000)
    openai_part = {"type": "file", "file": {"filename": "b.txt", "file_data": chat_ui["data"]}}
    check_input(user_message([chat_ui]))  # within the cap
    with pytest.raises(TooLarge, match="UPLOAD_MAX_TOTAL_BYTES"):
        check_input(user_message([chat_ui, openai_part]))
    check_input({"messages": "not a list"})  # the graph's own validation answers malformed input
