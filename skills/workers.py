"""CPU-bound tool work in worker processes, so that ``tool_timeout`` really stops it.

A coroutine can be cancelled only when it awaits; pure-Python computation in the server's process never
does, and holds the interpreter lock so every other thread stalls with it. Such work runs here in a
separate process instead: the event loop waits on a future, a timeout or cancellation (``execute_tool``'s
``tool_timeout``) kills that one worker, and a fresh one takes its place on the next call.

A worker is a fresh interpreter running ``skills/tool_worker.py`` (``python -m``), spoken to over its
standard input and output. It is not a ``multiprocessing`` worker: spawn and forkserver import the
parent's main module in every worker, so a program written at top level, without a ``__main__`` guard,
ran its own turn again in each of them; and a fork would copy a process that holds database pools, model
sessions and their threads. Workers are kept warm for reuse (their imports done) and replaced when one had
to be stopped. Each has its address space bounded (``TOOL_WORKER_MEMORY_MB``, a deployment setting). The
functions given must be importable by name, from a module other than the program's main one.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .tool_worker import decode, encode

T = TypeVar("T")

#: Idle workers kept warm; more may run at once, the extra ones are closed when they finish.
KEEP_IDLE = 2
#: A worker's address space when ``TOOL_WORKER_MEMORY_MB`` is not set: far above what bounded arithmetic
#: needs (an interpreter with the project imported takes about 160 MB of it), far below the host's memory.
DEFAULT_MEMORY_MB = 1024


def memory_limit() -> int | None:
    """Bytes of address space a worker may take: ``TOOL_WORKER_MEMORY_MB``; 0 means no limit.

    Raises:
        ValueError: The setting is not a whole number of megabytes.
    """
    setting = os.environ.get("TOOL_WORKER_MEMORY_MB", "").strip()
    megabytes = int(setting) if setting else DEFAULT_MEMORY_MB
    if megabytes < 0:
        raise ValueError(f"TOOL_WORKER_MEMORY_MB must be 0 (no limit) or more, not {setting!r}")
    return megabytes * 1024 * 1024 or None


class Worker:
    """One worker process and its pipes; each call is a line out and a line back."""

    def __init__(self) -> None:
        """Start the interpreter; it imports its module while the first call is on its way."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "workspace_agent.skills.tool_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._requests, self._replies = self.process.stdin, self.process.stdout
        self._send(encode({"path": list(sys.path), "memory_bytes": memory_limit()}))

    def _send(self, line: bytes) -> None:
        self._requests.write(line)
        self._requests.flush()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
        """``fn(*args)`` in the worker, blocking: ``("ok", value)`` or ``("error", exception)``.

        Raises:
            EOFError: The worker ended before it answered (killed by a timeout, or it crashed).
            BrokenPipeError: The worker had ended before the call was sent.
        """
        self._send(encode((fn, args)))
        return decode(self._replies.readline())

    def kill(self) -> None:
        """Stop the worker at once, whatever it is doing; its pending call ends with ``EOFError``."""
        if self.process.poll() is None:
            self.process.kill()

    def close(self) -> None:
        """End an idle worker: it exits when its input closes (and is killed if it does not)."""
        try:
            self._requests.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._replies.close()

    def alive(self) -> bool:
        """Whether the process still runs (an idle worker may have been killed from outside)."""
        return self.process.poll() is None


def _settle(
    future: asyncio.Future[Any], outcome: tuple[str, Any] | None, error: BaseException | None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(outcome)


class Workers:
    """A few warm worker processes; a call that runs too long takes its worker down with it."""

    def __init__(self, keep_idle: int = KEEP_IDLE) -> None:
        """Start nothing yet: the first call starts a worker (a fraction of a second), later ones reuse it."""
        self._idle: list[Worker] = []
        self._running: set[Worker] = set()
        self._lock = threading.Lock()
        self._keep_idle = keep_idle

    def _take(self) -> Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    self._running.add(worker)
                    return worker
        worker = Worker()
        with self._lock:
            self._running.add(worker)
        return worker

    def _give_back(self, worker: Worker) -> None:
        with self._lock:
            self._running.discard(worker)
            if worker.alive() and len(self._idle) < self._keep_idle:
                self._idle.append(worker)
                return
        threading.Thread(target=worker.close, daemon=True).start()  # it joins: off the event loop

    def _retire(self, worker: Worker) -> None:
        """Kill a worker whose call was given up, and reap it off the event loop."""
        with self._lock:
            self._running.discard(worker)
        worker.kill()
        threading.Thread(target=worker.close, daemon=True).start()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker process; when the awaiting task is cancelled, the worker is killed.

        Bound it with ``asyncio.timeout`` or ``asyncio.wait_for`` (as ``execute_tool`` does with
        ``tool_timeout``): the timeout cancels this await, and the cancellation stops the computation.
        The blocking pipe I/O runs in a thread of its own, so a worker serves any event loop of the
        process (the sync API runs each call on a loop of its own).

        Raises:
            Exception: Whatever ``fn`` raised, re-raised here.
        """
        loop = asyncio.get_running_loop()
        worker = await asyncio.to_thread(self._take)  # starting a process blocks (it reads exec's result)
        done: asyncio.Future[tuple[str, Any]] = loop.create_future()

        def call() -> None:
            try:
                outcome = worker.call(fn, args)
            except BaseException as exc:  # the worker died or was killed: the awaiting side decides
                loop.call_soon_threadsafe(_settle, done, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, done, outcome, None)

        threading.Thread(target=call, daemon=True).start()
        try:
            status, value = await done
        except BaseException:  # timed out or cancelled (tool_timeout), or the worker died: stop it
            self._retire(worker)
            raise
        if status == "error":
            if isinstance(value, MemoryError):
                self._retire(worker)  # it may hold on to what it reached; the next call gets a fresh one
            else:
                self._give_back(worker)
            raise value
        self._give_back(worker)
        return value

    def close(self) -> None:
        """Stop every worker: idle ones end, running ones are killed with their calls."""
        with self._lock:
            idle, self._idle = self._idle, []
            running, self._running = set(self._running), set()
        for worker in running:
            worker.kill()
        for worker in [*idle, *running]:
            worker.close()


#: The process's shared workers, used by the built-in tools.
workers = Workers()
atexit.register(workers.close)
