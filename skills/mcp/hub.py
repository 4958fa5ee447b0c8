"""The process's MCP sessions, on one loop in one daemon thread, and the servers file as last read.

Why a thread of its own: the graph's nodes are async and run in whatever event loop their caller owns —
pytest's, the CLI's, the ``langgraph dev`` server's — and a process may use several over its life. An MCP
session is bound to the loop (and, for anyio, to the very task) that opened it. So one daemon thread runs
one asyncio loop that owns every session of the process; a tool call from any loop is handed to it with
``run_coroutine_threadsafe`` and awaited with ``wrap_future``. The servers file is read by the caller (in a
throwaway thread, see ``config``), never on that loop, and a load that finds nothing changed touches
neither thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mcp.types import CallToolResult

from .config import (
    TIMED_OUT,
    ServersFile,
    configured_file,
    read_servers_file_async,
    read_servers_file_within,
)
from .sessions import CLOSE_TIMEOUT, RETRY_FAILED_AFTER, Link
from .tools import Call
from .transports import CONNECT_TIMEOUT
from .workspace import McpLoad, assemble, select

T = TypeVar("T")
Fingerprint = tuple[int, int, int, int]

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds one call may take when the caller gives no timeout (the agent passes ``tool_timeout``)."""


@dataclass
class _Entry:
    """One servers file as last read: its fingerprint, one link per server, loads already assembled."""

    file: ServersFile
    fingerprint: Fingerprint | None
    links: dict[str, Link]
    reread_at: float | None = None
    """A file that could not be read in time is tried again after a while, not on every node."""
    generation: int = 0
    """Bumped whenever a server starts or fails: the assembled loads below are then stale."""
    assembled: dict[tuple[Any, ...], McpLoad] = field(default_factory=dict)


def _fingerprint(config: str) -> Fingerprint | None:
    """Which file, in which version.

    A relative name is looked up in the working directory by the system call itself, so an event loop never
    has to ask for the directory (``langgraph dev`` forbids ``os.getcwd`` on its loops), and a changed
    directory or a replaced file still shows as a change. ``stat`` never opens the file, so it cannot block
    on a FIFO.
    """
    try:
        st = os.stat(config)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _key(config: str | os.PathLike[str] | None) -> str:
    """The name a servers file is known by: as given (the CLI), else the deployment's setting."""
    return os.path.expanduser(os.fspath(config if config is not None else configured_file()))


def _due(entry: _Entry, servers: Sequence[str] | None) -> list[Link]:
    """The chosen servers that should be started now (never tried, or failed a while ago)."""
    chosen, _ = select(servers, entry.file)
    return [entry.links[n] for n in chosen if n in entry.links and entry.links[n].due()]


