"""Prompted tool calling on the local model: answers from a digest against raw tool messages.

For questions whose right answer is known, the model picks a tool through the prompted path, the tool runs,
and the model answers twice: once from the digest (what ``call_model`` does) and once from the raw tool
messages (the baseline, measured in the same run). Prints tool-choice accuracy and both answer accuracies.
Run: ``python bench/prompted_digest.py`` (needs the ``local`` extra).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from common import median_ms  # noqa: F401 - sets the bench environment
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI

from workspace_agent.providers.local.local_model import ensure_local_model_server
from workspace_agent.providers.prompted import digest, parse_tool_calls
from workspace_agent.providers.prompted.catalog import with_catalog
from workspace_agent.skills.builtin import calculate, current_datetime

QUESTIONS = [
    ("What is 17 * 23?", "calculate", "391"),
    ("What is 1234 * 5678?", "calculate", "7006652"),
    ("How much is 999 + 1001?", "calculate", "2000"),
    ("What is 2 to the power of 10?", "calculate", "1024"),
    ("What is 144 divided by 12?", "calculate", "12"),
    ("What is today's date?", "current_datetime", datetime.now().strftime("%Y")),
    ("What day of the week is it today?", "current_datetime", datetime.now().strftime("%A")),
    ("What year is it right now?", "current_datetime", datetime.now().strftime("%Y")),
]
SYSTEM = "You are a helpful assistant."


async def main() -> None:
    server = ensure_local_model_server()
    model = ChatOpenAI(**server.chat_openai_kwargs(), temperature=0, max_tokens=96)
    tools = [StructuredTool.from_function(calculate), StructuredTool.from_function(current_datetime)]
    by_name = {t.name: t for t in tools}
    picked = from_digest = from_raw = 0
    for question, tool, expected in QUESTIONS:
        base = [SystemMessage(SYSTEM), HumanMessage(question)]
        reply = await model.ainvoke(with_catalog(base, tools))
        calls = parse_tool_calls(str(reply.content), set(by_name))
        if not calls or calls[0]["name"] != tool:
            print(f"  {question!r}: picked {[c['name'] for c in calls] or 'no tool'}")
            continue
        picked += 1
        results = [
            ToolMessage(str(by_name[c["name"]].invoke(c["args"])), tool_call_id=c["id"]) for c in calls
        ]
        exchange = [*base, AIMessage("", tool_calls=calls), *results]
        answer_digest = str((await model.ainvoke(digest(exchange))).content)
        answer_raw = str((await model.ainvoke(exchange)).content)
        ok_digest = expected in answer_digest.replace(",", "")
        ok_raw = expected in answer_raw.replace(",", "")
        from_digest += ok_digest
        from_raw += ok_raw
        print(f"  {question!r}: digest {'ok' if ok_digest else 'wrong'}, raw {'ok' if ok_raw else 'wrong'}")
        if not ok_digest:
            print("     digest:", answer_digest[:200].replace("\n", " "), "| tool:", results[0].content)
    n = len(QUESTIONS)
    print(f"right tool picked through the prompted path: {picked}/{n}")
    print(
        f"right answer after the tool ran: digest {from_digest}/{picked}, "
        f"raw tool messages {from_raw}/{picked} (baseline) -> ratio {from_digest / max(from_raw, 1):.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
