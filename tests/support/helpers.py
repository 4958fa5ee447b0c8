"""Small helpers shared by the tests."""

from __future__ import annotations

import math
import socket
from typing import Any

from workspace_agent.providers.scripted import tool_reply


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token(text: str, *alternatives: tuple[str, float]) -> dict[str, Any]:
    """A reply token as ``logprobs.content`` has it: its text, and alternatives with their probabilities."""
    top = [{"token": t, "logprob": math.log(p)} for t, p in alternatives]
    return {"token": text, "logprob": top[0]["logprob"] if top else 0.0, "top_logprobs": top}


def roles(request: dict[str, Any]) -> list[str]:
    """The roles of the messages of a recorded model request."""
    return [m["role"] for m in request["messages"]]


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
