"""Shared bench helpers: timing, and the in-process model the tests use."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LANGSMITH_TRACING", "false")

from tests.support.fake_model import ToolThenAnswer  # noqa: E402

__all__ = ["ToolThenAnswer", "median_ms", "timed"]


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    """Seconds one awaited call takes."""
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


def median_ms(samples: list[float]) -> float:
    """Median of samples in seconds, as milliseconds."""
    return statistics.median(samples) * 1000
