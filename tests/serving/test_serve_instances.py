"""Two instances sharing Redis: any instance streams any run, a kill -9 mid-run is recovered by the other,
and a burst of turns with approvals loses nothing."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time

import pytest
from langgraph_sdk import get_client

from tests.serving.conftest import FAST_LEASES
from tests.support.helpers import free_port
from workspace_agent.checkpoints.db import connection


def turn(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
def pair(serve, approvals):
    """Two instances, a crashed one left down, leases short enough for a test."""
    served = serve(instances=2, SERVE_RESTART="0", **FAST_LEASES)
    return served, [get_client(url=u) for u in served.urls]


async def claimed_pid(database_url: str, run_id: str, timeout: float = 20) -> int:
    """The pid of the instance executing a run (Aegra's lease names ``<host>-<pid>-worker-<n>``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with connection(database_url) as conn:
            row = await (
                await conn.execute("SELECT status, claimed_by FROM runs WHERE run_id = %s", (run_id,))
            ).fetchone()
        found = re.search(r"-(\d+)-worker-\d+$", (row or {}).get("claimed_by") or "")
        if row and row["status"] == "running" and found:
            return int(found.group(1))
        await asyncio.sleep(0.2)
    raise AssertionError(f"run {run_id} was never claimed: {row}")


async def test_a_run_created_on_one_instance_is_streamed_from_the_other(pair, workspace):
    _, (first, second) = pair
    thread = await first.threads.create()
    run = await first.runs.create(
        thread["thread_id"], "agent", input=turn("slow hello"), context={"workspace": workspace}
    )
    events, pieces = [], []
    async for part in second.runs.join_stream(thread["thread_id"], run["run_id"], stream_mode="values"):
        events.append(part.event)
        if part.event == "values" and part.data.get("messages"):
            pieces.append(part.data["messages"][-1]["content"])
    assert "values" in events and pieces[-1] == "answered slow hello"
    assert (await first.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"


async def test_kill_9_mid_run_the_other_instance_finishes_it_and_other_approvals_stay(
    pair, database_url, workspace
):
    served, pair = pair
    first, second = pair
    waiting = await first.threads.create()
    await first.runs.wait(
        waiting["thread_id"], "agent", input=turn("note beta"), context={"workspace": workspace}
    )
    before = await first.threads.get_state(waiting["thread_id"])
    assert before["next"] == ["approve"]

    thread = await first.threads.create()
    run = await first.runs.create(
        thread["thread_id"], "agent", input=turn("slow gamma"), context={"workspace": workspace}
    )
    victim = await claimed_pid(database_url, run["run_id"])
    assert victim in served.instance_pids(), victim  # never anything but one of our instances
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 90
    status = None
    while time.monotonic() < deadline:
        for client in pair:
            try:
                status = (await client.runs.get(thread["thread_id"], run["run_id"]))["status"]
                break
            except Exception:  # the killed instance no longer answers
                continue
        if status in ("success", "error"):
            break
        await asyncio.sleep(0.5)
    assert status == "success"
    survivor = first if await _alive(first) else second
    assert not await _alive(second if survivor is first else first)
    state = await survivor.threads.get_state(thread["thread_id"])
    assert state["values"]["messages"][-1]["content"] == "answered slow gamma"
    assert state["values"]["stop_reason"] == "answered"

    after = await survivor.threads.get_state(waiting["thread_id"])
    assert after["next"] == ["approve"]
    assert after["tasks"][0]["interrupts"] == before["tasks"][0]["interrupts"]
    out = await survivor.runs.wait(
        waiting["thread_id"],
        "agent",
        command={"resume": {"decisions": [{"type": "approve"}]}},
        context={"workspace": workspace},
    )
    assert out["messages"][-1]["content"].startswith("done: Saved note")


async def _alive(client) -> bool:
    try:
        await client.http.get("/health")
        return True
    except Exception:
        return False


async def test_a_burst_of_turns_with_approvals_loses_nothing(pair, database_url, workspace):
    _, pair = pair
    n = 10

    async def one(i: int) -> str:
        client = pair[i % 2]
        resumer = pair[(i + 1) % 2]  # the approval is answered through the other instance
        thread = await client.threads.create()
        tid = thread["thread_id"]
        await client.runs.wait(tid, "agent", input=turn(f"note n{i}"), context={"workspace": workspace})
        state = await resumer.threads.get_state(tid)
        assert state["next"] == ["approve"], state
        out = await resumer.runs.wait(
            tid,
            "agent",
            command={"resume": {"decisions": [{"type": "approve"}]}},
            context={"workspace": workspace},
        )
        assert [d["outcome"] for d in out["decisions"] if d["id"] == "D3"] == [
            {state["tasks"][0]["interrupts"][0]["value"]["action_requests"][0]["tool_call_id"]: "approve"}
        ]
        assert not (await client.threads.get_state(tid))["next"]
        return tid

    threads = await asyncio.gather(*(one(i) for i in range(n)))
    async with connection(database_url) as conn:
        rows = await (
            await conn.execute("SELECT thread_id, prompt FROM chat_log WHERE workspace = %s", (workspace,))
        ).fetchall()
        notes = await (
            await conn.execute("SELECT text FROM notes WHERE workspace = %s", (workspace,))
        ).fetchall()
    assert sorted((r["thread_id"], r["prompt"]) for r in rows) == sorted(
        (t, f"note n{i}") for i, t in enumerate(threads)
    )
    assert sorted(note["text"] for note in notes) == sorted(f"note n{i}" for i in range(n))


def test_a_busy_port_stops_the_launcher_with_the_reason_and_nothing_left_running(serve):
    port = free_port(2)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port + 1))
        squatter.listen()
        served = serve(instances=2, port=port, ready=False)
        code, out = served.run_to_failure()
    assert code == 1
    assert re.search(r"error: instance 1 exited with \d+: .*address already in use", out), out
    assert "ready:" not in out
    with socket.socket() as s:  # instance 0 was stopped with the launcher: nothing listens on its port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # its closed connections may linger
        s.bind(("127.0.0.1", port))
        s.listen()
