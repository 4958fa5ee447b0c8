"""Checkpoint savers: PostgreSQL (the default), SQLite and memory.

``dev_checkpointer`` is what ``langgraph.json`` names, so threads run through ``langgraph dev`` persist in the
same PostgreSQL as the CLI's and programs' threads, and any of them can resume the others' interrupts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from workspace_agent.checkpoints.embedded import database_url


@asynccontextmanager
async def postgres_saver(url: str | None = None) -> AsyncIterator[AsyncPostgresSaver]:
    """An async PostgreSQL saver with its tables set up (``setup`` is idempotent)."""
    url = url or await asyncio.to_thread(database_url)  # may start the embedded server: not on the event loop
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        yield saver


@asynccontextmanager
async def sqlite_saver(path: str) -> AsyncIterator[BaseCheckpointSaver]:
    """An async SQLite saver, for single-process use without PostgreSQL."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        yield saver


def memory_saver() -> InMemorySaver:
    """A saver in process memory: tests and benchmarks only."""
    return InMemorySaver()


@asynccontextmanager
async def dev_checkpointer() -> AsyncIterator[AsyncPostgresSaver]:
    """The saver ``langgraph dev`` loads through ``langgraph.json``."""
    async with postgres_saver() as saver:
        yield saver
