"""Tools a test program brings to the graph (``build_graph(tools=...)``); they record every run to a file."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool


def _record(path: Path | None, name: str, args: dict) -> None:
    if path is not None:
        with path.open("a") as f:
            f.write(json.dumps({"tool": name, "args": args, "pid": os.getpid(), "t": time.time()}) + "\n")


def recorded(path: Path) -> list[dict]:
    """What the tools recorded, in order."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def make_test_tools(record: Path | None = None, slow_cap: float | None = None) -> list[BaseTool]:
    """A slow tool, a tool that raises, one that hangs, and one that takes a typed argument."""

    async def slow(seconds: float, label: str) -> str:
        """Wait ``seconds`` and then report the label (stands in for a slow API)."""
        await asyncio.sleep(seconds if slow_cap is None else min(seconds, slow_cap))
        _record(record, "slow", {"seconds": seconds, "label": label})
        return f"done {label}"

    def explode(reason: str) -> str:
        """Fail on purpose."""
        _record(record, "explode", {"reason": reason})
        raise RuntimeError(f"exploded: {reason}")

    async def hang() -> str:
        """Never finish."""
        _record(record, "hang", {})
        await asyncio.sleep(3600)
        return "unreachable"

    def repeat(word: str, times: int) -> str:
        """Repeat a word ``times`` times."""
        _record(record, "repeat", {"word": word, "times": times})
        return " ".join([word] * times)

    return [
        StructuredTool.from_function(coroutine=slow, name="slow"),
        StructuredTool.from_function(explode),
        StructuredTool.from_function(coroutine=hang, name="hang"),
        StructuredTool.from_function(repeat),
    ]
