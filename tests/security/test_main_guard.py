"""Issue 19 item 4: a program without a ``__main__`` guard runs its top level once.

A program written at top level, as the README's examples read without their last lines, whose turn used
``calculate`` ran its top level 11 times: the tool's workers were started by ``multiprocessing``
(forkserver or spawn), which imports the parent's main module in every worker, so each worker ran the
program's own turn again — ten chat-log rows for one turn, and the real ``calculate`` timed out. In the
cascade the embedded PostgreSQL's record of the processes holding it, ``.handle_pids.json``, was once left
empty, and every later process of that data folder failed on it with a JSON error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.calculator import calculate
from workspace_agent.skills.workers import Workers

#: Catches a hang only: a cold program imports the project and starts a worker on a busy 2-core machine.
PROGRAM_TIMEOUT = 300

PROGRAM = """\
import asyncio
import json
import os
from pathlib import Path

with Path(os.environ["TOP_LEVEL_LOG"]).open("a") as log:
    log.write(f"{os.getpid()}\\n")

from workspace_agent.checkpoints.savers import sync_postgres_saver
from workspace_agent.graphs.agent import build_graph
from workspace_agent.core.context import Context

with sync_postgres_saver() as saver:
    graph = build_graph(checkpointer=saver)
    config = {"configurable": {"thread_id": os.environ["THREAD_ID"]}}
    out = graph.invoke(
        {"messages": [{"role": "user", "content": "@agent What is 6 * 7?"}]},
        config,
        context=Context(workspace=os.environ["WORKSPACE"]),
    )
    print(json.dumps({"answer": out["messages"][-1].content, "stop_reason": out["stop_reason"]}))
"""


def run_program(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a program file with the project's Python, from its own folder, as a user would."""
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROGRAM_TIMEOUT,
    )


def chat_log_rows(url: str, thread_id: str) -> int:
    """How many exchanges the chat log holds for a thread."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM chat_log WHERE thread_id = %s", (thread_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_program_without_a_main_guard_runs_its_top_level_once(llm, database_url, workspace, tmp_path):
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    top_level_log = tmp_path / "top-level.log"
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    llm.push(tool_reply(("calculate", {"expression": "6 * 7"})), text_reply("It is 42."))
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TOP_LEVEL_LOG": str(top_level_log),
        "THREAD_ID": thread_id,
        "WORKSPACE": workspace,
    }
    done = run_program(program, env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(top_level_log.read_text().splitlines()) == 1, top_level_log.read_text()
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"answer": "It is 42.", "stop_reason": "answered"}
    assert len(llm.requests) == 2, "one turn: the call, then the answer"
    [answer] = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert answer["content"] == "42", "calculate ran in its worker and its result went back to the model"
    assert chat_log_rows(database_url, thread_id) == 1


CONNECT = """\
import psycopg

from workspace_agent.checkpoints.embedded import database_url

with psycopg.connect(database_url()) as conn:
    print(conn.execute("SELECT 40 + 2").fetchone()[0])
"""


@pytest.mark.parametrize("content", ["", "[12, 3", "{not json", "null", '{"pids": 1}', "\x00\x00"])
def test_a_broken_handle_record_does_not_stop_the_next_process(database_url, home, tmp_path, content):
    pgdata = Path(home) / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        pytest.skip("DATABASE_URL names an outside server: there is no embedded one to check")
    record = pgdata / ".handle_pids.json"
    record.write_text(content)
    program = tmp_path / "connect.py"
    program.write_text(CONNECT)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["WORKSPACE_AGENT_HOME"] = home
    done = run_program(program, env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.split() == ["42"]
    holders = json.loads(record.read_text())
    assert isinstance(holders, list) and all(isinstance(pid, int) for pid in holders)
    assert not [p.name for p in pgdata.iterdir() if p.name.startswith(".handle_pids") and p != record]


def allocate(size: int) -> int:
    """Take ``size`` bytes at once (imported by name in the worker)."""
    return len(bytearray(size))


async def test_a_worker_cannot_take_more_memory_than_its_bound(monkeypatch):
    monkeypatch.setenv("TOOL_WORKER_MEMORY_MB", "300")
    workers = Workers()
    try:
        assert await workers.run(allocate, 10 * 2**20) == 10 * 2**20
        with pytest.raises(MemoryError):
            await asyncio.wait_for(workers.run(allocate, 400 * 2**20), timeout=PROGRAM_TIMEOUT)
        assert await workers.run(calculate, "6*7") == "42", "a fresh worker serves the next call"
    finally:
        workers.close()
