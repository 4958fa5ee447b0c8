"""Run or resume one turn in a separate process, against the PostgreSQL given by ``DATABASE_URL``.

Used by the tests that prove durability: a resume from a second process, and a crash (SIGKILL) mid-turn.
Prints the turn's output as JSON on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from langgraph.types import Command

from tests.support.tools import make_test_tools
from workspace_agent.checkpoints.savers import postgres_saver
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--thread", required=True)
    parser.add_argument("--context", default="{}")
    parser.add_argument("--message")
    parser.add_argument("--resume")
    parser.add_argument("--continue-run", action="store_true")
    parser.add_argument("--record")
    args = parser.parse_args()
    record = Path(args.record) if args.record else None
    async with postgres_saver() as saver:
        graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
        config = {"configurable": {"thread_id": args.thread}}
        context = Context(**json.loads(args.context))
        if args.message is not None:
            payload = {"messages": [{"role": "user", "content": args.message}]}
        elif args.resume is not None:
            payload = Command(resume=json.loads(args.resume))
        else:
            payload = None
        out = await graph.ainvoke(payload, config, context=context)
    print(
        json.dumps(
            {
                "stop_reason": out.get("stop_reason"),
                "interrupt": bool(out.get("__interrupt__")),
                "answer": out["messages"][-1].content if out.get("messages") else None,
                "decisions": out.get("decisions", []),
            },
            default=str,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
