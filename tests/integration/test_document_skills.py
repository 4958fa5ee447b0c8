"""Issue 20 items 1 and 5: list and summarize documents; a workspace chooses its tools, a run narrows them.

Through the real graph: the scripted OpenAI-compatible server behind ``ChatOpenAI``, the embedded PostgreSQL,
and (for the rules a client meets) ``langgraph dev`` through ``langgraph_sdk``.
"""

from __future__ import annotations

import math

import httpx
import pytest
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.support.helpers import decisions_of, user_message
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.providers.tokens import count
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.documents import index_document
from workspace_agent.skills.loaders import content_hash
from workspace_agent.skills.summaries import SECTION_SHARE

SHORT = "# Pricing\n\nThe starter plan costs 12 euros a month; the team plan costs 40."
#: A document of several sections of a 2048-token window (sections of 45 %: 921 tokens).
LONG = "\n\n".join(
    f"Section {i}: the harbour fee for berth {i} is {100 + i} euros. " + "Tides vary. " * 300
    for i in range(6)
)


SECTIONS = math.ceil(count(LONG) / int(2048 * SECTION_SHARE))


@pytest.fixture
def embed(monkeypatch, llm):
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


async def add(workspace: str, title: str, text: str) -> int:
    doc, _ = await index_document(
        DocumentStore(),
        workspace,
        source=f"/docs/{title}",
        title=title,
        text=text,
        digest=content_hash(text.encode()),
    )
    return doc.id


def tool_results(out: dict) -> list[str]:
    return [str(m.content) for m in out["messages"] if m.type == "tool"]


async def test_list_documents_names_each_with_a_line_of_what_it_is(embed, saver, workspace, thread):
    await add(workspace, "pricing.md", SHORT)
    await add(workspace, "harbour.txt", LONG)
    graph = build_graph(checkpointer=saver)
    llm = embed
    llm.push(tool_reply(("list_documents", {})), text_reply("two documents"))
    out = await graph.ainvoke(
        user_message("@agent what documents are there?"), thread, context=Context(workspace=workspace)
    )
    [listing] = tool_results(out)
    assert "pricing.md" in listing and "Pricing" in listing and "harbour.txt" in listing
    assert "Section 0: the harbour fee" in listing
    assert not decisions_of(out, "D3") or all(d["decided_by"] == "policy" for d in decisions_of(out, "D3"))


async def test_a_short_document_is_given_whole_and_an_unknown_name_gets_the_list(
    embed, saver, workspace, thread
):
    await add(workspace, "pricing.md", SHORT)
    graph = build_graph(checkpointer=saver)
    embed.push(
        tool_reply(
            ("summarize_document", {"name": "the Pricing document"}), ("summarize_document", {"name": "menu"})
        ),
        text_reply("12 euros"),
    )
    out = await graph.ainvoke(
        user_message("@agent summarize the pricing"), thread, context=Context(workspace=workspace)
    )
    whole, unknown = tool_results(out)
    assert "pricing.md is short enough to read whole" in whole and "12 euros a month" in whole
    assert "No document is named 'menu'" in unknown and "'pricing.md'" in unknown
    assert len(embed.requests) == 2, "a document that fits is not summarized by the model"


async def start_long_summary(llm, saver, workspace, thread) -> tuple:
    await add(workspace, "harbour.txt", LONG)
    graph = build_graph(checkpointer=saver)
    llm.push(
        tool_reply(("summarize_document", {"name": "harbour"})),
        *[text_reply(f"- berth {i}: {100 + i} euros") for i in range(3)],
    )
    context = Context(workspace=workspace, context_window=2048)
    await graph.ainvoke(user_message("@agent summarize harbour.txt"), thread, context=context)
    return graph, context


async def test_a_long_document_is_summarized_by_sections_and_asks_after_three(
    embed, saver, workspace, thread
):
    graph, context = await start_long_summary(embed, saver, workspace, thread)
    state = await graph.aget_state(thread)
    [pending] = state.interrupts
    [action] = pending.value["action_requests"]
    assert (
        action["name"] == "summarize_document"
        and action["description"] == f"{SECTIONS - 3} section(s) left: continue?"
    )
    sections = [r for r in embed.requests if "Section " in r["messages"][-1]["content"]]
    assert len(sections) == 3, "three sections read before asking"
    assert "berth 1: 101" in sections[2]["messages"][-1]["content"], "key points are carried forward"

    # a resume that is neither approve nor reject asks again, with why
    await graph.ainvoke(Command(resume={"decisions": [{"type": "maybe"}]}), thread, context=context)
    [again] = (await graph.aget_state(thread)).interrupts
    assert "approve or reject" in again.value["error"]

    before = len(embed.requests)
    embed.push(*[text_reply(f"- berth {i}: {100 + i} euros") for i in range(3, SECTIONS)], text_reply("done"))
    out = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), thread, context=context)
    assert len(embed.requests) - before == SECTIONS - 2, "the three summarized sections were not read again"
    [result] = tool_results(out)
    assert f"all {SECTIONS} sections" in result and f"berth {SECTIONS - 1}: {99 + SECTIONS}" in result
    assert out["messages"][-1].content == "done"


async def test_a_reject_returns_the_summary_so_far(embed, saver, workspace, thread):
    graph, context = await start_long_summary(embed, saver, workspace, thread)
    embed.push(text_reply("stopped"))
    out = await graph.ainvoke(Command(resume={"decisions": [{"type": "reject"}]}), thread, context=context)
    [result] = tool_results(out)
    assert f"sections 1-3 of {SECTIONS}" in result and "berth 2: 102" in result


async def test_a_workspace_offers_only_the_tools_it_chose(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("save_note", {"text": "x"}), ("calculate", {"expression": "2*3"})), text_reply("6"))
    context = Context(workspace=workspace, tools=["calculate", "current_*"])
    out = await graph.ainvoke(user_message("@agent 2*3, and note it"), thread, context=context)
    offered = sorted(t["function"]["name"] for t in llm.requests[0]["tools"])
    assert offered == ["calculate", "current_datetime"]
    refused, six = tool_results(out)
    assert "does not offer the tool 'save_note'" in refused and six == "6"
    [record] = [d for d in decisions_of(out, "D3") if "not chosen" in str(d["outcome"])]
    assert record["decided_by"] == "policy"
    assert await PostgresRecords().notes(workspace, "default") == [], "the unchosen tool did not run"


async def test_a_run_narrows_the_assistants_tools_and_cannot_widen_them(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    assistant = await client.assistants.create(
        "agent", context={"workspace": workspace, "tools": ["calculate", "current_datetime"]}
    )
    thread = await client.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as widened:
        await client.runs.wait(
            thread["thread_id"],
            assistant["assistant_id"],
            input=user_message("@agent hi"),
            context={"tools": ["*"]},
        )
    assert widened.value.response.status_code == 403
    with pytest.raises(httpx.HTTPStatusError) as on_assistant:
        await client.assistants.create(
            "agent", context={"workspace": workspace, "without_tools": ["calculate"]}
        )
    assert on_assistant.value.response.status_code in (403, 422)

    llm.push(text_reply("hello"))
    await client.runs.wait(
        thread["thread_id"],
        assistant["assistant_id"],
        input=user_message("@agent hi"),
        context={"without_tools": ["calculate"]},
    )
    assert [t["function"]["name"] for t in llm.requests[-1]["tools"]] == ["current_datetime"]
