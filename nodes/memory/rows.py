"""The rows of a memory run's report, built alike by every node that ends a batch or leaves a group alone.

Not a node: the nodes of this package import it (and ``answers``) and never each other.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END

from ...core.state import GroupState, Report, decision

#: LangGraph's ``END`` as the literal that route functions' ``Literal`` types name (langgraph types it str).
DONE: Literal["__end__"] = "__end__"
assert DONE == END


def skipped_row(group: dict[str, Any], reason: str) -> Report:
    """A report row for a group the gates left alone: nothing read, nothing marked, and why."""
    return {
        "user_id": group["user_id"],
        "workspace": group["workspace"],
        "batch": None,
        "chat_ids": [],
        "read": 0,
        "stored": 0,
        "marked": 0,
        "dropped": [],
        "skipped": reason,
        "error": None,
    }


def batch_row(state: GroupState, **values: Any) -> Report:
    """A report row for the current batch of a group."""
    group, batch = state["group"], state.get("batch") or []
    row: Report = {
        "user_id": group["user_id"],
        "workspace": group["workspace"],
        "batch": state.get("batch_no", 0),
        "chat_ids": [c["id"] for c in batch],
        "read": len(batch),
        "stored": 0,
        "marked": 0,
        "dropped": [],
        "skipped": None,
        "error": None,
    }
    row.update(values)  # type: ignore[typeddict-item]
    return row


def batch_failed(state: GroupState, error: str) -> dict[str, Any]:
    """The update of a step that failed: the batch stays unmarked and the run reports why."""
    return {
        "error": error,
        "report": [batch_row(state, error=error)],
        "decisions": [decision("M1", "code", {"batch": state.get("batch_no", 0), "marked": 0}, error)],
    }
