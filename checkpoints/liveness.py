"""A pool's connection check that costs no round trip while the connection shows no sign of trouble.

psycopg's ``check_connection`` sends an empty query every time a connection leaves the pool: one extra round
trip for every checkpoint read and write, about half of a turn's checkpoint I/O. A connection the server has
ended (a restart, a shutdown, a crash, an idle timeout) is not silent: the server sends its FATAL message
and closes the socket, so the socket has something to read. An idle connection's socket has nothing to
read otherwise. So a connection that is open, idle and has nothing waiting is handed out as it is, and
any other goes through the full check, which the pool answers by replacing a dead connection.

A pool that tried to connect while the database was down retries with a doubling delay (1, 2, 4, 8, 16 s…):
after a 20-second restart its next attempt could come 15 s after the database is back, and every turn waits
for it until the client's timeout. ``RECONNECT_MAX_DELAY`` caps that delay, so a pool is serving again
within about two seconds of the database returning.
"""

from __future__ import annotations

import select
from typing import Any

from psycopg import pq
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

#: Longest wait, in seconds, between two of a pool's attempts to reconnect to a database that went away.
RECONNECT_MAX_DELAY = 2.0


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


def _cap_reconnect_delay(limit: float) -> None:
    """Cap psycopg_pool's reconnect backoff (a class of the pinned psycopg-pool, with no setting for it).

    Every pool in the process is affected, the serving engine's too: one connection attempt every two
    seconds while a database is away costs nothing, and all of them come back promptly.
    """
    original = AttemptWithBackoff.update_delay
    if getattr(original, "capped_at", None) is not None:
        return

    def update_delay(self: AttemptWithBackoff, now: float) -> None:
        original(self, now)
        self.delay = min(self.delay, limit)

    update_delay.capped_at = limit  # type: ignore[attr-defined]
    AttemptWithBackoff.update_delay = update_delay  # type: ignore[method-assign]


_cap_reconnect_delay(RECONNECT_MAX_DELAY)
