"""MCP servers as tools: read the servers file, keep one session per server open, offer each tool by name.

The servers file is AnythingLLM's and Claude Desktop's format, so a file moved from either works unchanged.
Unlike AnythingLLM, nothing here decides whether a call may run: MCP tools are plain LangChain tools and go
through the ``approve`` node like every other tool (D21).

Why a background thread: the graph's nodes are async and run in whatever event loop their caller owns —
pytest's, the CLI's, the ``langgraph dev`` server's — and a process may use several over its life. An MCP
session is bound to the loop (and, for anyio, to the very task) that opened it, and langchain-mcp-adapters'
own tools open a new session, a new stdio process, for every call (half a second or more each). So one daemon
thread runs one asyncio loop that owns every session of the process; a tool call from any loop is handed to
it with ``run_coroutine_threadsafe`` and awaited with ``wrap_future``. A session is opened on first use and
kept; one that times out, dies or breaks is dropped and the next call opens a fresh one, so a bad server
costs one failed call, never the turn or the other servers.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar
from urllib.parse import urlparse

import anyio
import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    CONNECTION_CLOSED,
    CallToolResult,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp.types import Tool as McpTool

log = logging.getLogger(__name__)

T = TypeVar("T")
Transport = Literal["stdio", "sse", "streamable_http"]
Fingerprint = tuple[int, int, int, int]

CONNECT_TIMEOUT = 30.0
"""Seconds a server gets to start and list its tools, as in AnythingLLM."""
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds one call may take when the caller gives no timeout (the agent passes ``tool_timeout``)."""
RETRY_FAILED_AFTER = 30.0
"""A server that failed to start is tried again on a later turn, but not on every node of every turn."""
HTTP_READ_TIMEOUT = 300.0
"""Seconds an HTTP server's event stream may stay silent before the session counts as broken."""
CLOSE_TIMEOUT = 5.0
"""Seconds the process waits for its sessions to close at exit."""
MAX_NAME = 64
"""OpenAI's limit on a tool name; other providers allow the same or more."""

_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_TYPES: dict[str, Transport] = {
    "sse": "sse",
    "streamable": "streamable_http",
    "http": "streamable_http",
    "stdio": "stdio",
}


class McpServerError(RuntimeError):
    """A server could not be reached, broke off, or refused a call; the message names the server."""


class McpCallTimeout(McpServerError, TimeoutError):
    """A call got no answer in time. A ``TimeoutError``, so callers report it like any other tool timeout."""


class _SessionEnded(Exception):
    """The session's owner task ended while a call was waiting on it."""


class _ConfigError(ValueError):
    """One server block of the servers file is unusable."""


@dataclass(frozen=True)
class ServerSpec:
    """One server of the servers file, checked, in a hashable shape so a changed block can be detected."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    auto_start: bool = True
    suppressed_tools: frozenset[str] = frozenset()

    @property
    def connection(self) -> tuple[Any, ...]:
        """What the session depends on: editing only ``suppressedTools`` must not restart a server."""
        return (self.transport, self.command, self.args, self.env, self.url, self.headers)


@dataclass(frozen=True)
class ServerStatus:
    """How one configured server fared, for the ``mcp`` command and for problem reports."""

    name: str
    transport: Transport | None
    state: Literal["started", "not auto-started", "error"]
    error: str | None = None
    """The problem, as reported in ``McpLoad.problems`` (it names the server)."""
    tools: tuple[str, ...] = ()
    suppressed: tuple[str, ...] = ()


@dataclass
class McpLoad:
    """The MCP tools of one servers file, and everything that went wrong loading them (never raised)."""

    path: Path
    """The servers file, absolute once it was found and read (a missing one keeps the name as given)."""
    found: bool
    tools: list[BaseTool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    servers: list[ServerStatus] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- the file


def resolve_config(config: str | os.PathLike[str]) -> Path:
    """The absolute path of a servers file; relative paths are taken from the working directory."""
    path = Path(config).expanduser()
    return path if path.is_absolute() else Path.cwd() / path


def read_servers_file(path: Path) -> tuple[list[ServerSpec], list[str]]:
    """Parse the servers file: a missing file means no servers; each bad block is one problem naming it."""
    specs, problems = _read(path)
    return specs, [text for _, text in problems]


def _read(path: Path) -> tuple[list[ServerSpec], list[tuple[str | None, str]]]:
    """The servers and the problems, each problem with the server it belongs to (``None``: the file).

    Only a file that cannot be read as a whole is a single problem; a bad server block never stops the
    others from loading, because one typo should not cost the user every other server.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [(None, f"MCP servers file {path} cannot be read: {exc}")]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [(None, f"MCP servers file {path} is not valid JSON: {exc}")]
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [], [
            (
                None,
                f'MCP servers file {path} is malformed: expected {{"mcpServers": {{"<name>": {{...}}}}}}, '
                f'and "mcpServers" must be an object',
            )
        ]
    specs: list[ServerSpec] = []
    problems: list[tuple[str | None, str]] = []
    for name, block in servers.items():
        try:
            specs.append(_parse_server(name, block))
        except _ConfigError as exc:
            problems.append((name, f"MCP server {name!r}: {exc} (in {path})"))
    return specs, problems


