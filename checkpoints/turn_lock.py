"""One turn at a time per thread, for graphs run in-process on a PostgreSQL saver.

Two turns started at once on one thread both load the same checkpoint, both answer, and the last to write
wins; one person's approval card can then show the other turn's call. ``langgraph dev`` and Aegra prevent
this with their multitask strategies (``reject`` answers 409). A program, the CLI and other processes
sharing the database have no such server, so the graph itself refuses the second turn with
``ThreadBusy`` before any node runs.

The compiled graph takes the lock around its own ``stream`` and ``astream`` (``graphs.forks``), which
``invoke`` and ``ainvoke`` go through, and gives it back however the run ends. It is not a LangChain
callback: a callback handler on the graph makes every node and edge report its start and end to it, which
cost about 6 % of an in-memory turn. Across processes it is a PostgreSQL session advisory lock keyed by the
thread id, held on one connection per process and database; PostgreSQL releases it if the process dies, so
a crash leaves no stale lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, LiteralString

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended('workspace-agent turn ' || %s, 0))"
UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended('workspace-agent turn ' || %s, 0))"


class ThreadBusy(RuntimeError):
    """A turn was sent to a thread that is already running one."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread busy: {thread_id!r} is running another turn; send this one when it has finished "
            "(one turn at a time per thread)"
        )
        self.thread_id = thread_id


class _Locks:
    """The process's turn locks on one database: a set for this process, advisory locks for the others."""

    def __init__(self, conninfo: str | None) -> None:
        self.conninfo = conninfo
        self.running: set[str] = set()
        self.guard = threading.Lock()
        self.conn: psycopg.Connection | None = None

    def _execute(self, conninfo: str, sql: LiteralString, thread_id: str) -> bool:
        for attempt in (1, 2):  # a connection lost with a database restart is opened again once
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(conninfo, autocommit=True)
                row = self.conn.execute(sql, (thread_id,)).fetchone()
                assert row is not None, "a SELECT without FROM returns one row"
                return bool(row[0])
            except psycopg.OperationalError:
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def acquire(self, thread_id: str) -> None:
        with self.guard:
            if thread_id in self.running:
                raise ThreadBusy(thread_id)
            if self.conninfo is not None and not self._execute(self.conninfo, LOCK_SQL, thread_id):
                raise ThreadBusy(thread_id)
            self.running.add(thread_id)

    def release(self, thread_id: str) -> None:
        with self.guard:
            self.running.discard(thread_id)
            if self.conninfo is not None and self.conn is not None and not self.conn.closed:
                try:
                    self._execute(self.conninfo, UNLOCK_SQL, thread_id)
                except psycopg.Error:
                    self.conn = None  # a closed session has released its locks already


_LOCKS: dict[str | None, _Locks] = {}
_LOCKS_GUARD = threading.Lock()


def _locks_for(conninfo: str | None) -> _Locks:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(conninfo, _Locks(conninfo))


class TurnLock:
    """The turn lock of one database (or, for savers other than PostgreSQL, of this process alone)."""

    def __init__(self, conninfo: str | None) -> None:
        self.locks = _locks_for(conninfo)

    @contextmanager
    def held(self, config: RunnableConfig | None) -> Iterator[None]:
        """Hold the run's thread for the block, or refuse the run with ``ThreadBusy`` before it starts.

        Only a thread's own run is locked: a graph run as a subgraph (a checkpoint namespace) is inside
        its parent's turn already.
        """
        conf = (config or {}).get("configurable") or {}
        thread_id = conf.get("thread_id")
        if thread_id is None or conf.get("checkpoint_ns"):
            yield
            return
        self.locks.acquire(str(thread_id))
        try:
            yield
        finally:
            self.locks.release(str(thread_id))


def _conninfo(saver: Any) -> str | None:
    conn = getattr(saver, "conn", None)
    conninfo = getattr(conn, "conninfo", None)  # a pool
    if conninfo is None and conn is not None and hasattr(conn, "info"):
        from .embedded import database_url

        conninfo = database_url()  # a single connection does not show its password: the project's URL
    return conninfo


def turn_lock_for(saver: Any) -> TurnLock | None:
    """The turn lock for a graph holding ``saver``; ``None`` without one of its own.

    Without one (``langgraph dev`` and Aegra bring theirs) the server's multitask strategy decides.
    Savers other than PostgreSQL are checked within this process only.
    """
    if saver is None or isinstance(saver, bool):
        return None
    postgres = isinstance(saver, (AsyncPostgresSaver, PostgresSaver))
    return TurnLock(_conninfo(saver) if postgres else None)
