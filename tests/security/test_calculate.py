"""Issue 13 item 6: no tool freezes the process.

``calculate("(((9**99)**99)**99)**99")`` used to hold the interpreter lock for minutes, so no timeout fired
and every other coroutine and thread of the server stalled. The work is now priced before it is done, and
the tool runs in a worker process that a timeout (``tool_timeout``) really stops.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.support.helpers import decisions_of, user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.builtin import builtin_tools
from workspace_agent.skills.calculator import CalculationRefused, calculate
from workspace_agent.skills.workers import Workers

BOMB = "(((9**99)**99)**99)**99"


def spin(pid_file: str) -> None:
    """Pure-Python work that never ends and never awaits (imported by name in the worker)."""
    Path(pid_file).write_text(str(os.getpid()))
    n = 0
    while True:
        n += 1


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped between the open and the read
        return False
    return state not in ("Z", "X")


async def ticking(stop: asyncio.Event) -> int:
    ticks = 0
    while not stop.is_set():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (BOMB, "intermediate result"),
        ("9**99**99", "intermediate result"),
        ("(10**3000) * (10**3000)", "intermediate result"),
        ("1+" * 600 + "1", "characters"),
        ("-" * 50 + "1", "nested"),
        ("__import__('os')", "unsupported"),
        ("round(10**3000, -1000000)", "places"),  # a function a model writes, bounded like the operators
        ("sqrt(10**3000)", "too large"),
        ("max(*[9**99])", "unsupported"),
    ],
)
def test_unbounded_work_is_refused_before_it_is_done(expression, reason):
    started = time.perf_counter()
    with pytest.raises(CalculationRefused, match=reason):
        calculate(expression)
    assert time.perf_counter() - started < 2  # refused on reading; done, the work would not end
    assert calculate("2 ** 64 * 3 - 1") == str(2**64 * 3 - 1) and calculate("(9**99) % 7") == str(9**99 % 7)


async def test_the_tool_answers_the_bomb_with_an_error_fast_while_others_keep_running():
    [tool] = [t for t in builtin_tools("ws", "u", records=None) if t.name == "calculate"]  # type: ignore[arg-type]
    assert await tool.ainvoke({"expression": "6*7"}) == "42"  # the worker is warm
    stop = asyncio.Event()
    other = asyncio.create_task(ticking(stop))
    started = time.perf_counter()
    with pytest.raises(CalculationRefused, match="intermediate result"):
        await tool.ainvoke({"expression": BOMB})
    elapsed = time.perf_counter() - started
    await asyncio.sleep(0.2)
    stop.set()
    assert elapsed < 2, elapsed
    assert await other >= 5, "the event loop kept serving other coroutines"


async def test_a_cpu_bound_call_is_stopped_by_its_timeout_and_the_loop_never_stalls(tmp_path):
    workers = Workers()
    pid_file = tmp_path / "pid"
    running = asyncio.create_task(workers.run(spin, str(pid_file)))
    deadline = time.monotonic() + 60  # a cold worker imports this module first
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and not running.done()
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    stop = asyncio.Event()
    other = asyncio.create_task(ticking(stop))
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(running, timeout=1.0)
    assert time.perf_counter() - started < 2
    stop.set()
    assert await other >= 30, "other coroutines ran while the worker spun"
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not alive(pid), "the timed-out computation was stopped, not left running"
    assert await workers.run(calculate, "1+1") == "2", "a fresh worker serves the next call"
    workers.close()


async def test_the_bomb_in_a_turn_is_an_error_tool_message_and_the_turn_goes_on(
    llm, saver, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("calculate", {"expression": BOMB})), text_reply("too big"))
    started = time.perf_counter()
    # the person's own expression: a calculation from figures nobody gave is not run at all (G3)
    out = await graph.ainvoke(
        user_message(f"@agent compute {BOMB}"), thread, context=Context(workspace=workspace)
    )
    assert time.perf_counter() - started < 20
    assert out["stop_reason"] == "answered"
    [ran] = decisions_of(out, "C10")[1:]
    assert list(ran["outcome"].values()) == ["error"]
    answer = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    assert "intermediate result" in answer["content"]


async def test_calculate_runs_in_a_worker_under_the_dev_server(llm, dev_server, workspace):
    """The served process starts its workers too (forkserver under ``langgraph dev``)."""
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    thread = await client.threads.create()
    llm.push(tool_reply(("calculate", {"expression": "6*7"}), ("calculate", {"expression": BOMB})))
    llm.push(text_reply("42, and the other is too big"))
    out = await client.runs.wait(
        thread["thread_id"],
        "agent",
        input=user_message(f"@agent compute 6*7 and {BOMB}"),
        context={"workspace": workspace},
    )
    assert out["stop_reason"] == "answered"
    answers = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert answers[0] == "42" and "intermediate result" in answers[1]
