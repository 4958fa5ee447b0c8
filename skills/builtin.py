"""The built-in tools: read-only ones that run without asking, and ones with a side effect that ask.

They are built per workspace so a tool can act for the right workspace and user without the model ever
choosing (or forging) them.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool

from ..checkpoints.chatlog import NoteKey, Records
from ..checkpoints.chunks import DocumentStore
from ..core.context import document_scope
from .calculator import calculate
from .document_tools import document_tools
from .workers import workers

__all__ = ["builtin_tools", "calculate", "current_datetime"]

#: A backstop for calls outside a turn; within one, ``tool_timeout`` stops the worker first.
WORKER_TIMEOUT = 60.0


def current_datetime() -> str:
    """Return the current local date and time (ISO 8601), the weekday and the date with its month by name."""
    now = datetime.now().astimezone()
    return f"{now.isoformat(timespec='seconds')} ({now:%A}, {now:%B} {now.day}, {now.year})"


async def calculate_in_worker(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses, e.g. "(3 + 4) * 2"."""
    async with asyncio.timeout(WORKER_TIMEOUT):
        return await workers.run(calculate, expression)


def builtin_tools(
    workspace: str, user_id: str, records: Records, documents: DocumentStore | None = None
) -> list[BaseTool]:
    """The built-in tools acting for one workspace and user, on the graph's own stores."""

    async def save_note(
        text: str, tool_call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig
    ) -> str:
        """Save a note to this workspace's notes so it can be read later."""
        if not text.strip():
            raise ValueError("a note needs some text")
        # Keyed by the thread and the call: run again after a crash (see execute_tool) it finds its note and
        # adds none, while another thread's call with the same id (ids repeat) saves its own. A clash raises
        # NoteConflict: a note that was not saved is never reported as saved.
        thread_id = (config.get("configurable") or {}).get("thread_id")
        key = NoteKey(str(thread_id or ""), tool_call_id)
        note_id = await records.add_note(workspace, user_id, text, key)
        return f"Saved note {note_id}."

    return [
        StructuredTool.from_function(current_datetime),
        # Bounded arithmetic, in a worker process all the same: tool_timeout can then stop it for real.
        StructuredTool.from_function(func=calculate, coroutine=calculate_in_worker, name="calculate"),
        StructuredTool.from_function(coroutine=save_note, name="save_note"),
        *document_tools(document_scope(user_id, workspace), documents),
    ]
