"""Checkpoint savers: PostgreSQL (the default, async and sync), SQLite (async and sync) and memory.

The PostgreSQL savers sit on a connection pool that checks each connection before handing it out, so a
long-lived process (the CLI's chat, the dev server) keeps working after the database restarts: the first
turn after it is back gets a fresh connection instead of "the connection is closed". The check costs a
round trip only for a connection that may be dead (``liveness``), the async saver writes each checkpoint
and each task's writes in one statement (``checkpoint_writes``), and on a pool neither saver takes
langgraph's saver-wide lock, so threads' checkpoints no longer queue behind each other in one process
(``bench/turn_cost.py`` measures all three).

``dev_checkpointer`` is what ``langgraph.json`` names, so threads run through ``langgraph dev`` persist in the
same PostgreSQL as the CLI's and programs' threads, and any of them can resume the others' interrupts. It
implements what the dev server asks of a custom checkpointer beyond the basics: ``adelete_for_runs``
(the ``rollback`` multitask strategy deletes a cancelled run's checkpoints), ``acopy_thread`` (thread copy
in three statements instead of one insert per checkpoint), and ``adelete_thread`` and ``aprune`` from
langgraph's saver.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import AsyncConnection, AsyncCursor, Connection, Cursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .checkpoint_writes import OneStatementWrites
from .embedded import database_url
from .liveness import check_async, check_sync

#: Connections one process's saver may hold: enough for the dev server's parallel runs, well within the
#: embedded server's 100 shared by every process.
POOL_SIZE = 10
DELTA_PAGE_ROWS = 256


def _page_delta_history(rows: int) -> None:
    """Read a delta channel's history in pages of ``rows`` checkpoints instead of langgraph's 1024.

    Reading ``messages`` (a delta channel) walks back from the checkpoint to the last full copy, one page
    of checkpoints at a time, and a page is fetched whole (each row also probes the blobs table). The full
    copy lies within ``MESSAGES_SNAPSHOT_EVERY`` updates, about 10 turns or some 110-220 checkpoints, yet
    once a thread passed 1024 checkpoints every read fetched 1024 rows: turn 500 took 1.94x turn 10
    (``bench/long_thread.py 500``; 1.03x with 256). The page size is a module constant of
    langgraph-checkpoint-postgres with no setting yet; a smaller page costs only one more round trip in
    the rare walk that goes further.
    """
    import langgraph.checkpoint.postgres as sync_module
    import langgraph.checkpoint.postgres.aio as async_module

    for module in (sync_module, async_module):
        if hasattr(module, "_DELTA_PAGE_SIZE"):
            module._DELTA_PAGE_SIZE = rows  # type: ignore[attr-defined]


_page_delta_history(DELTA_PAGE_ROWS)
# A run's checkpoints carry its id in their metadata (the server puts it there); their writes go with them.
_DELETE_RUNS = """
WITH gone AS (
    DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY(%s)
    RETURNING thread_id, checkpoint_ns, checkpoint_id
)
DELETE FROM checkpoint_writes w USING gone
WHERE w.thread_id = gone.thread_id AND w.checkpoint_ns = gone.checkpoint_ns
  AND w.checkpoint_id = gone.checkpoint_id
