"""Small helpers shared by the tests."""

from __future__ import annotations

from typing import Any


def roles(request: dict[str, Any]) -> list[str]:
    """The roles of the messages of a recorded model request."""
    return [m["role"] for m in request["messages"]]


def decisions_of(state: dict[str, Any], decision_id: str) -> list[dict[str, Any]]:
    """The decision records of one id in a turn's output."""
    return [d for d in state.get("decisions", []) if d["id"] == decision_id]


def user_message(text: Any) -> dict[str, Any]:
    """A turn's input in the shape clients send."""
    return {"messages": [{"role": "user", "content": text}]}
