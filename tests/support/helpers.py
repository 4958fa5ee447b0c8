"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import math
import random
import socket
import time
from pathlib import Path
from typing import Any

from workspace_agent.samples.scripted_model import tool_reply


def _ephemeral_low() -> int:
    """The first port the kernel hands out on its own (outgoing connections, ``bind(0)``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(count: int = 1) -> int:
    """The first of ``count`` consecutive loopback ports nothing is bound to right now.

    They are drawn below the kernel's ephemeral range: a port taken from that range is free when checked
    but may be given to an outgoing connection (to PostgreSQL, Redis, the model) before the server that
    was meant to take it binds it, which is how a served instance once failed to start in CI.
    """
    low, high = 10000, _ephemeral_low() - count
    for _ in range(100):
        first = random.randrange(low, high)
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError(f"no {count} free consecutive loopback ports in {low}-{high}")


def token(text: str, *alternatives: tuple[str, float]) -> dict[str, Any]:
    """A reply token as ``logprobs.content`` has it: its text, and alternatives with their probabilities."""
    top = [{"token": t, "logprob": math.log(p)} for t, p in alternatives]
    return {"token": text, "logprob": top[0]["logprob"] if top else 0.0, "top_logprobs": top}


def roles(request: dict[str, Any]) -> list[str]:
    """The roles of the messages of a recorded model request."""
    return [m["role"] for m in request["messages"]]


def turn_text(request: dict[str, Any]) -> str:
    """The last user message of a chat request: the turn's text with its memories and document context."""
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def decisions_of(state: dict[str, Any], decision_id: str) -> list[dict[str, Any]]:
    """The decision records of one id in a turn's output."""
    return [d for d in state.get("decisions", []) if d["id"] == decision_id]


def user_message(text: Any) -> dict[str, Any]:
    """A turn's input in the shape clients send."""
    return {"messages": [{"role": "user", "content": text}]}


def three_calls() -> dict[str, Any]:
    """A model reply asking for three calls of the test tool ``repeat``."""
    return tool_reply(
        ("repeat", {"word": "x", "times": 1}),
        ("repeat", {"word": "y", "times": 1}),
        ("repeat", {"word": "z", "times": 1}),
    )


def approve_edit_reject(ids: list[str]) -> dict[str, Any]:
    """Decisions keyed by id and out of order; the edit sends a number as a string, like a web form."""
    return {
        "decisions": [
            {"type": "reject", "tool_call_id": ids[2], "message": "not z"},
            {
                "type": "edit",
                "tool_call_id": ids[1],
                "edited_action": {"name": "repeat", "args": {"word": "w", "times": "3"}},
            },
            {"type": "approve", "tool_call_id": ids[0]},
        ]
    }


async def until_settled(
    url: str, api_key: str, metadata: dict[str, Any], limit: float = 60, *, gone: bool = False
) -> None:
    """Wait until no thread of the caller's with ``metadata`` is busy: its runs ended, finished or cancelled.

    What a test of "nothing was written" waits for, instead of a fixed sleep: a run that was not cancelled
    keeps its thread busy until it has written. With ``gone``, until no such thread is left at all (a
    stateless run's thread is deleted once its run has ended).
    """
    from langgraph_sdk import get_client

    client = get_client(url=url, api_key=api_key)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = await client.threads.search(metadata=metadata, limit=100)
        if not found or (not gone and all(t["status"] != "busy" for t in found)):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"a thread with {metadata} was still {'there' if gone else 'busy'} after {limit} s")
