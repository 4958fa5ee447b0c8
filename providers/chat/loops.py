"""Objects that belong to one event loop, and the one loop that sync callers run async code on.

A process may run several loops over its life (the CLI's commands, tests, the dev server's workers); a
client reused from a loop that has ended fails with "Event loop is closed". These caches are per loop.
``run_sync`` gives sync callers (``graph.invoke``) a persistent background loop, so their clients and
pools are kept from call to call like an async caller's.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
_caches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Any]] = (
    weakref.WeakKeyDictionary()
)


def loop_local(key: Hashable, factory: Callable[[], T]) -> T:
    """The running loop's object for ``key``, made by ``factory`` once; outside a loop, a fresh one."""
    try:
        cache = _caches.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:
        return factory()
    if key not in cache:
        cache[key] = factory()
    return cache[key]


_background: asyncio.AbstractEventLoop | None = None
_background_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """One event loop on a daemon thread, living as long as the process.

    Sync callers (``graph.invoke``) run the project's async code here instead of in a fresh loop per call:
    the loop-local clients and database pools it opens are then reused from call to call, as they are for
    async callers, and nothing pays for a loop's start and shutdown per node.
    """
    global _background
    with _background_lock:
        if _background is None or _background.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="workspace-agent-sync", daemon=True).start()
            _background = loop
        return _background


async def _in_context(work: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    return await asyncio.get_running_loop().create_task(work, context=context)


def run_sync(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the background loop and wait for its result, in the caller's context variables.

    The caller's context goes along (LangGraph keeps a node's config there, which ``interrupt()`` and
    streaming read), and whatever the coroutine raises — ``GraphInterrupt`` included — is raised here.
    """
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        work.close()
        raise RuntimeError("run_sync was called on the background loop itself: await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(_in_context(work, contextvars.copy_context()), loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
