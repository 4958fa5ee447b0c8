"""Shared bench helpers: timing, and the in-process model.

Benches run as ``python bench/<name>.py`` against the installed package; they import nothing from tests/.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable

from fake_model import ToolThenAnswer

os.environ.setdefault("LANGSMITH_TRACING", "false")

__all__ = ["ToolThenAnswer", "median_ms", "timed"]


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    """Seconds one awaited call takes."""
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


def median_ms(samples: list[float]) -> float:
    """Median of samples in seconds, as milliseconds."""
    return statistics.median(samples) * 1000
