"""Memories (M1, M2): the memory graph against the real PostgreSQL and the scripted OpenAI-compatible server.

The scripted model answers the observer with one fact naming the batch's first chat, and the reflector by
creating what it was given, so every stored memory can be traced back to the batch it came from.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.support.helpers import decisions_of, turn_text, user_message
from workspace_agent.checkpoints.chatlog import Exchange, PostgresRecords
from workspace_agent.checkpoints.db import connection
from workspace_agent.checkpoints.memories import GLOBAL_LIMIT, WORKSPACE_LIMIT, PostgresMemories
from workspace_agent.cli.memories import report_table
from workspace_agent.core.context import Context
from workspace_agent.core.prompts import OBSERVER_PROMPT, REFLECTOR_PROMPT
from workspace_agent.graphs.agent import build_graph as build_agent
from workspace_agent.graphs.memory import MemoryContext, build_graph
from workspace_agent.samples.scripted_model import echo_rule, text_reply

ROOT = Path(__file__).resolve().parents[2]


# --- helpers -----------------------------------------------------------------------------------------


def user_of(workspace: str) -> str:
    """Each test's own user, so global memories (shared by a user's workspaces) never leak between tests."""
    return f"u-{workspace}"


async def seed(
    database_url: str, workspace: str, n: int, *, minutes_ago: float = 60, newest_minutes: float = 0
):
    """Log ``n`` chats, oldest first, then backdate them: the newest ``newest_minutes`` old (if given)."""
    records = PostgresRecords(database_url)
    ids = [
        await records.log_exchange(
            Exchange(
                workspace=workspace,
                user_id=user_of(workspace),
                thread_id="t1",
                prompt=f"chat {i} prompt: I like the colour c{i}x",
                response=f"chat {i} response: noted c{i}y",
                route="chat",
                stop_reason="answered",
            )
        )
        for i in range(n)
    ]
    async with connection(database_url) as conn:
        await conn.execute(
            "UPDATE chat_log SET created_at = now() - %s * interval '1 minute'"
            " - (%s - id) * interval '1 second' WHERE workspace = %s",
            (minutes_ago, ids[-1], workspace),
        )
        if newest_minutes:
            await conn.execute(
                "UPDATE chat_log SET created_at = now() - %s * interval '1 minute' WHERE id = %s",
                (newest_minutes, ids[-1]),
            )
    return ids


async def marks(database_url: str, workspace: str) -> dict[int, Any]:
    """``memory_processed_at`` of every chat of the workspace, by id."""
    async with connection(database_url) as conn:
        cur = await conn.execute(
            "SELECT id, memory_processed_at FROM chat_log WHERE workspace = %s ORDER BY id", (workspace,)
        )
        return {r["id"]: r["memory_processed_at"] for r in await cur.fetchall()}


async def stored(database_url: str, workspace: str) -> list[dict]:
    async with connection(database_url) as conn:
        cur = await conn.execute(
            "SELECT scope, content FROM memories WHERE workspace = %s OR (workspace IS NULL AND user_id = %s)"
            " ORDER BY id",
            (workspace, user_of(workspace)),
        )
        return list(await cur.fetchall())


def observer_requests(llm) -> list[str]:
    return [
        r["messages"][-1]["content"] for r in llm.requests if r["messages"][0]["content"] == OBSERVER_PROMPT
    ]


def memory_rule(
    fail: Callable[[str], dict | None] = lambda text: None, *, global_: int = 0, workspace: int = 0
) -> Callable[[dict], dict]:
    """The scripted observer and reflector; ``fail(observer_text)`` may return an error reply instead."""

    def rule(request: dict) -> dict:
        system, text = request["messages"][0]["content"], request["messages"][-1]["content"]
        if system == OBSERVER_PROMPT:
            failure = fail(text)
            if failure is not None:
                return failure
            first = re.search(r"chat (\d+) prompt", text).group(1)  # type: ignore[union-attr]
            fact = {"content": f"The user discussed chat {first} first", "confidence": "high"}
            return text_reply(json.dumps({"observations": [fact]}))
        if system == REFLECTOR_PROMPT:
            facts = re.findall(r"^- \((?:high|medium|low)\) (.+)$", text, re.M)
            proposals = [
                {"action": "create", "scope": "workspace", "content": f"The user grows {w} in the garden"}
                for w in PLANTS[:workspace]
            ]
            proposals += [{"action": "create", "scope": "workspace", "content": f} for f in facts]
            proposals += [
                {"action": "create", "scope": "global", "content": f"global fact {k}"} for k in range(global_)
            ]
            return text_reply("```json\n" + json.dumps({"memories": proposals}) + "\n```")
        return echo_rule(request)

    return rule


PLANTS = (
    "apple banana cherry damson elder fig grape hazel iris juniper kiwi lemon mango nutmeg olive peach"
    " quince raisin sage thyme umber vanilla walnut yam zest"
).split()


async def run(database_url: str, workspace: str, **settings: Any) -> dict:
    graph = build_graph(memories=PostgresMemories(database_url))
    return await graph.ainvoke({}, context=MemoryContext(workspace=workspace, **settings))


def batches(out: dict) -> list[dict]:
    return [r for r in out["report"] if r["batch"] is not None]


# --- M1: which chats become memories -----------------------------------------------------------------


async def test_every_chat_is_read_in_batches_then_marked_exactly_once(
    llm, database_url, workspace, monkeypatch
):
    ids = await seed(database_url, workspace, 45)
    monkeypatch.setattr(llm, "rule", memory_rule())
    out = await run(database_url, workspace)

    rows = batches(out)
    assert [(r["read"], r["stored"], r["marked"], r["error"]) for r in rows] == [
        (20, 1, 20, None),
        (20, 1, 20, None),
        (5, 1, 5, None),
    ]
    read_ids = [i for r in rows for i in r["chat_ids"]]
    assert read_ids == ids  # every chat, oldest first, each once
    sent = "\n".join(observer_requests(llm))
    assert len(observer_requests(llm)) == 3
    for i in range(45):  # the model saw every chat, prompt and answer
        assert f"chat {i} prompt: I like the colour c{i}x" in sent and f"noted c{i}y" in sent
    first = await marks(database_url, workspace)
    assert all(first[i] is not None for i in ids)
    assert [m["content"] for m in await stored(database_url, workspace)] == [
        "The user discussed chat 0 first",
        "The user discussed chat 20 first",
        "The user discussed chat 40 first",
    ]

    llm.reset()
    again = await run(database_url, workspace)
    assert again["report"] == [] and llm.requests == []  # nothing left: nothing read twice
    assert await marks(database_url, workspace) == first  # and nothing marked twice


async def test_a_model_error_leaves_its_batch_and_the_rest_for_the_next_run(
    llm, database_url, workspace, monkeypatch
):
    ids = await seed(database_url, workspace, 45)
    failing = True
    monkeypatch.setattr(
        llm,
        "rule",
        memory_rule(lambda text: {"status": 500} if failing and "chat 20 prompt" in text else None),
    )
    out = await run(database_url, workspace)

    rows = batches(out)
    assert [(r["batch"], r["read"], r["marked"]) for r in rows] == [(1, 20, 20), (2, 20, 0)]
    assert rows[0]["error"] is None
    assert rows[1]["error"].startswith("observer:") and "Error code: 500" in rows[1]["error"]
    assert rows[1]["chat_ids"] == ids[20:40]
    state = await marks(database_url, workspace)
    assert [i for i in ids if state[i]] == ids[:20]  # batch 1 marked; batches 2 and 3 not
    why = [d["why"] for d in decisions_of(out, "M1") if d["outcome"] == {"batch": 2, "marked": 0}]
    assert why and "Error code: 500" in why[0]

    failing = False
    llm.reset()
    after = await run(database_url, workspace)
    assert [(r["read"], r["marked"], r["error"]) for r in batches(after)] == [(20, 20, None), (5, 5, None)]
    assert [i for r in batches(after) for i in r["chat_ids"]] == ids[20:]
    assert all((await marks(database_url, workspace)).values())


@pytest.mark.parametrize(
    ("step", "answer", "expected"),
    [
        ("observer", "Sure! {observations: [the user likes tea]}", "invalid JSON"),
        ("observer", '{"observations": [{"content": "x", "confidence": "certain"}]}', "confidence"),
        ("observer", "I found nothing worth remembering.", "no JSON object"),
        (
            "reflector",
            '{"memories": [{"action": "update", "scope": "workspace", "content": "y"}]}',
            "update_id",
        ),
    ],
)
async def test_a_malformed_answer_leaves_the_batch_unmarked_and_says_why(
    llm, database_url, workspace, monkeypatch, step, answer, expected
):
    ids = await seed(database_url, workspace, 5)
    base = memory_rule()
    prompt = OBSERVER_PROMPT if step == "observer" else REFLECTOR_PROMPT
    monkeypatch.setattr(
        llm, "rule", lambda r: text_reply(answer) if r["messages"][0]["content"] == prompt else base(r)
    )
    out = await run(database_url, workspace)

    [row] = batches(out)
    assert (row["read"], row["stored"], row["marked"]) == (5, 0, 0)
    assert row["error"].startswith(f"{step}: MalformedAnswer") and expected in row["error"]
    assert not any((await marks(database_url, workspace)).values())
    assert await stored(database_url, workspace) == []
    assert set(ids) == set(row["chat_ids"])


async def test_no_model_configured_reads_nothing_into_memories_and_marks_nothing(
    llm, database_url, workspace
):
    await seed(database_url, workspace, 6)
    out = await run(database_url, workspace, model="")
    [row] = batches(out)
    assert row["marked"] == 0 and "no model configured" in row["error"]
    assert llm.requests == [] and not any((await marks(database_url, workspace)).values())


@pytest.mark.parametrize(
    ("n", "newest_minutes", "reason"),
    [(4, 0, "only 4 unprocessed chat(s); 5 needed"), (5, 5, "still active: newest chat 5.0 min old")],
)
async def test_a_gated_group_is_left_untouched(
    llm, database_url, workspace, monkeypatch, n, newest_minutes, reason
):
    await seed(database_url, workspace, n, newest_minutes=newest_minutes)
    monkeypatch.setattr(llm, "rule", memory_rule())
    out = await run(database_url, workspace)

    [row] = out["report"]
    assert row["batch"] is None and row["read"] == 0 and row["skipped"].startswith(reason)
    assert llm.requests == []  # nothing read
    assert not any((await marks(database_url, workspace)).values())  # nothing marked


async def test_killed_mid_run_no_chat_is_marked_whose_memories_were_not_stored(
    llm, database_url, workspace, monkeypatch
):
    ids = await seed(database_url, workspace, 45)
    # Batch 2's observer call hangs, so the process is surely inside batch 2 when it is killed.
    monkeypatch.setattr(
        llm,
        "rule",
        memory_rule(lambda text: {**text_reply("{}"), "delay": 5} if "chat 20 prompt" in text else None),
    )
    script = textwrap.dedent(
        f"""
        import asyncio
        from workspace_agent.graphs.memory import MemoryContext, build_graph
        asyncio.run(build_graph().ainvoke({{}}, context=MemoryContext(workspace={workspace!r})))
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=os.environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not any("chat 20 prompt" in t for t in observer_requests(llm)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        await asyncio.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    state = await marks(database_url, workspace)
    assert [i for i in ids if state[i]] == ids[:20]
    assert [m["content"] for m in await stored(database_url, workspace)] == [
        "The user discussed chat 0 first"
    ]

    monkeypatch.setattr(llm, "rule", memory_rule())
    out = await run(database_url, workspace)  # the next run picks up where the killed one stood
    assert [i for r in batches(out) for i in r["chat_ids"]] == ids[20:]
    assert all((await marks(database_url, workspace)).values())


async def test_memories_disabled_in_a_workspace_are_neither_used_nor_extracted(
    llm, saver, database_url, workspace, thread, monkeypatch
):
    await seed(database_url, workspace, 5)
    agent = build_agent(checkpointer=saver)
    context = Context(workspace=workspace, user_id=user_of(workspace), chat_mode="chat")
    off = Context(workspace=workspace, user_id=user_of(workspace), chat_mode="chat", memories_enabled=False)
    out = await agent.ainvoke(user_message("hello"), thread, context=off)
    assert decisions_of(out, "M2")[0]["outcome"] == 0
    monkeypatch.setattr(llm, "rule", memory_rule())
    llm.reset()
    skipped = await run(database_url, workspace)
    assert "memories are disabled" in skipped["report"][0]["skipped"] and llm.requests == []

    await agent.ainvoke(user_message("hello again"), thread, context=context)
    done = await run(database_url, workspace, idle_minutes=0)
    assert sum(r["marked"] for r in batches(done)) == 7  # five seeded and the two turns


# --- M2: memories in the next turn, and the limits ---------------------------------------------------


async def test_memories_reach_the_next_turn_within_the_limits(
    llm, saver, database_url, workspace, thread, monkeypatch
):
    await seed(database_url, workspace, 5)
    monkeypatch.setattr(llm, "rule", memory_rule(global_=GLOBAL_LIMIT + 3, workspace=WORKSPACE_LIMIT + 5))
    out = await run(database_url, workspace)
    [row] = batches(out)
    # 25 garden facts and the observed one for the workspace, 8 global ones: 20 + 5 kept, the rest dropped.
    assert (row["stored"], row["marked"]) == (GLOBAL_LIMIT + WORKSPACE_LIMIT, 5)
    assert row["dropped"].count("global memories full (5)") == 3
    assert row["dropped"].count("workspace memories full (20)") == 6
    kept = await PostgresMemories(database_url).known(user_of(workspace), workspace)
    assert sum(m.scope == "global" for m in kept) == GLOBAL_LIMIT
    assert sum(m.scope == "workspace" for m in kept) == WORKSPACE_LIMIT
    console = Console(file=io.StringIO(), width=240)
    console.print(report_table(out["report"]))
    assert "workspace memories full (20)" in console.file.getvalue()  # type: ignore[attr-defined]

    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    llm.reset()
    turn = await build_agent(checkpointer=saver).ainvoke(
        user_message("Any advice on my thyme, olive, fig, kiwi and cherry?"),
        thread,
        context=Context(workspace=workspace, user_id=user_of(workspace), chat_mode="chat"),
    )
    system = turn_text(llm.requests[0])
    remembered = system.split("Things I remember about you:\n", 1)[1].splitlines()
    workspace_lines = [line for line in remembered if "grows" in line]
    assert sorted(workspace_lines) == sorted(
        f"- The user grows {w} in the garden" for w in ["cherry", "fig", "kiwi", "olive", "thyme"]
    )
    assert sum(line.startswith("- global fact") for line in remembered) == GLOBAL_LIMIT
    assert decisions_of(turn, "M2")[0]["outcome"] == {"global": GLOBAL_LIMIT, "workspace": 5}
    assert llm.embedding_requests  # the real embeddings client path

    # Without a reachable embedding model the five newest are used, and the decision says why.
    monkeypatch.setenv("EMBEDDING_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("EMBEDDING_MODEL", "unreachable-embed")
    llm.reset()
    turn = await build_agent(checkpointer=saver).ainvoke(
        user_message("thyme?"),
        thread,
        context=Context(workspace=workspace, user_id=user_of(workspace), chat_mode="chat"),
    )
    system = turn_text(llm.requests[0])
    assert [line for line in system.splitlines() if "grows" in line] == [
        f"- The user grows {w} in the garden" for w in reversed(PLANTS[15:20])
    ]
    assert "no embedding model available" in decisions_of(turn, "M2")[0]["why"]


async def test_the_memory_graph_runs_under_the_dev_server(
    llm, dev_server, database_url, workspace, monkeypatch
):
    from langgraph_sdk import get_client

    ids = await seed(database_url, workspace, 6)
    monkeypatch.setattr(llm, "rule", memory_rule())
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], "memory", input={}, context={"workspace": workspace})
    rows = [r for r in out["report"] if r["batch"] is not None]
    assert [(r["read"], r["marked"], r["error"]) for r in rows] == [(6, 6, None)]
    assert all(v is not None for v in (await marks(database_url, workspace)).values())
    assert len(await marks(database_url, workspace)) == len(ids)
    assert [m["content"] for m in await stored(database_url, workspace)] == [
        "The user discussed chat 0 first"
    ]
