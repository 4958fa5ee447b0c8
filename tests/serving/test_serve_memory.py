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
from workspace_agent.core.prompts import OBSERVER_PROMPT, REFLECTOR_PROMPT
from workspace_agent.samples.scripted_model import echo_rule, text_reply
from workspace_agent.server.auth import SERVICE
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


async def seed(database_url: str, workspace: str, n: int, user: str | None = None) -> list[int]:
    records = PostgresRecords(database_url)
    ids = [
        await records.log_exchange(
            Exchange(
                workspace=workspace,
                user_id=user or f"u-{workspace}",
                thread_id="t1",
                prompt=f"{workspace} {user or ''} chat {i} prompt",
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


async def quiet_crons(database_url: str) -> None:
    """Disable the crons earlier tests of the session left, so only the launcher under test's can fire."""
    async with connection(database_url) as conn:
        if (await (await conn.execute("SELECT to_regclass('crons') AS t")).fetchone())["t"]:
            await conn.execute("UPDATE crons SET enabled = false")


async def marked_by_user(database_url: str, workspace: str) -> dict[str, int]:
    """How many of a workspace's chats are marked processed, per user."""
    async with connection(database_url) as conn:
        rows = await (
            await conn.execute(
                "SELECT user_id, count(memory_processed_at) AS n FROM chat_log WHERE workspace = %s"
                " GROUP BY user_id",
                (workspace,),
            )
        ).fetchall()
    return {r["user_id"]: r["n"] for r in rows}


async def test_the_served_memory_job_marks_each_chat_once_across_two_instances(
    serve, llm, monkeypatch, database_url, workspace
):
    monkeypatch.setattr(llm, "rule", memory_rule)
    ids = await seed(database_url, workspace, 6)
    served = serve(instances=2, MEMORY_EXTRACTION_INTERVAL="2s")
    assert "memory extraction: " in served.out.read_text()
    crons = await get_client(url=served.urls[1]).crons.search(metadata=JOB)
    assert [c["schedule"] for c in crons] == ["*/2 * * * * *"]

    every, deadline = {f"u-{workspace}": len(ids)}, time.monotonic() + 60
    while time.monotonic() < deadline and await marked_by_user(database_url, workspace) != every:
        await asyncio.sleep(0.5)
    assert await marked_by_user(database_url, workspace) == every
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


async def test_with_api_keys_the_served_cron_covers_every_users_chats(
    serve, llm, monkeypatch, database_url, workspace
):
    """The launcher schedules as the deployment's service identity, not as a user (no user key given)."""
    monkeypatch.setattr(llm, "rule", memory_rule)
    await seed(database_url, workspace, 5, user="alice")
    await seed(database_url, workspace, 5, user="bob")
    await quiet_crons(database_url)
    served = serve(WORKSPACE_AGENT_API_KEYS="k-alice:alice,k-bob:bob", MEMORY_EXTRACTION_INTERVAL="2s")
    try:
        assert "memory extraction: created" in served.out.read_text(), served.logs()
        both, deadline = {"alice": 5, "bob": 5}, time.monotonic() + 60
        while time.monotonic() < deadline and await marked_by_user(database_url, workspace) != both:
            await asyncio.sleep(0.5)
        assert await marked_by_user(database_url, workspace) == both, served.logs()
        async with connection(database_url) as conn:
            owners = await (await conn.execute("SELECT user_id FROM crons WHERE enabled")).fetchall()
        assert [o["user_id"] for o in owners] == [SERVICE], "the service identity's cron did it"
        alice = get_client(url=served.urls[0], api_key="k-alice")
        assert await alice.crons.search(metadata=JOB) == [], "the service's cron is no user's to see"
    finally:
        async with connection(database_url) as conn:  # later launchers of the session start without it
            await conn.execute("DELETE FROM crons WHERE user_id = %s", (SERVICE,))
    async with connection(database_url) as conn:
        stored = await (
            await conn.execute("SELECT user_id, content FROM memories WHERE workspace = %s", (workspace,))
        ).fetchall()
    assert {m["user_id"] for m in stored} == {"alice", "bob"}, "each chat's memories are its own user's"
