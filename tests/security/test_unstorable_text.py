"""Issue 13 item 9: text PostgreSQL cannot hold is refused in ``route``, before the model is called.

A NUL character used to fail the turn in ``finish`` with a raw ``DataError`` after the model had answered
(and tools may have run); a lone surrogate gave a raw ``UnicodeEncodeError``. Both are now a clear error
naming the problem, nothing runs, nothing is logged, and the thread goes on.
"""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from tests.support.helpers import user_message
from workspace_agent.checkpoints import chatlog
from workspace_agent.checkpoints.db import connection, ensure_schema
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.nodes.route import InvalidMessage
from workspace_agent.samples.scripted_model import text_reply

CASES = [("before\x00after", "NUL character"), ("before\ud800after", r"lone surrogate \(U\+D800\)")]


async def logged(database_url: str, workspace: str) -> int:
    await ensure_schema("chat_log", chatlog.SCHEMA, database_url)
    async with connection(database_url) as conn:
        cur = await conn.execute("SELECT count(*) AS n FROM chat_log WHERE workspace = %s", (workspace,))
        return (await cur.fetchone())["n"]


@pytest.mark.parametrize(("text", "named"), CASES)
async def test_refused_in_route_before_the_model_and_the_thread_goes_on(
    llm, saver, database_url, workspace, thread, text, named
):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace)
    llm.push(text_reply("should never be used"))
    with pytest.raises(InvalidMessage, match=named):
        await graph.ainvoke(user_message(f"@agent save a note: {text}"), thread, context=context)
    assert llm.requests == [], "the model was not called"
    assert await logged(database_url, workspace) == 0
    llm.reset()
    llm.push(text_reply("fine"))
    out = await graph.ainvoke(user_message("plain words"), thread, context=Context(workspace=workspace))
    assert out["messages"][-1].content == "fine"
    assert [m["content"] for m in llm.requests[0]["messages"][1:]] == ["plain words"]
    assert await logged(database_url, workspace) == 1


@pytest.mark.parametrize(
    ("where", "blocks"),
    [
        ("text block", [{"type": "text", "text": "a\x00b"}]),
        (
            "file name",
            [
                {"type": "text", "text": "read this"},
                {
                    "type": "file",
                    "source_type": "base64",
                    "mime_type": "text/plain",
                    "data": "aGk=",
                    "metadata": {"filename": "x\ud800.txt"},
                },
            ],
        ),
    ],
)
async def test_content_blocks_are_checked_too(llm, saver, workspace, thread, where, blocks):
    graph = build_graph(checkpointer=saver)
    with pytest.raises(InvalidMessage, match=r"cannot be stored|not valid text"):
        await graph.ainvoke(user_message(blocks), thread, context=Context(workspace=workspace))
    assert llm.requests == []


async def test_through_the_sdk_the_run_fails_with_the_clear_message(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread_id = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(
        thread_id, "agent", input=user_message("a\x00b"), context={"workspace": workspace}, raise_error=False
    )
    assert "NUL character" in str(out)
    assert not any(workspace in str(r) for r in llm.requests), "the model was not called for this run"
    llm.push(text_reply("still here"))
    out = await client.runs.wait(
        thread_id, "agent", input=user_message("hello"), context={"workspace": workspace, "chat_mode": "chat"}
    )
    assert out["messages"][-1]["content"] == "still here"
