"""Nodes with both forms, so a compiled graph serves ``invoke`` / ``stream`` as well as ``ainvoke``.

Every node that does I/O is a coroutine. LangGraph runs a coroutine node only under the async API; under
``invoke`` it raises "No synchronous function provided". ``node`` pairs each coroutine with a sync form
that runs it on the process's background loop (``providers.chat.loops.run_sync``): the same code, the same
decisions, the same interrupts, with clients and pools reused across calls.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from langgraph._internal._runnable import RunnableCallable

from ..providers.chat.loops import run_sync


def node(action: Callable[..., Any]) -> Any:
    """``action`` as a node LangGraph can run both ways; a plain function is returned unchanged.

    The sync form keeps the coroutine's signature (through ``functools.wraps``), so LangGraph injects the
    same arguments (``runtime``, ``config``) into either form.
    """
    if not inspect.iscoroutinefunction(action):
        return action

    @functools.wraps(action)
    def sync(*args: Any, **kwargs: Any) -> Any:
        return run_sync(action(*args, **kwargs))

    name = getattr(action, "func", action).__name__  # a partial names its function
    return RunnableCallable(sync, action, name=name, trace=False)  # as LangGraph builds its own nodes


def router(route: Callable[..., Any]) -> Any:
    """A routing function (a conditional edge) that runs on the event loop under the async API too.

    LangGraph runs a plain function given as a conditional edge in a worker thread under ``ainvoke``. A
    router only reads state, so that hand-off (six per one-tool turn) costs more than the routing, and under
    load each one waits for the interpreter lock. Under ``invoke`` the function runs as before.
    """

    @functools.wraps(route)
    async def inline(*args: Any, **kwargs: Any) -> Any:
        return route(*args, **kwargs)

    return RunnableCallable(route, inline, name=route.__name__, trace=True)  # as LangGraph builds its own
