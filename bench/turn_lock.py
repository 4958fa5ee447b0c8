"""What one turn at a time per thread costs: the agent graph with and without its turn lock, on PostgreSQL.

Both variants are the same compiled graph on the same ``postgres_saver`` (the lock is a PostgreSQL advisory
lock per thread taken around the run, two short queries per turn); the model is in-process (one tool call,
then an answer) and the chat log in memory, so the difference is the lock. Runs are interleaved so machine
noise hits both. Run: ``python bench/turn_lock.py [turns]``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from common import ToolThenAnswer, median_ms, timed

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.checkpoints.savers import postgres_saver
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph


class NoDocuments:
    """A document store of a program that has none: retrieval finds nothing, without a database."""

    async def space(self, workspace: str) -> None:
        return None


async def main(turns: int) -> None:
    async with postgres_saver() as saver:
        locked = build_graph(
            checkpointer=saver,
            records=MemoryRecords(),
            model=ToolThenAnswer(calls=[("current_datetime", {})]),
            documents=NoDocuments(),
        )
        unlocked = locked.copy(update={"turn_lock": None})
        context = Context(model="bench", auto_approved=["*"])
        message = {"messages": [{"role": "user", "content": "what time is it?"}]}

        def thread() -> dict:
            return {"configurable": {"thread_id": uuid.uuid4().hex}}

        for _ in range(10):  # warm up: imports, tokenizer, connections
            await locked.ainvoke(message, thread(), context=context)
            await unlocked.ainvoke(message, thread(), context=context)
        base_s, lock_s = [], []
        for _ in range(turns):
            base_s.append(await timed(lambda: unlocked.ainvoke(message, thread(), context=context)))
            lock_s.append(await timed(lambda: locked.ainvoke(message, thread(), context=context)))
        base, mine = median_ms(base_s), median_ms(lock_s)
        print(f"one-tool turn on PostgreSQL, fresh thread, median of {turns}:")
        print(f"  without the turn lock : {base:7.2f} ms (baseline)")
        print(f"  with the turn lock    : {mine:7.2f} ms  ratio {mine / base:.2f}x")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
