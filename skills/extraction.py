"""Documents are extracted in a worker process that can be killed, under limits on CPU, memory and text.

A few kilobytes of PDF or DOCX can unpack to gigabytes or take minutes of parsing (a zip bomb, pages that
share one content stream). In the server's process that work cannot be cancelled (a thread never stops),
holds the interpreter lock against every other thread, and can take the process down when memory runs out.
So PDF, DOCX and HTML are parsed here, in a fresh process per document: an uploaded file, a page
``fetch_url`` read, a search provider's results page (whatever comes from outside as markup):

- it is started as ``python -m workspace_agent.skills.extraction`` with the bytes on stdin: never
  ``multiprocessing`` spawn, which re-imports the user's ``__main__`` (a program without a
  ``if __name__ == "__main__":`` guard would run again);
- it sets its own limits before it reads a byte (``RLIMIT_CPU``, ``RLIMIT_AS``) and lowers its priority, so
  an ordinary turn of another user is served first;
- the event loop awaits it with a wall-clock bound, and a cancelled run (or the bound) kills it;
- at most ``EXTRACT_WORKERS`` run at once per server process; the others wait without blocking the loop.

Plain text stays in the server's process (in a thread): decoding is linear in the size cap.

Settings (deployment: environment or ``langgraph.json`` env):
    ``EXTRACT_CPU_SECONDS``: CPU seconds one document may take (default 30). The wall-clock bound is three
        times that plus ten seconds, for a busy machine.
    ``EXTRACT_MEMORY_MB``: the worker's address space in MiB (default 1024); a DOCX may unpack to an eighth
        of it.
    ``EXTRACT_MAX_CHARS``: characters of text one document may give (default 2,000,000; ``skills.loaders``).
    ``EXTRACT_WORKERS``: extractions running at once per server process (default 2).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .html_text import page_text
from .loaders import (
    MEMORY_SETTING,
    TEXT_SUFFIXES,
    UnreadableDocument,
    extract_text,
    max_chars,
    positive_setting,
)

CPU_SETTING, WORKERS_SETTING = "EXTRACT_CPU_SECONDS", "EXTRACT_WORKERS"
DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, DEFAULT_WORKERS = 30, 1024, 2
WORKER_MODULE = "workspace_agent.skills.extraction"
#: The worker's scheduling priority, lowered by this much: interactive turns come first.
NICENESS = 10

_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Limits:
    """What one extraction may use; read from the deployment's settings at each call."""

    cpu_seconds: int
    memory_bytes: int
    max_chars: int

    @property
    def wall_seconds(self) -> float:
        """The wall-clock bound: CPU time stretched for a busy machine and a niced worker."""
        return self.cpu_seconds * 3 + 10


def limits() -> Limits:
    """The extraction limits of this deployment.

    Raises:
        ValueError: A setting is not a positive whole number; the message names it.
    """
    return Limits(
        cpu_seconds=positive_setting(CPU_SETTING, DEFAULT_CPU_SECONDS, "seconds"),
        memory_bytes=positive_setting(MEMORY_SETTING, DEFAULT_MEMORY_MB, "MiB") * 2**20,
        max_chars=max_chars(),
    )


def _gate() -> asyncio.Semaphore:
    """The running loop's semaphore of ``EXTRACT_WORKERS`` (a semaphore belongs to one loop)."""
    loop = asyncio.get_running_loop()
    if loop not in _gates:
        _gates[loop] = asyncio.Semaphore(positive_setting(WORKERS_SETTING, DEFAULT_WORKERS, "processes"))
    return _gates[loop]


def _stopped_reason(returncode: int, bound: Limits) -> str:
    """Why a worker that wrote no answer ended, in the words a person uploading the file can act on."""
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return (
            f"reading it took more than {bound.cpu_seconds} s of processor time, the limit of one document "
            f"({CPU_SETTING})"
        )
    return (
        f"reading it stopped the extraction worker (exit {returncode}); it may need more than the "
        f"{bound.memory_bytes // 2**20} MB allowed ({MEMORY_SETTING})"
    )


