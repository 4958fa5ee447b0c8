"""A turn run in a separate process, and a crash in the middle of its tool calls.

Shared by the tests of resuming after SIGKILL (integration) and of the honest trace it leaves (security).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.tools import recorded
from workspace_agent.samples.scripted_model import tool_reply

ROOT = Path(__file__).resolve().parents[2]


def run_turn(thread: dict, context: dict, record: Path, *args: str) -> list[str]:
    """The command that runs or resumes a turn in a separate process (tests/support/run_turn.py)."""
    return [
        sys.executable,
        "-m",
        "tests.support.run_turn",
        "--thread",
        thread["configurable"]["thread_id"],
        "--context",
        json.dumps(context),
        "--record",
        str(record),
        *args,
    ]


async def crash_mid_tools(llm: Any, thread: dict, context: dict, record: Path) -> list[str]:
    """Start a turn whose model calls three slow tools; SIGKILL it once two have finished. Returns the ids."""
    reply = tool_reply(
        ("slow", {"seconds": 0.1, "label": "a"}),
        ("slow", {"seconds": 0.3, "label": "b"}),
        ("slow", {"seconds": 30, "label": "c"}),
    )
    llm.push(reply)
    proc = subprocess.Popen(
        run_turn(thread, context, record, "--message", "go"),
        cwd=ROOT,
        env=os.environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while len(recorded(record)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the two quick tools never finished"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # the finished tasks' writes reach the checkpointer
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return [c["id"] for c in reply["tool_calls"]]
