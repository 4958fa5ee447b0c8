"""The agent on the real embedded local model (opt-in marker ``local_model``; CI runs it).

Structure, not wording: the local model must pick the read-only tool through the prompted path, the tool
must run, and a non-empty answer must come back with the route recorded.
"""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from tests.support.helpers import decisions_of, user_message
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.context import Context

pytestmark = pytest.mark.local_model


@pytest.fixture(scope="module")
def local_model():
    from workspace_agent.providers.local_model import ensure_local_model_server

    server = ensure_local_model_server()
    return ChatOpenAI(**server.chat_openai_kwargs(), temperature=0, max_tokens=128, stream_chunk_timeout=600)


@pytest.mark.parametrize(
    ("question", "tool"),
    [
        ("What is the current date and time? Use a tool.", "current_datetime"),
        ("What is 1234 * 5678?", "calculate"),
    ],
)
async def test_the_local_model_calls_the_read_only_tool_through_the_prompted_path(
    local_model, saver, workspace, thread, question, tool
):
    graph = build_graph(checkpointer=saver, model=local_model)
    context = Context(workspace=workspace, native_tool_calling=False, context_window=4096)
    out = await graph.ainvoke(user_message(f"@agent {question}"), thread, context=context)
    assert out["route"] == "agent"
    assert decisions_of(out, "A3")[0]["outcome"] == "agent"
    chosen = decisions_of(out, "C1")[0]
    assert chosen["outcome"] == [tool] and "prompted" in chosen["why"], out["decisions"]
    ran = [d["outcome"] for d in decisions_of(out, "C10") if isinstance(d["outcome"], dict)]
    assert ran and all(v == "ok" for r in ran for v in r.values())
    assert out["stop_reason"] == "answered" and out["messages"][-1].content.strip()
    if tool == "calculate":
        assert "7006652" in out["messages"][-1].content.replace(",", "")
