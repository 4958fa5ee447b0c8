"""What the sync form of a turn costs: ``graph.invoke`` against ``graph.ainvoke`` of the same graph.

Each node of the sync form runs its coroutine on the process's background loop (graphs/runnables.py), so a
sync turn pays a thread hand-off per node. Both forms run the same one-tool turn with an in-process model
and in-memory saver and records (no I/O), interleaved; the async form is the baseline of the same run.
Run: ``python bench/sync_turn.py [turns]``.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from common import ToolThenAnswer, median_ms, timed
from langgraph.checkpoint.memory import InMemorySaver
from turn_overhead import NoDocuments

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph


async def main(turns: int) -> None:
    model = ToolThenAnswer(calls=[("current_datetime", {})])
    graph = build_graph(
        checkpointer=InMemorySaver(), records=MemoryRecords(), model=model, documents=NoDocuments()
    )
    context = Context(model="bench")
    message = {"messages": [{"role": "user", "content": "what time is it?"}]}

    def thread() -> dict:
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    def sync_turn() -> float:
        started = time.perf_counter()
        graph.invoke(message, thread(), context=context)
        return time.perf_counter() - started

    for _ in range(20):  # warm up both forms
        await graph.ainvoke(message, thread(), context=context)
        await asyncio.to_thread(sync_turn)
    async_s, sync_s = [], []
    for _ in range(turns):
        async_s.append(await timed(lambda: graph.ainvoke(message, thread(), context=context)))
        sync_s.append(await asyncio.to_thread(sync_turn))
    base, mine = median_ms(async_s), median_ms(sync_s)
    print(f"one-tool turn, fresh thread, in-process model, median of {turns}:")
    print(f"  graph.ainvoke : {base:7.2f} ms (baseline)")
    print(f"  graph.invoke  : {mine:7.2f} ms  ratio {mine / base:.2f}x")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
