"""Memories when served: ``make serve`` schedules the memory graph on the server's cron, and two instances
polling the same cron never read one chat twice."""

from __future__ import annotations

import asyncio
import json
import re
import time

from langgraph_sdk import get_client

from workspace_agent.checkpoints.chatlog import Exchange, PostgresRecords
from workspace_agent.checkpoints.db import connection
from workspace_agent.nodes.memory.observe import OBSERVER_PROMPT
from workspace_agent.nodes.memory.reflect import REFLECTOR_PROMPT
from workspace_agent.providers.scripted import echo_rule, text_reply
from workspace_agent.server.memory_cron import JOB


def memory_rule(request: dict) -> dict:
    """Observer: one fact naming the batch's workspace and chats; reflector: store the facts it was given."""
    system, text = request["messages"][0]["content"], request["messages"][-1]["content"]
    if system == OBSERVER_PROMPT:
        chats = ",".join(re.findall(r"chat (\d+) prompt", text))
        fact = {"content": f"The user talked about {chats}", "confidence": "high"}
        return text_reply(json.dumps({"observations": [fact]}))
    if system == REFLECTOR_PROMPT:
        facts = re.findall(r"^- \((?:high|medium|low)\) (.+)$", text, re.M)
        return text_reply(
            json.dumps(
                {"memories": [{"action": "create", "scope": "workspace", "content": f} for f in facts]}
            )
        )
    return echo_rule(request)


async def seed(database_url: str, workspace: str, n: int) -> list[int]:
    records = PostgresRecords(database_url)
    ids = [
        await records.log_exchange(
            Exchange(
                workspace=workspace,
                user_id=f"u-{workspace}",
                thread_id="t1",
                prompt=f"{workspace} chat {i} prompt",
                response="ok",
                route="chat",
                stop_reason="answered",
            )
        )
        for i in range(n)
    ]
    async with connection(database_url) as conn:  # old and idle enough for the memory job's gates
        await conn.execute(
            "UPDATE chat_log SET created_at = now() - interval '1 hour' WHERE workspace = %s", (workspace,)
        )
    return ids


async def test_the_served_memory_job_marks_each_chat_once_across_two_instances(
    serve, llm, monkeypatch, database_url, workspace
):
    monkeypatch.setattr(llm, "rule", memory_rule)
    ids = await seed(database_url, workspace, 6)
    served = serve(instances=2, MEMORY_EXTRACTION_INTERVAL="2s")
    assert "memory extraction: " in served.out.read_text()
    crons = await get_client(url=served.urls[1]).crons.search(metadata=JOB)
    assert [c["schedule"] for c in crons] == ["*/2 * * * * *"]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        async with connection(database_url) as conn:
            marked = await (
                await conn.execute(
                    "SELECT count(*) AS n FROM chat_log"
                    " WHERE workspace = %s AND memory_processed_at IS NOT NULL",
                    (workspace,),
                )
            ).fetchone()
        if marked["n"] == len(ids):
            break
        await asyncio.sleep(0.5)
    assert marked["n"] == len(ids)
    await asyncio.sleep(6)  # three more firings, each polled by both instances

    read = [
        r
        for r in llm.requests
        if r["messages"][0]["content"] == OBSERVER_PROMPT and workspace in r["messages"][-1]["content"]
    ]
    assert len(read) == 1, "a chat was read by more than one run"
    async with connection(database_url) as conn:
        stored = await (
            await conn.execute("SELECT content FROM memories WHERE workspace = %s", (workspace,))
        ).fetchall()
    assert [m["content"] for m in stored] == ["The user talked about 0,1,2,3,4,5"]