async def _run_worker(request: dict[str, Any], data: bytes, bound: Limits) -> dict[str, Any]:
    """Run one request in a fresh worker; kill it when the wall-clock bound passes or the run is cancelled."""
    header = json.dumps({**request, **asdict(bound)}).encode() + b"\n"
    async with _gate():
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            WORKER_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(header + data), bound.wall_seconds)
        except TimeoutError as exc:
            raise UnreadableDocument(
                f"reading it took longer than {bound.wall_seconds:.0f} s, the wall-clock limit of one "
                f"document (three times {CPU_SETTING} plus ten seconds)"
            ) from exc
        finally:
            if proc.returncode is None:  # timed out or cancelled: the work stops with its process
                proc.kill()
                await asyncio.shield(proc.wait())
    try:
        answer = json.loads(out)
    except ValueError:
        raise UnreadableDocument(_stopped_reason(proc.returncode or 0, bound)) from None
    if "error" in answer:
        raise UnreadableDocument(answer["error"])
    return dict(answer)


async def extract_bounded(path: Path, data: bytes) -> str:
    """The text of a document, extracted under the deployment's limits without blocking the event loop.

    Raises:
        UnreadableDocument: Unsupported, damaged, empty, or over a limit; the message names the setting.
    """
    bound = limits()
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return await asyncio.to_thread(extract_text, path, data, bound.max_chars)
    answer = await _run_worker({"kind": "document", "suffix": suffix}, data, bound)
    return str(answer["text"])


async def page_bounded(data: bytes, charset: str | None) -> tuple[str, str]:
    """The title and readable text of a fetched HTML page, parsed in a worker under the same limits.

    Raises:
        UnreadableDocument: The worker was stopped by a limit; the message names the setting.
    """
    answer = await _run_worker({"kind": "page", "charset": charset}, data, limits())
    return str(answer["title"]), str(answer["text"])


async def search_results_bounded(data: bytes, charset: str | None, limit: int) -> list[tuple[str, str, str]]:
    """DuckDuckGo's results page as ``(title, url, snippet)`` rows, parsed in a worker under the limits.

    Raises:
        UnreadableDocument: The worker was stopped by a limit; the message names the setting.
    """
    answer = await _run_worker({"kind": "duckduckgo", "charset": charset, "limit": limit}, data, limits())
    return [(str(t), str(u), str(s)) for t, u, s in answer["results"]]


# ── the worker process ─────────────────────────────────────────────────────────────────────────────────


def _limit_self(bound: Limits) -> None:
    """Put this process under its limits: CPU (SIGXCPU, then SIGKILL a second later), memory, priority."""
    resource.setrlimit(resource.RLIMIT_CPU, (bound.cpu_seconds, bound.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (bound.memory_bytes, bound.memory_bytes))
    os.nice(NICENESS)


def _parse(header: dict[str, Any], data: bytes, bound: Limits) -> dict[str, Any]:
    """What the header asks of the bytes: a document's text, a page's title and text, or search results."""
    kind = header.get("kind", "document")
    if kind == "page":
        title, text = page_text(data, header.get("charset"))
        return {"title": title, "text": text[: bound.max_chars]}
    if kind == "duckduckgo":
        from .web_search import duckduckgo_results

        found = duckduckgo_results(data, header.get("charset"), int(header["limit"]))
        return {"results": [(r.title, r.url, r.snippet) for r in found]}
    path = Path("document" + header["suffix"])
    return {"text": extract_text(path, data, bound.max_chars, bound.memory_bytes)}


def _answer(header: dict[str, Any], data: bytes, bound: Limits) -> dict[str, Any]:
    """The worker's answer, or ``{"error"}`` with a reason a person can read."""
    try:
        return _parse(header, data, bound)
    except UnreadableDocument as exc:
        return {"error": str(exc)}
    except MemoryError:
        megabytes = bound.memory_bytes // 2**20
        return {"error": f"reading it needs more than the {megabytes} MB allowed ({MEMORY_SETTING})"}
    except Exception as exc:  # a parser's own failure on a damaged file
        return {"error": f"it could not be read ({type(exc).__name__}: {exc})"}


def main() -> None:
    """Read a JSON header line and the bytes from stdin; write one JSON answer to stdout."""
    header = json.loads(sys.stdin.buffer.readline())
    bound = Limits(header["cpu_seconds"], header["memory_bytes"], header["max_chars"])
    _limit_self(bound)
    answer = json.dumps(_answer(header, sys.stdin.buffer.read(), bound))
    sys.stdout.write(answer)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
