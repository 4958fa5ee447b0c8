"""A pool's connection check that costs no round trip while the connection shows no sign of trouble.

psycopg's ``check_connection`` sends an empty query every time a connection leaves the pool: one extra round
trip for every checkpoint read and write, about half of a turn's checkpoint I/O. A connection the server has
ended (a restart, a shutdown, a crash, an idle timeout) is not silent: the server sends its FATAL message
and closes the socket, so the socket has something to read. An idle connection's socket has nothing to
read otherwise. So a connection that is open, idle and has nothing waiting is handed out as it is, and
any other goes through the full check, which the pool answers by replacing a dead connection.
"""

from __future__ import annotations

import select
from typing import Any

from psycopg import pq
from psycopg_pool import AsyncConnectionPool, ConnectionPool


def _quiet(conn: Any) -> bool:
    """Open, idle, and nothing from the server waiting on its socket (a closing server always leaves some)."""
    pgconn = conn.pgconn
    if conn.closed or pgconn.status != pq.ConnStatus.OK:
        return False
    if pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError):  # a closed descriptor, or one beyond select's range: check in full
        return False
    return not readable


async def check_async(conn: Any) -> None:
    """``check`` for an ``AsyncConnectionPool``: the full check only when the connection may be dead."""
    if not _quiet(conn):
        await AsyncConnectionPool.check_connection(conn)


def check_sync(conn: Any) -> None:
    """``check`` for a ``ConnectionPool``: the full check only when the connection may be dead."""
    if not _quiet(conn):
        ConnectionPool.check_connection(conn)
