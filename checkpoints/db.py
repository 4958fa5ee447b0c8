"""Connections to the project's PostgreSQL and idempotent schema setup.

Psycopg's async pool is bound to the event loop that opened it, and one process may run several loops over
its life (tests, the CLI, the dev server's workers), so there is one pool per running loop.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Iterable
from contextlib import asynccontextmanager
from typing import ClassVar, LiteralString, TypeAlias, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from .embedded import database_url, embedded_started
from .liveness import check_async

#: A connection of the project's pools: autocommit, its rows dicts by column name.
DictConnection: TypeAlias = AsyncConnection[DictRow]
DictPool: TypeAlias = AsyncConnectionPool[DictConnection]

_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Future[DictPool]]] = (
    weakref.WeakKeyDictionary()
)
_ready: set[tuple[str, str]] = set()
T = TypeVar("T")


#: The project's pool per event loop, unless ``WORKSPACE_AGENT_POOL_SIZE`` says less (the launcher gives its
#: folder watcher a small one: ``server/pools.py`` budgets every connection of a served deployment).
POOL_SIZE_ENV, DEFAULT_POOL_SIZE = "WORKSPACE_AGENT_POOL_SIZE", 8


def pool_size() -> int:
    """The most connections this process's pool may hold, per event loop."""
    raw = os.environ.get(POOL_SIZE_ENV, "").strip()
    if not raw:
        return DEFAULT_POOL_SIZE
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{POOL_SIZE_ENV} must be a positive whole number of connections, got {raw!r}")
    return int(raw)


async def _open(url: str) -> DictPool:
    # ``check`` hands out only live connections: after the database restarts, the next query reconnects
    # instead of failing with "the connection is closed" (a round trip only for one that may be dead).
    new = AsyncConnectionPool(
        url,
        connection_class=DictConnection,
        min_size=1,
        max_size=pool_size(),
        open=False,
        kwargs={"autocommit": True, "row_factory": dict_row},
        check=check_async,
    )
    await new.open(wait=True, timeout=30)
    return new


async def resolve_url(url: str | None = None) -> str:
    """The database URL; a thread hop only while the embedded server may still need starting."""
    if url:
        return url
    if os.environ.get("DATABASE_URL") or embedded_started():
        return database_url()  # no I/O: the variable, or the embedded server's URL found before
    return await asyncio.to_thread(database_url)


async def close_pools() -> None:
    """Close this event loop's pools: a program about to end its loop calls this to exit cleanly."""
    for opening in (_pools.pop(asyncio.get_running_loop(), None) or {}).values():
        if opening.done() and not opening.exception():
            await opening.result().close()


def run(work: Awaitable[T]) -> T:
    """``asyncio.run`` for commands: the loop's pools are closed before the loop ends.

    A pool left open while it grows a connection can keep ``asyncio.run`` from finishing its shutdown.
    """

    async def closing() -> T:
        try:
            return await work
        finally:
            await close_pools()

    return asyncio.run(closing())


async def pool(url: str | None = None) -> DictPool:
    """The pool of this event loop for ``url`` (default: the project database).

    Concurrent first callers (parallel nodes) share one opening task, so no pool is opened twice and lost.
    """
    url = await resolve_url(url)
    per_loop = _pools.setdefault(asyncio.get_running_loop(), {})
    opening = per_loop.get(url)
    if opening is None:
        opening = per_loop[url] = asyncio.ensure_future(_open(url))
    try:
        return await asyncio.shield(opening)
    except Exception:
        if per_loop.get(url) is opening:
            del per_loop[url]
        raise


class Tables:
    """A store over one part's tables, made on its first use (``ensure_schema``).

    Subclasses name the part and its idempotent DDL; ``_url`` is the database, its tables ready.
    """

    part: ClassVar[str]
    schema: ClassVar[Iterable[LiteralString]]

    def __init__(self, url: str | None = None) -> None:
        self.url = url

    async def _url(self) -> str:
        url = await resolve_url(self.url)
        await ensure_schema(self.part, self.schema, url)
        return url


@asynccontextmanager
async def connection(url: str | None = None) -> AsyncIterator[DictConnection]:
    """A pooled autocommit connection returning rows as dicts."""
    async with (await pool(url)).connection() as conn:
        yield conn


async def ensure_schema(name: str, statements: Iterable[LiteralString], url: str | None = None) -> None:
    """Run a part's DDL once per process and database; every statement must be idempotent and a constant."""
    url = await resolve_url(url)
    if (url, name) in _ready:
        return
    async with connection(url) as conn, conn.transaction():
        # One lock for every part: two parts may both create the vector extension on a fresh database.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('workspace-agent schema'))")
        for statement in statements:
            await conn.execute(statement)
    _ready.add((url, name))