class McpHub:
    """Every MCP session of the process, on one loop in one daemon thread (see the module docstring)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start_lock = threading.Lock()
        self._loaded: dict[str, _Entry] = {}  # by the name the file was given by; the fingerprint says which
        self._replace_locks: dict[str, asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mcp-sessions", daemon=True).start()
                self._loop = loop
                atexit.register(self.shutdown)
            return self._loop

    async def submit(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the hub loop and await it from any loop; cancelling the await cancels it there."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        return await asyncio.wrap_future(future)

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the hub loop from synchronous code (the CLI)."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop()).result(timeout)

    def caller(self, link: Link, timeout: float) -> Call:
        """How a converted tool reaches ``link``'s session: through the hub, bounded by ``timeout``."""

        async def call(tool: str, args: dict[str, Any]) -> CallToolResult:
            return await self.submit(link.call(tool, args, timeout))

        return call

    def _fresh(self, key: str) -> tuple[_Entry | None, Fingerprint | None]:
        entry, fingerprint = self._loaded.get(key), _fingerprint(key)
        if entry is not None and entry.fingerprint == fingerprint:
            if entry.reread_at is None or time.monotonic() < entry.reread_at:
                return entry, fingerprint
        return None, fingerprint

    async def load(
        self,
        config: str | os.PathLike[str] | None = None,
        *,
        servers: Sequence[str] | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> McpLoad:
        """The tools of the chosen servers (``None``: all); cheap when nothing changed, so nodes may ask."""
        key = _key(config)
        entry, fingerprint = self._fresh(key)
        if entry is None:
            if fingerprint is None and key not in self._loaded:  # no file, nothing open: no thread needed
                entry = _Entry(ServersFile(Path(key), found=False), None, {})
            else:
                file = await read_servers_file_async(key)
                entry = await self.submit(self._replace(key, file, fingerprint))
        due = _due(entry, servers)
        if due:
            await self.submit(self._start(entry, due))
        return self._result(entry, servers, call_timeout)

    def load_sync(
        self,
        config: str | os.PathLike[str] | None = None,
        *,
        servers: Sequence[str] | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> McpLoad:
        """``load`` for synchronous callers; it must not be called from the hub's own thread."""
        key = _key(config)
        fingerprint = _fingerprint(key)
        file = read_servers_file_within(key)
        entry = self.run_sync(self._replace(key, file, fingerprint), timeout=CONNECT_TIMEOUT + 10)
        due = _due(entry, servers)
        if due:
            self.run_sync(self._start(entry, due), timeout=CONNECT_TIMEOUT + 10)
        return self._result(entry, servers, call_timeout)

    def _result(self, entry: _Entry, servers: Sequence[str] | None, timeout: float) -> McpLoad:
        """The load, assembled once per version of the servers' state (tool objects stay the same)."""
        key = (entry.generation, timeout, repr(servers))  # repr: a bad value may be unhashable
        done = entry.assembled.get(key)
        if done is None:
            if len(entry.assembled) > 256:
                entry.assembled.clear()
            chosen, problems = select(servers, entry.file)
            done = assemble(entry.file, entry.links, chosen, problems, self.caller, timeout)
            entry.assembled[key] = done
        return McpLoad(done.path, done.found, list(done.tools), list(done.problems), list(done.servers))

    async def _replace(self, key: str, file: ServersFile, fingerprint: Fingerprint | None) -> _Entry:
        """Take a new read of the file: unchanged servers keep their sessions, the others are closed."""
        async with self._replace_locks.setdefault(key, asyncio.Lock()):
            entry = self._loaded.get(key)
            if entry is not None and entry.fingerprint == fingerprint and entry.reread_at is None:
                return entry  # another caller took this very version while we waited
            old = entry.links if entry else {}
            links: dict[str, Link] = {}
            for spec in file.specs:
                link = old.get(spec.name)
                if link is not None and link.spec.connection == spec.connection:
                    link.spec = spec
                else:
                    link = Link(spec)
                links[spec.name] = link
            for name, link in old.items():  # removed or changed servers: their sessions go
                if links.get(name) is not link:
                    task = asyncio.get_running_loop().create_task(link.close())
                    self._closing.add(task)
                    task.add_done_callback(self._closing.discard)
            late = any(text.endswith(TIMED_OUT) for _, text in file.problems)
            reread_at = time.monotonic() + RETRY_FAILED_AFTER if late else None
            self._loaded[key] = entry = _Entry(file, fingerprint, links, reread_at)
            return entry

    async def _start(self, entry: _Entry, links: list[Link]) -> None:
        """Start the due servers at once, so the slowest one alone sets the wait."""
        await asyncio.gather(*(link.start() for link in links))
        entry.generation += 1

    async def close(self, config: str | os.PathLike[str] | None = None) -> None:
        """Close the sessions of one servers file, or of all; the next use opens them again."""
        if self._loop is None:
            return
        keys = [_key(config)] if config is not None else list(self._loaded)
        entries = [e for k in keys if (e := self._loaded.pop(k, None)) is not None]

        async def close_entries() -> None:
            await asyncio.gather(*(link.close() for e in entries for link in e.links.values()))

        await self.submit(close_entries())

    def shutdown(self) -> None:
        """Close every session at interpreter exit, so stdio servers do not outlive the process."""
        if self._loop is None or not self._loop.is_running():
            return
        entries, self._loaded = list(self._loaded.values()), {}

        async def close_all() -> None:
            await asyncio.gather(*(link.close() for e in entries for link in e.links.values()))

        with contextlib.suppress(Exception):
            self.run_sync(close_all(), timeout=CLOSE_TIMEOUT + 1)


_hub: McpHub | None = None
_hub_lock = threading.Lock()


def hub() -> McpHub:
    """The process's hub; a forked child gets its own, as threads and sessions do not survive a fork."""
    global _hub
    with _hub_lock:
        if _hub is None or _hub.pid != os.getpid():
            _hub = McpHub()
        return _hub
