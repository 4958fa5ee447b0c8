"""Objects that belong to one event loop: HTTP clients whose connections were opened in it.

A process may run several loops over its life (the CLI's commands, tests, the dev server's workers); a
client reused from a loop that has ended fails with "Event loop is closed". These caches are per loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable
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
