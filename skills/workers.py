"""CPU-bound tool work in worker processes, so that ``tool_timeout`` really stops it.

A coroutine can be cancelled only when it awaits; pure-Python computation in the server's process never
does, and holds the interpreter lock so every other thread stalls with it. Such work runs here in a
separate process instead: the event loop waits on a future, a timeout or cancellation (``execute_tool``'s
``tool_timeout``) terminates that one worker, and a fresh one takes its place on the next call.

Workers come from ``forkserver`` (``spawn`` where unavailable): never forked from a process that holds
database pools, model sessions and their threads. Each is a ``multiprocessing.Pool`` of one process, kept
warm for reuse and replaced when it had to be stopped. The functions given must be importable by name.
"""

from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import threading
from collections.abc import Callable
from multiprocessing.pool import Pool
from typing import Any, TypeVar

T = TypeVar("T")

#: Idle workers kept warm; more may run at once, the extra ones are closed when they finish.
KEEP_IDLE = 2


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class Workers:
    """A few warm single-process pools; a call that runs too long takes its worker down with it."""

    def __init__(self, keep_idle: int = KEEP_IDLE) -> None:
        """Start nothing yet: the first call starts a worker (a fraction of a second), later ones reuse it."""
        self._idle: list[Pool] = []
        self._lock = threading.Lock()
        self._keep_idle = keep_idle

    def _take(self) -> Pool:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _context().Pool(processes=1)

    def _give_back(self, pool: Pool) -> None:
        with self._lock:
            if len(self._idle) < self._keep_idle:
                self._idle.append(pool)
                return
        pool.close()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker process; when the awaiting task is cancelled, the worker is terminated.

        Bound it with ``asyncio.timeout`` or ``asyncio.wait_for`` (as ``execute_tool`` does with
        ``tool_timeout``): the timeout cancels this await, and the cancellation stops the computation.

        Raises:
            Exception: Whatever ``fn`` raised, re-raised here.
        """
        loop = asyncio.get_running_loop()
        pool = await asyncio.to_thread(self._take)
        done: asyncio.Future[T] = loop.create_future()
        pool.apply_async(
            fn,
            args,
            callback=lambda value: loop.call_soon_threadsafe(_settle, done, value, None),
            error_callback=lambda error: loop.call_soon_threadsafe(_settle, done, None, error),
        )
        try:
            value = await done
        except BaseException:
            if done.done() and not done.cancelled():  # fn raised: the worker is fine
                self._give_back(pool)
            else:  # timed out or cancelled (tool_timeout): stop the work itself, off the loop (it joins)
                threading.Thread(target=pool.terminate, daemon=True).start()
            raise
        self._give_back(pool)
        return value

    def close(self) -> None:
        """Stop the idle workers (running calls end with their own worker)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for pool in idle:
            pool.terminate()


#: The process's shared workers, used by the built-in tools.
workers = Workers()
atexit.register(workers.close)
