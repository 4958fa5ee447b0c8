"""The MCP servers file: a deployment setting, read defensively, parsed into checked server blocks.

Who names the file: the deployment, through the environment variable ``MCP_CONFIG`` (default
``mcp_servers.json`` in the working folder; ``langgraph.json`` may set it under ``"env"``), never a run. A
stdio block's ``command`` runs as the server's own user, so whoever chooses the file chooses what the server
executes; a run only picks *which* of the deployment's servers it uses, by name (``Context.mcp_servers``).

How it is read: only a regular file, at most ``MAX_FILE_BYTES``, in a throwaway daemon thread awaited with a
timeout. A FIFO would block ``open`` until someone writes to it and ``/dev/zero`` would fill the memory; a
file on a dead network mount would hang ``read``. None of that may stall a turn, and the sessions' thread
never reads the file at all, so one bad file cannot freeze the servers already running.

The format is AnythingLLM's and Claude Desktop's, so a file moved from either works unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

T = TypeVar("T")
Transport = Literal["stdio", "sse", "streamable_http"]
Problem = tuple[str | None, str]
"""A problem and the server block it belongs to (``None``: the file as a whole)."""

ENV_VAR = "MCP_CONFIG"
DEFAULT_FILE = "mcp_servers.json"
MAX_FILE_BYTES = 1_000_000
"""A servers file is a few kilobytes; anything near a megabyte is a mistake or an attack."""
READ_TIMEOUT = 5.0
"""Seconds the file may take to read before the turn goes on without MCP."""
TIMED_OUT = "; no MCP tools are offered until it is read again"
"""How a read that timed out ends its problem, so the hub knows to try again later."""

_TYPES: dict[str, Transport] = {
    "sse": "sse",
    "streamable": "streamable_http",
    "http": "streamable_http",
    "stdio": "stdio",
}


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
class ServersFile:
    """What one read of the servers file found: its servers, and every problem (never raised)."""

    path: Path
    """Absolute once it was looked up (a file that could not be looked up keeps the name as given)."""
    found: bool
    specs: tuple[ServerSpec, ...] = ()
    problems: tuple[Problem, ...] = ()
    order: tuple[str, ...] = ()
    """Every server name in file order, bad blocks included, so a listing reads like the file."""


def configured_file() -> str:
    """The deployment's servers file as configured: ``MCP_CONFIG``, else ``mcp_servers.json``."""
    return os.environ.get(ENV_VAR) or DEFAULT_FILE


def resolve_config(config: str | os.PathLike[str]) -> Path:
    """The absolute path of a servers file; relative paths are taken from the working directory."""
    path = Path(config).expanduser()
    return path if path.is_absolute() else Path.cwd() / path


def read_servers_file(config: str | os.PathLike[str]) -> ServersFile:
    """Read and parse the servers file, blocking: a missing file means no servers and no problem.

    Only a file that cannot be read as a whole is a single problem; a bad server block never stops the
    others from loading, because one typo should not cost the user every other server.
    """
    path = resolve_config(config)
    data, problem = _read_regular_file(path)
    if problem is not None:
        return ServersFile(path, found=True, problems=((None, problem),))
    if data is None:
        return ServersFile(path, found=False)
    return _parse_file(path, data)


async def read_servers_file_async(config: str | os.PathLike[str]) -> ServersFile:
    """``read_servers_file`` in a daemon thread, given up after ``READ_TIMEOUT`` (the thread is abandoned)."""
    reading = asyncio.wrap_future(_in_daemon_thread(read_servers_file, config))
    try:
        return await asyncio.wait_for(reading, READ_TIMEOUT)
    except TimeoutError:
        return _timed_out(config, READ_TIMEOUT)


def read_servers_file_within(config: str | os.PathLike[str], timeout: float = READ_TIMEOUT) -> ServersFile:
    """``read_servers_file_async`` for synchronous callers such as the CLI."""
    try:
        return _in_daemon_thread(read_servers_file, config).result(timeout)
    except concurrent.futures.TimeoutError:
        return _timed_out(config, timeout)


def _timed_out(config: str | os.PathLike[str], timeout: float) -> ServersFile:
    problem = f"MCP servers file {os.fspath(config)} could not be read within {timeout:g} s{TIMED_OUT}"
    return ServersFile(Path(config), found=True, problems=((None, problem),))


def _in_daemon_thread(fn: Callable[[Any], T], arg: Any) -> concurrent.futures.Future[T]:
    """Run ``fn(arg)`` in a fresh daemon thread.

    One stuck in the kernel then never blocks the exit of the process (a pool's workers are joined at exit)
    nor any later read.
    """
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(arg))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="mcp-config-read", daemon=True).start()
    return future


def _read_regular_file(path: Path) -> tuple[bytes | None, str | None]:
    """The file's bytes, or ``(None, None)`` when it does not exist, or a problem.

    The type is checked before opening (opening a device can itself act) and again on the open descriptor
    (the path may have been swapped in between); ``O_NONBLOCK`` keeps ``open`` of a FIFO from waiting for a
    writer should one be swapped in.
    """
    where = f"MCP servers file {path}"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, f"{where} is not a regular file; no MCP tools are offered"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{where} cannot be read: {exc}"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, f"{where} is not a regular file; no MCP tools are offered"
        data = f.read(MAX_FILE_BYTES + 1) if info.st_size <= MAX_FILE_BYTES else b""
    if info.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
        return None, f"{where} is larger than {MAX_FILE_BYTES} bytes; no MCP tools are offered"
    return data, None


def _parse_file(path: Path, raw: bytes) -> ServersFile:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"MCP servers file {path} is not valid JSON: {exc}"
        return ServersFile(path, True, problems=((None, problem),))
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        problem = (
            f'MCP servers file {path} is malformed: expected {{"mcpServers": {{"<name>": {{...}}}}}}, '
            f'and "mcpServers" must be an object'
        )
        return ServersFile(path, True, problems=((None, problem),))
    specs: list[ServerSpec] = []
    problems: list[Problem] = []
    for name, block in servers.items():
        try:
            specs.append(_parse_server(name, block))
        except _ConfigError as exc:
            problems.append((name, f"MCP server {name!r}: {exc} (in {path})"))
    return ServersFile(path, True, tuple(specs), tuple(problems), tuple(servers))


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
