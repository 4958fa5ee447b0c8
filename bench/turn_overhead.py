"""Orchestration overhead of one agent turn against LangGraph's prebuilt agent, same model, no I/O.

Both graphs get the same in-process model (one tool call, then an answer), the same read-only tool and an
in-memory saver; ours writes its chat log to memory and has no documents, so neither touches a database.
Runs are interleaved so machine noise hits both. Goal (DESIGN §4): ours ≤ 1.5× the prebuilt agent.
Run: ``python bench/turn_overhead.py [turns]``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from common import ToolThenAnswer, median_ms, timed
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import ScriptedLLM
from workspace_agent.skills.builtin import current_datetime


class NoDocuments:
    """A document store of a program that has none: retrieval finds nothing, without a database."""

    async def space(self, workspace: str) -> None:
        return None


async def compare(label: str, model: BaseChatModel, turns: int) -> None:
    """Median one-tool turn of both graphs on ``model``, interleaved."""
    ours = build_graph(
        checkpointer=InMemorySaver(), records=MemoryRecords(), model=model, documents=NoDocuments()
    )
    clock = StructuredTool.from_function(current_datetime)
    prebuilt = create_react_agent(model, [clock], checkpointer=InMemorySaver())
    context = Context(model="bench")
    message = {"messages": [{"role": "user", "content": "what time is it?"}]}

    def thread() -> dict:
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    for _ in range(20):  # warm up: imports, tokenizer, caches, connections
        await ours.ainvoke(message, thread(), context=context)
        await prebuilt.ainvoke(message, thread())
    ours_s, base_s = [], []
    for _ in range(turns):
        base_s.append(await timed(lambda: prebuilt.ainvoke(message, thread())))
        ours_s.append(await timed(lambda: ours.ainvoke(message, thread(), context=context)))
    base, mine = median_ms(base_s), median_ms(ours_s)
    print(f"one-tool turn, fresh thread, {label}, median of {turns}:")
    print(f"  prebuilt create_react_agent : {base:7.2f} ms (baseline)")
    print(f"  workspace-agent             : {mine:7.2f} ms  ratio {mine / base:.2f}x  (goal <= 1.5x)")


async def main(turns: int) -> None:
    await compare("in-process model (no I/O)", ToolThenAnswer(calls=[("current_datetime", {})]), turns)
    # The same turn through the real ChatOpenAI client and a scripted server on loopback: what a user sees
    # of the orchestration once a model call is an HTTP request (a fast one: no generation at all).
    server = ScriptedLLM().start()
    try:
        http = ChatOpenAI(base_url=server.base_url, api_key="bench", model="bench", max_retries=0)
        await compare("ChatOpenAI to a scripted server on loopback", http, max(turns // 4, 20))
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