"""
# A thread's whole chain — checkpoints, channel values, pending writes — under another id, in one transaction.
_COPY_THREAD = (
    """INSERT INTO checkpoints
    SELECT %(target)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
        CASE WHEN metadata ? 'thread_id' THEN jsonb_set(metadata, '{thread_id}', to_jsonb(%(target)s::text))
             ELSE metadata END
    FROM checkpoints WHERE thread_id = %(source)s ON CONFLICT DO NOTHING""",
    """INSERT INTO checkpoint_blobs SELECT %(target)s, checkpoint_ns, channel, version, type, blob
    FROM checkpoint_blobs WHERE thread_id = %(source)s ON CONFLICT DO NOTHING""",
    """INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type,
        blob, task_path)
    SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path
    FROM checkpoint_writes WHERE thread_id = %(source)s ON CONFLICT DO NOTHING""",
)
_POOL_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


class ProjectPostgresSaver(OneStatementWrites):
    """langgraph's async PostgreSQL saver, plus deleting the checkpoints of given runs (rollback)."""

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        """A cursor on a connection of its own, without the saver-wide lock when the saver sits on a pool.

        langgraph's saver takes one lock around every query, which a single shared connection needs but a
        pool does not: each caller holds its own connection. With the lock, every thread's checkpoints queue
        behind each other's in one process, however many connections the pool has.
        """
        if self.pipe or not isinstance(self.conn, AsyncConnectionPool):
            async with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        async with self.conn.connection() as conn:
            if pipeline and self.supports_pipeline:
                async with conn.pipeline(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            elif pipeline:
                async with conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            else:
                async with conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur

    async def adelete_for_runs(self, run_ids: Iterable[str]) -> None:
        """Delete every checkpoint written by these runs, and their pending writes.

        The thread then reads as it was before the runs started: an approval a rolled-back run was waiting
        for is gone with its checkpoint, so nobody can resume it into running its tool.
        """
        ids = [str(r) for r in run_ids]
        if ids:
            async with self._cursor() as cur:
                await cur.execute(_DELETE_RUNS, (ids,))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's complete chain under a new id (the server's thread copy), in three statements."""
        ids = {"source": str(source_thread_id), "target": str(target_thread_id)}
        async with self._cursor() as cur, cur.connection.transaction():
            for statement in _COPY_THREAD:
                await cur.execute(statement, ids)


class ProjectSyncPostgresSaver(PostgresSaver):
    """langgraph's sync PostgreSQL saver with the same run deletion, for ``graph.invoke`` programs."""

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Cursor[DictRow]]:
        """A cursor without the saver-wide lock when the saver sits on a pool (see the async saver's)."""
        if self.pipe or not isinstance(self.conn, ConnectionPool):
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        with self.conn.connection() as conn:
            if pipeline and self.supports_pipeline:
                with conn.pipeline(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            elif pipeline:
                with conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            else:
                with conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur

    def delete_for_runs(self, run_ids: Iterable[str]) -> None:
        """Delete every checkpoint written by these runs, and their pending writes."""
        ids = [str(r) for r in run_ids]
        if ids:
            with self._cursor() as cur:
                cur.execute(_DELETE_RUNS, (ids,))


@asynccontextmanager
async def postgres_saver(url: str | None = None) -> AsyncIterator[ProjectPostgresSaver]:
    """An async PostgreSQL saver on a checked connection pool, its tables set up (``setup`` is idempotent)."""
    if not url:
        url = await asyncio.to_thread(database_url)  # may start the embedded server: not on the event loop
    async with AsyncConnectionPool(
        url,
        connection_class=AsyncConnection[DictRow],
        check=check_async,
        min_size=1,
        max_size=POOL_SIZE,
        kwargs=_POOL_KWARGS,
        open=False,
    ) as pool:
        await pool.wait(timeout=30)
        saver = ProjectPostgresSaver(pool)
        await saver.setup()
        yield saver


@contextmanager
def sync_postgres_saver(url: str | None = None) -> Iterator[ProjectSyncPostgresSaver]:
    """The sync PostgreSQL saver (``graph.invoke`` / ``stream``), on a checked pool, tables set up."""
    with ConnectionPool(
        url or database_url(),
        connection_class=Connection[DictRow],
        check=check_sync,
        min_size=1,
        max_size=POOL_SIZE,
        kwargs=_POOL_KWARGS,
        open=False,
    ) as pool:
        pool.wait(timeout=30)
        saver = ProjectSyncPostgresSaver(pool)
        saver.setup()
        yield saver


@asynccontextmanager
async def sqlite_saver(path: str) -> AsyncIterator[BaseCheckpointSaver]:
    """An async SQLite saver, for single-process use without PostgreSQL."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        yield saver


@contextmanager
def sync_sqlite_saver(path: str) -> Iterator[BaseCheckpointSaver]:
    """The sync SQLite saver, for ``graph.invoke`` programs without PostgreSQL."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
        yield saver


def memory_saver() -> InMemorySaver:
    """A saver in process memory: tests and benchmarks only."""
    return InMemorySaver()


@asynccontextmanager
async def dev_checkpointer() -> AsyncIterator[ProjectPostgresSaver]:
    """The saver ``langgraph dev`` loads through ``langgraph.json``."""
    async with postgres_saver() as saver:
        yield saver
