"""The built-in tools: read-only ones that run without asking, and ones with a side effect that ask.

They are built per workspace so a tool can act for the right workspace and user without the model ever
choosing (or forging) them.
"""

from __future__ import annotations

import ast
import operator
from datetime import datetime
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from workspace_agent.checkpoints.chatlog import Records
from workspace_agent.skills.document_tools import document_tools

_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression element: {ast.dump(node)[:40]}")


def current_datetime() -> str:
    """Return the current local date and time (ISO 8601) and the weekday."""
    now = datetime.now().astimezone()
    return f"{now.isoformat(timespec='seconds')} ({now:%A})"


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses, e.g. "(3 + 4) * 2"."""
    return str(_evaluate(ast.parse(expression, mode="eval")))


def builtin_tools(workspace: str, user_id: str, records: Records) -> list[BaseTool]:
    """The built-in tools acting for one workspace and user."""

    async def save_note(text: str) -> str:
        """Save a note to this workspace's notes so it can be read later."""
        if not text.strip():
            raise ValueError("a note needs some text")
        note_id = await records.add_note(workspace, user_id, text)
        return f"Saved note {note_id}."

    return [
        StructuredTool.from_function(current_datetime),
        StructuredTool.from_function(calculate),
        StructuredTool.from_function(coroutine=save_note, name="save_note"),
        *document_tools(workspace),
    ]
