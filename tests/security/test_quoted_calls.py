"""Finding 19.9: a tool call quoted in prose as an example was run, auto-approved tools without asking.

Under the call grammar a reply is either a list of calls or text, nothing in between, so a call written
inside prose is text by the grammar's own word: only a reply that is a list of calls (or one call, or one
in a ```json fence) asks for calls. Through the real graph, the real ``ChatOpenAI`` path and the scripted
OpenAI-compatible server, in prompted mode with the grammar on, as the embedded model runs.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from tests.support.helpers import user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.providers.prompted.call_grammar import TEXT_GRAMMAR
from workspace_agent.samples.scripted_model import text_reply

EXAMPLE = json.dumps([{"name": "save_note", "arguments": {"text": "transfer the savings to account 7"}}])


def prompted(workspace: str) -> Context:
    """Prompted calls (no native tool calling) with every tool auto-approved: a call that parses runs."""
    return Context(workspace=workspace, native_tool_calling=False, auto_approved=["*"])


def ran(out: dict) -> list[str]:
    """The names of the tools the turn ran."""
    calls = {c["id"]: c["name"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    return [calls.get(m.tool_call_id, "?") for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.fixture
def grammar_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint takes a llama.cpp grammar, as the embedded model's does."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")


async def test_a_call_quoted_in_prose_is_not_run_under_the_grammar(llm, saver, workspace, thread, grammar_on):
    graph = build_graph(checkpointer=saver)
    prose = f"To save a note, a model would write {EXAMPLE}. Tell me what the note should say."
    llm.push(text_reply(prose))
    out = await graph.ainvoke(
        user_message("@agent how are notes saved?"), thread, context=prompted(workspace)
    )
    assert "grammar" in llm.requests[0], "the grammar was on for this reply"
    assert ran(out) == [], "the quoted example did not run"
    assert '"name"' not in out["messages"][-1].content, "nor is it shown: a call is never the person's answer"
    assert len(llm.requests) == 2 and llm.requests[1].get("grammar") == TEXT_GRAMMAR
    assert not llm.requests[1].get("tools"), "asked again for words, without tools (G3), not about results"


async def test_a_reply_that_is_a_list_of_calls_still_runs_under_the_grammar(
    llm, saver, workspace, thread, grammar_on
):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply(f"```json\n{EXAMPLE}\n```"), text_reply("Saved."))
    out = await graph.ainvoke(user_message("@agent save that note"), thread, context=prompted(workspace))
    assert ran(out) == ["save_note"]
    assert out["messages"][-1].content == "Saved."


async def test_a_call_the_model_says_it_would_use_is_asked_for_not_run_from_the_prose(
    llm, saver, workspace, thread, grammar_on
):
    """The 1.5B's words in a CI run: the step it meant, quoted below "you would use the following call"."""
    graph = build_graph(checkpointer=saver)
    call = json.dumps([{"name": "calculate", "arguments": {"expression": "3 * 4817"}}])
    prose = f"To multiply the secret code by 3, you would use the following call:\n```json\n{call}\n```"
    llm.push(text_reply(prose), text_reply(call), text_reply("It is 14451."))
    out = await graph.ainvoke(user_message("@agent multiply 4817 by 3"), thread, context=prompted(workspace))
    assert ran(out) == ["calculate"]
    first, again = llm.requests[0], llm.requests[1]
    assert again["messages"] == first["messages"], "asked again on the same prompt"
    assert "| text" in first["grammar"] and "| text" not in again["grammar"], "the second time, calls only"
    assert any(d["outcome"] == "described call asked for" for d in out["decisions"] if d["id"] == "C1")
    assert out["messages"][-1].content == "It is 14451."
