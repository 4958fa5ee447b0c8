"""Cost per turn as a thread grows: turn 500 against turn 10, in time and in checkpoint bytes, on PostgreSQL.

Every turn goes through the real saver and the real chat log in the embedded PostgreSQL (or
``DATABASE_URL``). Bytes are what the saver's serializer produced for the turn — what it writes. Goal
(DESIGN §4): ≤ 1.2× each, while the thread keeps showing its conversation: ``messages`` holds the newest
``history_limit`` exchanges, checked at the end. ``messages`` is a delta channel, so every few turns one
turn also writes a full copy of it; the means over the turns around each point include those copies.
Run: ``python bench/long_thread.py [turns]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from typing import Any

from common import ToolThenAnswer
from langgraph.checkpoint.serde.base import SerializerProtocol

from workspace_agent.checkpoints.savers import postgres_saver
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph


class CountingSerde:
    """Wrap the saver's serializer and count the bytes it produces."""

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner
        self.bytes = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = self.inner.dumps_typed(obj)
        self.bytes += len(data)
        return kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def main(turns: int) -> None:
    async with postgres_saver() as saver:
        serde = CountingSerde(saver.serde)
        saver.serde = serde  # type: ignore[assignment]
        graph = build_graph(
            checkpointer=saver,
            model=ToolThenAnswer(calls=[("current_datetime", {})], answer="It is now. " * 20),
        )
        context = Context(model="bench", workspace=f"bench-{uuid.uuid4().hex[:6]}")
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        times: dict[int, float] = {}
        sizes: dict[int, int] = {}
        for n in range(1, turns + 1):
            serde.bytes = 0
            started = time.perf_counter()
            await graph.ainvoke(
                {"messages": [{"role": "user", "content": f"question {n}: what time is it?"}]},
                config,
                context=context,
            )
            times[n] = time.perf_counter() - started
            sizes[n] = serde.bytes
            if n % 100 == 0:
                print(f"  turn {n}: {times[n] * 1000:.1f} ms, {sizes[n]} bytes", flush=True)
        shown = (await graph.aget_state(config)).values["messages"]
        prompts = [m.content for m in shown if m.type == "human"]
        exchanges = len(prompts) - 1
        assert prompts[-1] == f"question {turns}: what time is it?", "the running turn is shown"
        assert exchanges >= min(context.history_limit, turns - 1), "the earlier exchanges are shown"

    def window(n: int) -> tuple[float, float, float]:
        picked = range(max(1, n - 4), min(turns, n + 5) + 1)
        return (
            statistics.median(times[i] for i in picked) * 1000,
            statistics.median(sizes[i] for i in picked),
            statistics.mean(sizes[i] for i in picked),
        )

    tn, bn, mn = window(turns)
    print(f"the thread shows {exchanges} earlier exchanges and the running turn")
    print(f"turn {turns}: {tn:7.1f} ms  {bn:8.0f} bytes, mean {mn:8.0f} (medians of the turns around it)")
    for base in (10, 30):
        tb, bb, mb = window(base)
        print(
            f"  against turn {base:3d}: {tb:7.1f} ms  {bb:8.0f} bytes, mean {mb:8.0f}  ->  "
            f"time {tn / tb:.2f}x  bytes {bn / bb:.2f}x, mean {mn / mb:.2f}x  (goal <= 1.2x each)"
        )
    print(
        "  (the default history_limit of 20 exchanges fills up by turn 21: turn 10 carries 9, later turns 20)"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