def _names_in_file(path: Path) -> list[str]:
    """Server names in file order, so a listing reads like the file even when some blocks are bad."""
    with contextlib.suppress(Exception):  # the real parse already reported what is wrong
        return list(json.loads(path.read_text(encoding="utf-8"))["mcpServers"])
    return []


def _strings(value: Any, what: str, *, scalars: bool = False) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _ConfigError(f'"{what}" must be an object of strings')
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, str):
            out[key] = item
        elif scalars and isinstance(item, int | float | bool):  # "PORT": 8080 is a common slip
            out[key] = json.dumps(item) if isinstance(item, bool) else str(item)
        else:
            raise _ConfigError(f'"{what}.{key}" must be a string')
    return out


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or not url.strip():
        raise _ConfigError('"url" must be a non-empty string')
    try:
        parts = urlparse(url)
        parts.port  # noqa: B018 — raises ValueError on a port that is not a number
    except ValueError as exc:
        raise _ConfigError(f"bad URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _ConfigError(f"bad URL {url!r}: expected http(s)://host[:port]/path")
    return url


def _parse_server(name: str, block: Any) -> ServerSpec:
    """Choose the transport the way AnythingLLM does: explicit http type, else command, else url (SSE)."""
    if not isinstance(block, dict):
        raise _ConfigError("the server block must be an object")
    extra = block.get("anythingllm", {})
    if not isinstance(extra, dict):
        raise _ConfigError('"anythingllm" must be an object')
    auto_start = extra.get("autoStart", True)
    if not isinstance(auto_start, bool):
        raise _ConfigError('"anythingllm.autoStart" must be true or false')
    suppressed = extra.get("suppressedTools", [])
    if not isinstance(suppressed, list) or not all(isinstance(s, str) for s in suppressed):
        raise _ConfigError('"anythingllm.suppressedTools" must be a list of tool names')
    common: dict[str, Any] = {
        "name": name,
        "auto_start": auto_start,
        "suppressed_tools": frozenset(suppressed),
    }
    kind = block.get("type")
    if kind is not None and kind not in _TYPES:
        raise _ConfigError(f'unknown type {kind!r}: use "sse", "streamable" or "http" (or omit it for stdio)')
    if kind in ("sse", "streamable", "http") or (kind is None and "command" not in block and "url" in block):
        transport = _TYPES[kind] if kind else "sse"
        headers = _strings(block.get("headers", {}), "headers")
        return ServerSpec(
            transport=transport,
            url=_check_url(block.get("url")),
            headers=tuple(sorted(headers.items())),
            **common,
        )
    if "command" not in block:
        raise _ConfigError('has neither "command" (a stdio server) nor "url" (an HTTP server)')
    command = block["command"]
    if not isinstance(command, str) or not command.strip():
        raise _ConfigError('"command" must be a non-empty string')
    args = block.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _ConfigError('"args" must be a list of strings')
    env = _strings(block.get("env", {}) or {}, "env", scalars=True)
    return ServerSpec(
        transport="stdio", command=command, args=tuple(args), env=tuple(sorted(env.items())), **common
    )


def tool_name(server: str, tool: str) -> str:
    """``<server>-<tool>``, made acceptable to every provider the same way every time.

    Characters outside ``[a-zA-Z0-9_-]`` become ``_``; a name over 64 characters is cut and given a short
    hash of the full name, so two long names that share a prefix stay distinct and a name never changes
    between turns (a changed name would orphan the model's earlier calls and remembered approvals).
    """
    name = f"{server}-{tool}"
    if _VALID_NAME.match(name):
        return name
    clean = _BAD_CHARS.sub("_", name)
    if len(clean) <= MAX_NAME:
        return clean
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{clean[: MAX_NAME - len(digest) - 1]}_{digest}"


# ------------------------------------------------------------------------------------------- sessions


def _describe(exc: BaseException) -> str:
    """The innermost useful message: anyio wraps transport failures in nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpError):
        return exc.error.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@asynccontextmanager
async def _open_session(spec: ServerSpec) -> AsyncIterator[ClientSession]:
    """Open the transport and an MCP session over it (not yet initialised)."""
    if spec.transport == "stdio":
        assert spec.command is not None
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env={**os.environ, **dict(spec.env)}
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            yield session
    elif spec.transport == "sse":
        assert spec.url is not None
        async with (
            sse_client(
                spec.url,
                headers=dict(spec.headers),
                timeout=CONNECT_TIMEOUT,
                sse_read_timeout=HTTP_READ_TIMEOUT,
            ) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session
    else:
        assert spec.url is not None
        client = httpx.AsyncClient(
            headers=dict(spec.headers),
            timeout=httpx.Timeout(CONNECT_TIMEOUT, read=HTTP_READ_TIMEOUT),
            follow_redirects=True,
        )
        async with (
            client,
            streamable_http_client(spec.url, http_client=client) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            yield session


async def _list_tools(session: ClientSession) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever must not hang the turn
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


class _Session:
    """One open session, owned by one task of the hub loop: anyio wants a context closed by its opener."""

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
            async with _open_session(self.spec) as session:
                await session.initialize()
                tools = await _list_tools(session)
                if self.ready.done():  # stopped while starting
                    return
                self.session = session
                self.ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:  # a broken server must end here, not in the loop
            self.ended = _describe(exc)
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


class _Link:
    """The way to one configured server: the current session, replaced whenever it breaks."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.current: _Session | None = None
        self.tools: list[McpTool] = []
        self.error: str | None = None

    async def open(self) -> _Session:
        """The live session, connecting first when there is none (one connect shared by all callers)."""
        s = self.current
        if s is None or s.dead or s.retired:
            s = self.current = _Session(self.spec)
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

    def drop(self, s: _Session) -> None:
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
        for attempt in range(2):
            s = await self.open()
            s.busy += 1
            try:
                return await self._send(s, tool, args, limit)
            except _SessionEnded as exc:
                self.drop(s)
                raise McpServerError(
                    f"MCP server {self.spec.name!r} went away during {tool!r} ({exc}); "
                    "it will be restarted on next use"
                ) from None
            except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                self.drop(s)
                if attempt:
                    raise McpServerError(f"MCP server {self.spec.name!r} closed the connection") from exc
            except TimeoutError:
                self.drop(s)  # the server may be wedged: the next call gets a fresh session
                raise McpCallTimeout(
                    f"MCP server {self.spec.name!r} did not answer {tool!r} within {limit:g} s; "
                    "its session was dropped and will reconnect on next use"
                ) from None
            except asyncio.CancelledError:
                self.drop(s)  # the caller gave up (its own timeout): treat it like ours
                raise
            except McpError as exc:
                if exc.error.code == CONNECTION_CLOSED:
                    self.drop(s)
                    raise McpServerError(
                        f"MCP server {self.spec.name!r} went away during {tool!r} (did it exit?); "
                        "it will be restarted on next use"
                    ) from None
                raise McpServerError(f"MCP server {self.spec.name!r}: {exc.error.message}") from None
            except Exception as exc:
                self.drop(s)
                raise McpServerError(f"MCP server {self.spec.name!r} failed: {_describe(exc)}") from exc
            finally:
                s.busy -= 1
                if s.retired and s.busy == 0:
                    s.stop()
        raise AssertionError("unreachable")

    @staticmethod
    async def _send(s: _Session, tool: str, args: dict[str, Any], limit: float) -> CallToolResult:
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


@dataclass(frozen=True)
class _ToolSpec:
    name: str
    server: str
    tool: str
    description: str
    schema: dict[str, Any]
    link: _Link = field(compare=False)


@dataclass
class _Loaded:
    """One servers file as last read: its fingerprint, its links and what loading them found."""

    path: Path
    fingerprint: Fingerprint | None
    links: dict[str, _Link] = field(default_factory=dict)
    tools: list[_ToolSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    servers: list[ServerStatus] = field(default_factory=list)
    retry_at: float | None = None
    by_timeout: dict[float, list[BaseTool]] = field(default_factory=dict)

    def result(self, hub: McpHub, timeout: float) -> McpLoad:
        tools = self.by_timeout.get(timeout)
        if tools is None:
            tools = self.by_timeout[timeout] = [_make_tool(hub, spec, timeout) for spec in self.tools]
        return McpLoad(
            self.path, self.fingerprint is not None, list(tools), list(self.problems), list(self.servers)
        )


def _key(config: str | os.PathLike[str]) -> str:
    return os.path.expanduser(os.fspath(config))


def _fingerprint(config: str) -> Fingerprint | None:
    """Which file, in which version.

    A relative name is looked up in the working directory by the system call itself, so an event loop never
    has to ask for the directory (``langgraph dev`` forbids ``os.getcwd`` on its loops), and a changed
    directory or a replaced file still shows as a change.
    """
    try:
        st = os.stat(config)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


# ------------------------------------------------------------------------------------------- the tools


def _schema(tool: McpTool) -> dict[str, Any]:
    """The server's input schema, with the ``type``/``properties`` providers insist on for no-arg tools."""
    schema = dict(tool.inputSchema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def _content(result: CallToolResult, name: str) -> tuple[str, Any]:
    """Text blocks joined become the message; structured content rides along as the artifact."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
            parts.append(block.resource.text)
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        else:
            parts.append(f"[{block.type} content ({getattr(block, 'mimeType', '') or 'unknown type'})]")
    text = "\n".join(parts)
    if result.isError:
        raise ToolException(f"Error: {name} failed: {text or 'the MCP server gave no message'}")
    if result.structuredContent is None:
        return text, None
    # wrapped as langchain-mcp-adapters does: a server's own top-level keys (say "sources") must never be
    # mistaken for the project's artifact conventions, such as citations joining the turn's sources
    return text or json.dumps(result.structuredContent), {"structured_content": result.structuredContent}


def _make_tool(hub: McpHub, spec: _ToolSpec, timeout: float) -> BaseTool:
    async def run(**arguments: Any) -> tuple[str, Any]:
        result = await hub.submit(spec.link.call(spec.tool, arguments, timeout))
        return _content(result, spec.name)

    return StructuredTool(
        name=spec.name,
        description=spec.description,
        args_schema=spec.schema,
        coroutine=run,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={"server": spec.server, "tool": spec.tool, "mcp": True},
    )


# --------------------------------------------------------------------------------------------- the hub


class McpHub:
    """Every MCP session of the process, on one loop in one daemon thread (see the module docstring)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start_lock = threading.Lock()
        self._loaded: dict[str, _Loaded] = {}  # by the name the caller gave; the fingerprint says which file
        self._reload_locks: dict[str, asyncio.Lock] = {}
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

    def _cached(self, key: str) -> tuple[_Loaded | None, Fingerprint | None, bool]:
        entry = self._loaded.get(key)
        fingerprint = _fingerprint(key)
        fresh = (
            entry is not None
            and entry.fingerprint == fingerprint
            and (entry.retry_at is None or time.monotonic() < entry.retry_at)
        )
        return entry, fingerprint, fresh

    async def load(
        self, config: str | os.PathLike[str], call_timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> McpLoad:
        """The tools of a servers file; cheap when nothing changed, so every node of a turn may ask."""
        key = _key(config)
        entry, fingerprint, fresh = self._cached(key)
        if fresh and entry is not None:
            return entry.result(self, call_timeout)
        if fingerprint is None and entry is None:
            return McpLoad(Path(key), found=False)  # no file, nothing open: no need for the thread at all
        entry = await self.submit(self._reload(key))
        return entry.result(self, call_timeout)

    def load_sync(
        self, config: str | os.PathLike[str], call_timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> McpLoad:
        """``load`` for synchronous callers."""
        entry = self.run_sync(self._reload(_key(config)), timeout=CONNECT_TIMEOUT + 10)
        return entry.result(self, call_timeout)

    async def _reload(self, key: str) -> _Loaded:
        lock = self._reload_locks.setdefault(key, asyncio.Lock())
        async with lock:
            entry, fingerprint, fresh = self._cached(key)
            if fresh and entry is not None:
                return entry  # another caller reloaded it while we waited
            # resolved off the loop: langgraph dev's blocking-call guard watches every running loop
            path = await asyncio.to_thread(resolve_config, key)
            specs, found = _read(path)
            old = entry.links if entry else {}
            links: dict[str, _Link] = {}
            for spec in specs:
                link = old.get(spec.name)
                if link is not None and link.spec.connection == spec.connection:
                    link.spec = spec
                else:
                    link = _Link(spec)
                links[spec.name] = link
            for name, link in old.items():  # removed or changed servers: their sessions go
                if links.get(name) is not link:
                    task = asyncio.get_running_loop().create_task(link.close())
                    self._closing.add(task)
                    task.add_done_callback(self._closing.discard)
            entry = _Loaded(path, fingerprint, links)
            await self._start(entry, specs, found)
            self._loaded[key] = entry
            return entry

    async def _start(
        self, entry: _Loaded, specs: list[ServerSpec], found: list[tuple[str | None, str]]
    ) -> None:
        """Start every auto-start server at once, so the slowest one alone sets the wait."""
        starting = [entry.links[s.name] for s in specs if s.auto_start]
        outcomes = await asyncio.gather(*(link.open() for link in starting), return_exceptions=True)
        failed = {
            link.spec.name: o
            for link, o in zip(starting, outcomes, strict=True)
            if isinstance(o, BaseException)
        }
        problems = [text for _, text in found]
        names: dict[str, str] = {}
        for spec in specs:
            link = entry.links[spec.name]
            if not spec.auto_start:
                entry.servers.append(ServerStatus(spec.name, spec.transport, "not auto-started"))
                continue
            if spec.name in failed:
                why = link.error or _describe(failed[spec.name])
                problem = f"MCP server {spec.name!r} could not be started: {why}"
                problems.append(problem)
                entry.servers.append(ServerStatus(spec.name, spec.transport, "error", problem))
                continue
            offered: list[str] = []
            for tool in link.tools:
                if tool.name in spec.suppressed_tools:
                    continue
                name = tool_name(spec.name, tool.name)
                if name in names:
                    problems.append(
                        f"MCP server {spec.name!r}: tool {tool.name!r} is offered as {name!r}, which "
                        f"{names[name]} already uses; it is left out"
                    )
                    continue
                names[name] = f"{spec.name}:{tool.name}"
                offered.append(name)
                entry.tools.append(
                    _ToolSpec(
                        name=name,
                        server=spec.name,
                        tool=tool.name,
                        description=tool.description or f"{tool.name} (MCP server {spec.name})",
                        schema=_schema(tool),
                        link=link,
                    )
                )
            suppressed = tuple(sorted(t.name for t in link.tools if t.name in spec.suppressed_tools))
            entry.servers.append(
                ServerStatus(
                    spec.name, spec.transport, "started", tools=tuple(offered), suppressed=suppressed
                )
            )
        for name, problem in found:
            if name is not None:
                entry.servers.append(ServerStatus(name, None, "error", problem))
        order = {name: i for i, name in enumerate(_names_in_file(entry.path))}
        entry.servers.sort(key=lambda status: order.get(status.name, len(order)))
        entry.problems = problems
        entry.retry_at = time.monotonic() + RETRY_FAILED_AFTER if failed else None

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


async def load_mcp(config: str | os.PathLike[str], call_timeout: float = DEFAULT_CALL_TIMEOUT) -> McpLoad:
    """The MCP tools of a servers file, sessions opened and kept; problems are returned, never raised."""
    return await hub().load(config, call_timeout)


def load_mcp_sync(config: str | os.PathLike[str], call_timeout: float = DEFAULT_CALL_TIMEOUT) -> McpLoad:
    """``load_mcp`` for synchronous code such as the CLI; it must not be called from the hub's own thread."""
    return hub().load_sync(config, call_timeout)


async def close_mcp(config: str | os.PathLike[str] | None = None) -> None:
    """Close the sessions of one servers file (or all): tests, and programs that edit servers at run time."""
    await hub().close(config)
