"""One turn at a time per thread, for graphs run in-process on a PostgreSQL saver.

Two turns started at once on one thread both load the same checkpoint, both answer, and the last to write
wins; one person's approval card can then show the other turn's call. ``langgraph dev`` and Aegra prevent
this with their multitask strategies (``reject`` answers 409). A program, the CLI and other processes
sharing the database have no such server, so the graph itself refuses the second turn with
``ThreadBusy`` before any node runs.

The check is a LangChain callback on the graph's own run (``on_chain_start`` with ``raise_error``), so it
wraps ``invoke``, ``ainvoke``, ``stream`` and ``astream`` alike and ends with the run however it ends. Across
processes it is a PostgreSQL session advisory lock keyed by the thread id, held on one connection per
process and database; PostgreSQL releases it if the process dies, so a crash leaves no stale lock.
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

import psycopg
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph.state import CompiledStateGraph

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

    def _execute(self, sql: str, thread_id: str) -> bool:
        for attempt in (1, 2):  # a connection lost with a database restart is opened again once
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.conninfo, autocommit=True)
                return bool(self.conn.execute(sql, (thread_id,)).fetchone()[0])
            except psycopg.OperationalError:
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def acquire(self, thread_id: str) -> None:
        with self.guard:
            if thread_id in self.running:
                raise ThreadBusy(thread_id)
            if self.conninfo is not None and not self._execute(LOCK_SQL, thread_id):
                raise ThreadBusy(thread_id)
            self.running.add(thread_id)

    def release(self, thread_id: str) -> None:
        with self.guard:
            self.running.discard(thread_id)
            if self.conninfo is not None and self.conn is not None and not self.conn.closed:
                try:
                    self._execute(UNLOCK_SQL, thread_id)
                except psycopg.Error:
                    self.conn = None  # a closed session has released its locks already


_LOCKS: dict[str | None, _Locks] = {}
_LOCKS_GUARD = threading.Lock()


def _locks_for(conninfo: str | None) -> _Locks:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(conninfo, _Locks(conninfo))


class TurnLock(BaseCallbackHandler):
    """Refuses a graph run on a thread that has one running; releases the thread when the run ends."""

    raise_error = True
    run_inline = True

    def __init__(self, graph_name: str, conninfo: str | None) -> None:
        self.graph_name = graph_name
        self.locks = _locks_for(conninfo)
        self.held: dict[UUID, str] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """The graph's own run (not its nodes'): take the thread or refuse the turn."""
        thread_id = (metadata or {}).get("thread_id")
        if kwargs.get("name") != self.graph_name or thread_id is None:
            return
        self.locks.acquire(str(thread_id))
        self.held[run_id] = str(thread_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """The run answered or stopped at an interrupt: the thread takes the next turn."""
        if run_id in self.held:
            self.locks.release(self.held.pop(run_id))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """The run failed or was cancelled: the thread takes the next turn."""
        self.on_chain_end(None, run_id=run_id)


def _conninfo(saver: Any) -> str | None:
    conn = getattr(saver, "conn", None)
    conninfo = getattr(conn, "conninfo", None)  # a pool
    if conninfo is None and conn is not None and hasattr(conn, "info"):
        from workspace_agent.checkpoints.embedded import database_url

        conninfo = database_url()  # a single connection does not show its password: the project's URL
    return conninfo


def one_turn_at_a_time(graph: CompiledStateGraph) -> CompiledStateGraph:
    """The graph with its turns serialised per thread, when it holds its own checkpointer.

    Without one (``langgraph dev`` and Aegra bring theirs) the server's multitask strategy decides.
    Savers other than PostgreSQL are checked within this process only.
    """
    saver = graph.checkpointer
    if saver is None or isinstance(saver, bool):
        return graph
    postgres = isinstance(saver, (AsyncPostgresSaver, PostgresSaver))
    lock = TurnLock(graph.get_name(), _conninfo(saver) if postgres else None)
    return graph.with_config(callbacks=[lock])
