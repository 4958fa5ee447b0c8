"""The agent on the real embedded local model (opt-in marker ``local_model``; CI runs it).

Structure, not wording: the local model must pick the read-only tool through the prompted path, the tool
must run, and a non-empty answer must come back with the route recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI

from tests.support.helpers import decisions_of, user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph

pytestmark = pytest.mark.local_model
CLI = str(Path(sys.executable).with_name("workspace-agent"))
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "workspace"


@pytest.fixture(scope="module")
def local_model():
    from workspace_agent.providers.local.local_model import ensure_local_model_server

    server = ensure_local_model_server()
    return ChatOpenAI(**server.chat_openai_kwargs(), temperature=0, max_tokens=128, stream_chunk_timeout=600)


# `calculate` on the default model, after an earlier exchange and streamed, is tests/integration/
# test_dev_local_model.py's: each question here costs the real model a minute or more of reading.
@pytest.mark.parametrize(
    ("question", "tool"), [("What is the current date and time? Use a tool.", "current_datetime")]
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
    outcomes = [d["outcome"] for d in decisions_of(out, "C10") if isinstance(d["outcome"], dict)]
    ran = [v for outcome in outcomes for v in outcome.values()]
    # a call the model writes again is answered from the first one's result (C10), never run twice
    assert "ok" in ran and set(ran) <= {"ok", "repeat, not run"}, ran
    assert out["stop_reason"] == "answered" and out["messages"][-1].content.strip()


async def test_the_default_model_runs_a_second_call_that_needs_the_first_ones_result(
    saver, workspace, thread, monkeypatch
):
    """Two dependent steps after an earlier exchange: the code cannot be guessed, so it takes a second round.

    As a new user meets it: no model settings, so the embedded default model with its call grammar (a
    program's own model gets no grammar).
    """
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHAT_MODEL", "NATIVE_TOOL_CALLING", "CONTEXT_WINDOW"):
        monkeypatch.delenv(name, raising=False)

    def secret_code(name: str) -> str:
        """Look up the secret code stored under a name."""
        return f"The secret code for {name} is 4817."

    graph = build_graph(checkpointer=saver, tools=[StructuredTool.from_function(secret_code)])
    context = Context(workspace=workspace, auto_approved=["*"])
    await graph.ainvoke(user_message("hello"), thread, context=context)  # a thread with an earlier exchange
    question = "@agent Look up the secret code for blue, then use calculate to multiply that code by 3."
    out = await graph.ainvoke(user_message(question), thread, context=context)
    rounds = [d["outcome"] for d in decisions_of(out, "C1") if d["decided_by"] == "model"]
    ran = [c for m in out["messages"] if m.type == "ai" for c in m.tool_calls]
    assert any(c["name"] == "secret_code" for c in ran), rounds
    products = [c for c in ran if c["name"] == "calculate" and "4817" in c["args"]["expression"]]
    assert products, (
        f"calculate never got the looked-up code: {ran}, answered {out['messages'][-1].content!r}"
    )
    assert rounds[-1] == "answer" and len(rounds) >= 3, f"the model ended the loop after its rounds: {rounds}"
    assert "14451" in out["messages"][-1].content.replace(",", ""), out["messages"][-1].content


def test_the_default_model_lists_the_documents_and_summarizes_the_pricing_sample_through_ask(
    database_url, tmp_path, workspace
):
    """Issue 20: `workspace-agent ask` on the embedded default model (no settings) uses the document tools."""
    env = {**os.environ, "DATABASE_URL": database_url}
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHAT_MODEL", "NATIVE_TOOL_CALLING", "CONTEXT_WINDOW"):
        env.pop(name, None)

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [CLI, "--workspace", workspace, *args], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done

    def ask(question: str) -> dict:
        return json.loads(run("ask", "--json", f"@agent {question}").stdout.strip().splitlines()[-1])

    run("ingest", str(SAMPLES))

    def ran(turn: dict) -> list[str]:
        chosen = [d["outcome"] for d in turn["decisions"] if d["id"] == "C1" and d["decided_by"] == "model"]
        return [name for names in chosen if isinstance(names, list) for name in names]

    listed = ask("Which documents are in this workspace?")
    assert "list_documents" in ran(listed), listed["decisions"]
    assert "pricing" in listed["answer"].lower(), listed["answer"]

    summary = ask("Summarize the pricing document.")
    # The agent is given the passages chat would be given: the pricing sample is two chunks, both found for
    # this message, so a summary written from them is of the whole document. Only then may the model answer
    # without summarize_document; a document it sees part of has to be read through the tool.
    given = {s.get("chunk") for s in summary["sources"] if str(s.get("document", "")).endswith("pricing.md")}
    whole = given == {0, 1}
    assert "summarize_document" in ran(summary) or whole, (summary["decisions"], summary["sources"])
    # the pricing sample's plans, prices and terms (a summary may keep the terms and leave the table out)
    facts = ("Hobby", "Business", "12 EUR", "49 EUR", "per installation", "30 days", "three plans")
    assert any(fact in summary["answer"] for fact in facts), summary["answer"]


async def test_the_default_model_notes_the_computed_figure_or_proposes_no_note(
    saver, workspace, thread, monkeypatch
):
    """Issue 33's CLI question: after "hello", a yearly cost saved as a note holds what calculate returned.

    Before the figure check the 1.5B ran ``calculate("(12 * 12) * 5")``, which returned 720, and proposed
    the note "5 installations of the Team plan cost 60 EUR per year.". Every note it proposes here must hold
    a figure a tool of the turn returned and none that no source holds; a turn that proposes no note passes.
    """
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command

    from tests.integration.test_documents import ingest
    from workspace_agent.core.figures import figures

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHAT_MODEL", "NATIVE_TOOL_CALLING", "CONTEXT_WINDOW"):
        monkeypatch.delenv(name, raising=False)
    await ingest(workspace, *sorted(SAMPLES.iterdir()))
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace)
    await graph.ainvoke(user_message("hello, I'm planning a team setup"), thread, context=context)
    question = "@agent what would 5 installations of that plan cost per year? save it as a note"
    out = await graph.ainvoke(user_message(question), thread, context=context)
    proposed = []
    while "__interrupt__" in out:
        request = out["__interrupt__"][0].value
        proposed += [
            a["args"].get("text", "") for a in request["action_requests"] if a["name"] == "save_note"
        ]
        decisions = [{"type": "approve"} for _ in request["action_requests"]]
        out = await graph.ainvoke(Command(resume={"decisions": decisions}), thread, context=context)
    results = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status != "error"]
    computed = {n for m in results if m.name == "calculate" for n in figures(str(m.content))}
    given = {n for m in results for n in figures(str(m.content))} | figures(question)
    given |= {n for path in SAMPLES.iterdir() for n in figures(path.read_text())}
    for note in proposed:
        stated = figures(note, clock=False)
        assert stated <= given, f"the note {note!r} states a figure no source holds ({sorted(given)})"
        assert not computed or stated & computed, f"the note {note!r} leaves out calculate's {computed}"
