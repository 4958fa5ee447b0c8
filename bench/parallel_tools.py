"""k parallel tool calls of latency L: wall time of the turn against L (goal ≤ 1.2× for k = 5, L = 200 ms).

The baseline, measured in the same run, is one turn whose single call takes L — so the ratio isolates
what running k calls adds, not the fixed cost of a turn. Run: ``python bench/parallel_tools.py``.
"""

from __future__ import annotations

import asyncio
import uuid

from common import ToolThenAnswer, median_ms, timed
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from turn_overhead import NoDocuments

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph

LATENCY = 0.2


async def wait(label: str) -> str:
    """Stand in for a tool that takes LATENCY seconds (an API call)."""
    await asyncio.sleep(LATENCY)
    return label


async def turn_ms(k: int, rounds: int = 5) -> float:
    model = ToolThenAnswer(calls=[("wait", {"label": str(i)}) for i in range(k)])
    graph = build_graph(
        checkpointer=InMemorySaver(),
        records=MemoryRecords(),
        documents=NoDocuments(),
        model=model,
        tools=[StructuredTool.from_function(coroutine=wait, name="wait")],
    )
    context = Context(model="bench", auto_approved=["*"])
    message = {"messages": [{"role": "user", "content": "go"}]}

    def config() -> dict:
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    samples = [await timed(lambda: graph.ainvoke(message, config(), context=context)) for _ in range(rounds)]
    return median_ms(samples)


async def main() -> None:
    one = await turn_ms(1)
    print(f"tool latency L = {LATENCY * 1000:.0f} ms; a turn with 1 call: {one:.0f} ms (baseline)")
    for k in (5, 10):
        many = await turn_ms(k)
        print(
            f"  {k:2d} calls: {many:6.0f} ms  ratio to 1 call {many / one:.2f}x  "
            f"ratio to L {many / (LATENCY * 1000):.2f}x  (serial would be {k * LATENCY * 1000:.0f} ms)"
        )


if __name__ == "__main__":
    asyncio.run(main())
