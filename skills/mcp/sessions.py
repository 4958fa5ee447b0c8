"""One server's session, kept open on the hub's loop, replaced whenever it breaks.

A session is owned by one task of the hub loop, because anyio wants a context closed by the task that opened
it. A session that times out, dies or breaks is dropped and the next call opens a fresh one, so a bad server
costs one failed call, never the turn or the other servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, NoReturn

import anyio
from mcp import ClientSession, McpError
from mcp.types import CONNECTION_CLOSED, CallToolResult
from mcp.types import Tool as McpTool

from .config import ServerSpec
from .transports import CONNECT_TIMEOUT, describe, list_tools, open_session

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0
"""Seconds a session gets to close (and a stdio server to exit)."""
RETRY_FAILED_AFTER = 30.0
"""A server that failed to start is tried again on a later turn, but not on every node of every turn."""


class McpServerError(RuntimeError):
    """A server could not be reached, broke off, or refused a call; the message names the server."""


class McpCallTimeout(McpServerError, TimeoutError):
    """A call got no answer in time. A ``TimeoutError``, so callers report it like any other tool timeout."""


class _SessionEnded(Exception):
    """The session's owner task ended while a call was waiting on it."""


class Session:
    """One open session and the task that owns it; created on the hub loop."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.session: ClientSession | None = None
        self.ready: asyncio.Future[list[McpTool]] = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "unretrieved"
        self.busy = 0
        self.retired = False
        self.dead = False
        self.ended = "it was closed"  # why it ended, for the calls that were waiting on it
        self._stop = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._own(), name=f"mcp-session:{spec.name}")

    async def _own(self) -> None:
        try:
            async with open_session(self.spec) as session:
                await session.initialize()
                tools = await list_tools(session)
                if self.ready.done():  # stopped while starting
                    return
                self.session = session
                self.ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:  # a broken server must end here, not in the loop
            self.ended = describe(exc)
            if not self.ready.done():
                self.ready.set_exception(McpServerError(self.ended))
            log.debug("MCP session %s ended: %s", self.spec.name, self.ended)
        finally:
            self.dead = True
            self.session = None

    def stop(self) -> None:
        """Close soon; a session still connecting is cancelled outright."""
        self.retired = True
        self._stop.set()
        if not self.ready.done():
            # a task cancelled before its first step never runs its body: answer the waiters here
            self.ready.set_exception(McpServerError(self.ended))
            self.task.cancel()

    async def close(self) -> None:
        """Close and wait (bounded) until the server is gone."""
        self.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self.task), CLOSE_TIMEOUT)


class Link:
    """The way to one configured server: the current session, and how its last start went."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.current: Session | None = None
        self.tools: list[McpTool] = []
        self.error: str | None = None
        self.started = False
        """Whether a start was ever tried; ``error`` says whether the last one failed."""
        self.retry_at = 0.0

    def due(self) -> bool:
        """Whether a load should start this server: never tried, or failed long enough ago."""
        return self.spec.auto_start and (
            not self.started or (self.error is not None and time.monotonic() >= self.retry_at)
        )

    async def start(self) -> None:
        """``open`` for a load: the outcome is kept on the link (``error``), never raised."""
        try:
            await self.open()
        except McpServerError:
            self.retry_at = time.monotonic() + RETRY_FAILED_AFTER
        finally:
            self.started = True

    async def open(self) -> Session:
        """The live session, connecting first when there is none (one connect shared by all callers)."""
        s = self.current
        if s is None or s.dead or s.retired:
            s = self.current = Session(self.spec)
        try:
            self.tools = await asyncio.wait_for(asyncio.shield(s.ready), CONNECT_TIMEOUT)
        except TimeoutError:
            self.drop(s)
            self._failed(f"did not start within {CONNECT_TIMEOUT:g} s")
        except McpServerError as exc:
            self.drop(s)
            self._failed(str(exc))
        self.error = None
        return s

    def _failed(self, why: str) -> NoReturn:
        self.error = why
        raise McpServerError(f"MCP server {self.spec.name!r} could not be started: {why}")

    def drop(self, s: Session) -> None:
        """Stop handing out ``s``; it closes once its in-flight calls are over."""
        if self.current is s:
            self.current = None
        s.retired = True
        if s.busy == 0:
            s.stop()

    async def call(self, tool: str, args: dict[str, Any], limit: float) -> CallToolResult:
        """Run one call; a session that broke before the request left is replaced and the call sent again.

        Only a request that provably never reached the server is sent twice (its stream was already
        closed), so a tool with side effects never runs twice. The call also watches the session's owner
        task: some transports (streamable HTTP to a dead server) end the session without ever answering
        the pending request, which would otherwise wait for the whole timeout.
        """
        name = self.spec.name
        for attempt in range(2):
            s = await self.open()
            s.busy += 1
            try:
                return await self._send(s, tool, args, limit)
            except _SessionEnded as exc:
                self.drop(s)
                raise McpServerError(
                    f"MCP server {name!r} went away during {tool!r} ({exc}); it will be restarted on next use"
                ) from None
            except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                self.drop(s)
                if attempt:
                    raise McpServerError(f"MCP server {name!r} closed the connection") from exc
            except TimeoutError:
                self.drop(s)  # the server may be wedged: the next call gets a fresh session
                raise McpCallTimeout(
                    f"MCP server {name!r} did not answer {tool!r} within {limit:g} s; "
                    "its session was dropped and will reconnect on next use"
                ) from None
            except asyncio.CancelledError:
                self.drop(s)  # the caller gave up (its own timeout): treat it like ours
                raise
            except McpError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    self.drop(s)
                    raise McpServerError(
                        f"MCP server {name!r} went away during {tool!r} (did it exit?); "
                        "it will be restarted on next use"
                    ) from None
                raise McpServerError(f"MCP server {name!r}: {exc.error.message}") from None
            except Exception as exc:
                self.drop(s)
                raise McpServerError(f"MCP server {name!r} failed: {describe(exc)}") from exc
            finally:
                s.busy -= 1
                if s.retired and s.busy == 0:
                    s.stop()
        raise AssertionError("unreachable")

    @staticmethod
    async def _send(s: Session, tool: str, args: dict[str, Any], limit: float) -> CallToolResult:
        if s.session is None:  # it ended between connecting and now: nothing was sent, so it can be retried
            raise anyio.ClosedResourceError
        call = asyncio.ensure_future(s.session.call_tool(tool, args))
        call.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "unretrieved"
        try:
            done, _ = await asyncio.wait({call, s.task}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        finally:
            call.cancel()  # no-op once done; on our own cancellation it must not linger
        if call in done:
            return call.result()
        if s.task in done:
            raise _SessionEnded(s.ended)
        raise TimeoutError

    async def close(self) -> None:
        """Close the current session, if any."""
        s, self.current = self.current, None
        if s is not None:
            await s.close()
