"""A tool worker process: ``python -m workspace_agent.skills.tool_worker``, driven by ``skills/workers.py``.

It is started as a fresh interpreter running this module, so it never imports the parent's main module:
``multiprocessing``'s spawn and forkserver both do, and a program written at top level, without an
``if __name__ == "__main__":`` guard, then ran its whole top level again in every worker.

The protocol is one line each way per call, each line a base64-encoded pickle (the parent is the only
writer of this process's input, and pickles functions by name, as ``multiprocessing`` does):

- first, from the parent: ``{"path": [...], "memory_bytes": int | None}`` — the parent's ``sys.path``, so
  the functions it names import here as they do there, and the address-space limit to set;
- then, per call, ``(function, args)`` in, and ``("ok", value)`` or ``("error", exception)`` out.

The process ends when its input closes. The function's own ``print`` goes to standard error: standard
output carries the replies alone.
"""

from __future__ import annotations

import base64
import os
import pickle
import resource
import sys
from typing import Any, BinaryIO


def encode(value: Any) -> bytes:
    """One protocol line: ``value`` pickled, base64-encoded, newline-terminated."""
    return base64.b64encode(pickle.dumps(value)) + b"\n"


def decode(line: bytes) -> Any:
    """The value of one protocol line.

    Raises:
        EOFError: The line is empty: the other side closed the pipe.
    """
    if not line:
        raise EOFError("the other side closed the pipe")
    return pickle.loads(base64.b64decode(line))


def _limit_memory(memory_bytes: int | None) -> None:
    """Bound the address space, so a runaway allocation is this worker's ``MemoryError``, not the host's."""
    if memory_bytes is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        memory_bytes = min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))


def _answer(request: bytes) -> bytes:
    """Run one call and encode its result, or the exception it raised (or a stand-in it can be sent as)."""
    try:
        fn, args = decode(request)
        return encode(("ok", fn(*args)))
    except Exception as exc:  # the caller's exception to re-raise, whatever it is
        try:
            return encode(("error", exc))
        except Exception:  # an exception that does not pickle still reaches the caller, as text
            return encode(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer calls until the parent closes ``requests``."""
    hello = decode(requests.readline())
    sys.path[:] = [*hello["path"], *(p for p in sys.path if p not in hello["path"])]
    _limit_memory(hello["memory_bytes"])
    while line := requests.readline():
        replies.write(_answer(line))
        replies.flush()


def main() -> None:
    """Keep the replies' pipe for the protocol, and send everything else written to stdout to stderr."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        serve(sys.stdin.buffer, replies)
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
