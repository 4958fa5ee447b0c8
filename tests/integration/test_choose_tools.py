"""C0 through the real ChatOpenAI path: a prompted turn is offered the tools its message needs, no more.

Offered every tool, the 1.5B ran ``current_datetime`` for "What is the capital of France?" and proposed notes
nobody asked for. What a turn offers is read here where the model reads it: the catalog in the request.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool

from tests.support.helpers import decisions_of, user_message
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply
from workspace_agent.skills.documents import index_document
from workspace_agent.skills.loaders import content_hash

FAQ = Path(__file__).resolve().parents[2] / "samples" / "workspace" / "faq.md"


def in_catalog(request: dict) -> list[str]:
    """The tools the catalog of a prompted request describes (none when it has no catalog)."""
    system = request["messages"][0]["content"] if request["messages"][0]["role"] == "system" else ""
    if "\n\nTools:\n" not in system:
        return []
    return re.findall(r"^- (\w+): ", system.split("\n\nTools:\n", 1)[1], flags=re.MULTILINE)


def prompted(workspace: str, **kw: object) -> Context:
    return Context(workspace=workspace, native_tool_calling=False, **kw)


async def offered_for(llm: Any, graph: Any, thread: dict, workspace: str, text: str) -> list[str]:
    """The tools the catalog of a fresh prompted turn's first request offers (the model answers "ok")."""
    llm.reset()
    llm.push(text_reply("ok"))
    await graph.ainvoke(user_message(text), thread, context=prompted(workspace))
    return in_catalog(llm.requests[0])


async def add_faq(database_url: str, workspace: str) -> None:
    """The sample FAQ in the workspace, chunked and embedded as an ingest does."""
    text = FAQ.read_text()
    await index_document(
        DocumentStore(database_url), workspace, source="faq.md", title="faq.md", text=text,
        digest=content_hash(text.encode()),
    )  # fmt: skip


async def test_a_question_that_needs_no_tool_gets_no_catalog(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("Paris."))
    out = await graph.ainvoke(
        user_message("@agent what is the capital of France?"), thread, context=prompted(workspace)
    )
    assert out["messages"][-1].content == "Paris." and out["stop_reason"] == "answered"
    assert in_catalog(llm.requests[0]) == [] and "Tools:" not in llm.requests[0]["messages"][0]["content"]
    chosen = decisions_of(out, "C0")[0]
    assert chosen["decided_by"] == "code" and chosen["outcome"]["offered"] == []
    assert "save_note" in chosen["outcome"]["left_out"] and "save_note: acts" in chosen["why"]
    assert "current_datetime: not relevant (0." in chosen["why"]


async def test_a_tool_that_acts_is_offered_only_when_the_message_asks_for_it(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("36 EUR."))
    await graph.ainvoke(
        user_message("@agent what do 3 tickets at 12 EUR cost?"), thread, context=prompted(workspace)
    )
    offered = in_catalog(llm.requests[0])
    assert "calculate" in offered, "a question with figures may need arithmetic"
    assert not {"save_note", "save_to_workspace", "fetch_url"} & set(offered), "nothing asked to be saved"

    offered = await offered_for(
        llm, graph, thread, workspace, "@agent what do 3 tickets at 12 EUR cost? save it as a note"
    )
    assert {"calculate", "save_note"} <= set(offered) and "save_to_workspace" not in offered


async def test_a_program_tool_is_asked_for_by_what_its_name_acts_on(llm, saver, workspace, thread):
    filed: list[str] = []

    def create_issue(title: str) -> str:
        """Open an issue in the team's tracker with this title."""
        filed.append(title)
        return "filed"

    tool = StructuredTool.from_function(create_issue)  # no readOnlyHint: it acts
    graph = build_graph(checkpointer=saver, tools=[tool])
    llm.push(text_reply("A joke."))
    await graph.ainvoke(user_message("@agent tell me a joke"), thread, context=prompted(workspace))
    assert "create_issue" not in in_catalog(llm.requests[0])

    llm.reset()
    llm.push(text_reply("Which title?"))
    await graph.ainvoke(
        user_message("@agent open an issue about the broken login"), thread, context=prompted(workspace)
    )
    assert "create_issue" in in_catalog(llm.requests[0]) and filed == []


async def test_choose_tools_false_offers_every_tool_and_approval_still_holds(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    context = prompted(workspace, choose_tools=False)
    llm.push(text_reply('[{"name": "save_note", "arguments": {"text": "Paris"}}]'))
    out = await graph.ainvoke(user_message("@agent what is the capital of France?"), thread, context=context)
    assert {"calculate", "save_note", "current_datetime"} <= set(in_catalog(llm.requests[0]))
    assert decisions_of(out, "C0")[0]["outcome"] == "all"
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "save_note", "still asked first"


async def test_a_native_tool_caller_is_offered_every_tool(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("Paris."))
    context = Context(workspace=workspace, native_tool_calling=True)
    out = await graph.ainvoke(user_message("@agent what is the capital of France?"), thread, context=context)
    sent = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert {"calculate", "save_note"} <= sent
    assert decisions_of(out, "C0")[0]["outcome"] == "all"


async def test_every_round_of_a_turn_keeps_the_turns_tools(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(
        text_reply('[{"name": "calculate", "arguments": {"expression": "3*12"}}]'),
        text_reply("36 EUR."),
    )
    out = await graph.ainvoke(
        user_message("@agent what do 3 tickets at 12 EUR cost?"), thread, context=prompted(workspace)
    )
    first, second = llm.requests
    assert out["messages"][-1].content == "36 EUR."
    assert in_catalog(first) == in_catalog(second) and "save_note" not in in_catalog(second)
    assert len(decisions_of(out, "C0")) == 1, "chosen once per turn"


async def test_at_agent_is_no_word_of_the_search_nor_of_the_tool_choice(
    llm, saver, database_url, workspace, thread
):
    """``@agent`` picks the route; searched for, it matched the sample FAQ's "workspace-agent" (cosine 0.3).

    So every agent turn in the sample workspace was given that passage and offered ``search_documents``.
    The same question about the FAQ, with and without the prefix, still finds it.
    """
    await add_faq(database_url, workspace)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("The Pacific."))
    out = await graph.ainvoke(
        user_message("@agent Which ocean is the largest?"), thread, context=prompted(workspace)
    )
    assert out["sources"] == [] and decisions_of(out, "B8")[0]["outcome"]["chunks"] == 0, out["sources"]
    assert "[CONTEXT 0]" not in str(llm.requests[0]["messages"])
    assert "search_documents" not in in_catalog(llm.requests[0]), decisions_of(out, "C0")[0]["why"]

    llm.reset()
    llm.push(text_reply("A team of four in Ghent."))
    out = await graph.ainvoke(
        user_message("@agent Who makes Lanternfish?"), thread, context=prompted(workspace)
    )
    assert {s["title"] for s in out["sources"]} == {"faq.md"}, "a question about the FAQ still finds it"
    assert "A team of four people in Ghent" in str(llm.requests[0]["messages"])


async def test_a_figure_the_passages_give_in_the_unit_asked_is_looked_up_not_computed(
    llm, saver, database_url, workspace, thread
):
    """The FAQ keeps results "90 days": asked in days, that is a lookup; asked in hours, a conversion."""
    await add_faq(database_url, workspace)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("90 days."))
    out = await graph.ainvoke(
        user_message("@agent How many days does Lanternfish keep check results?"),
        thread,
        context=prompted(workspace),
    )
    chosen = decisions_of(out, "C0")[0]
    assert "calculate" not in in_catalog(llm.requests[0]), chosen["why"]
    assert re.search(r"calculate: [^;]*; asked in days", chosen["why"]), chosen["why"]

    asked_in_hours = "@agent How many hours does Lanternfish keep check results?"
    offered = await offered_for(llm, graph, thread, workspace, asked_in_hours)
    assert "calculate" in offered, "90 days asked in hours is arithmetic"


async def test_a_lookup_the_given_passages_answer_is_offered_no_search_of_them_again(
    llm, saver, database_url, workspace, thread
):
    """Offered only because retrieval found passages, the search would find the same ones again.

    With another tool offered the search stays: it is the first step of a turn that goes on to that tool.
    """
    await add_faq(database_url, workspace)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("A team of four people in Ghent."))
    out = await graph.ainvoke(
        user_message("@agent Who makes Lanternfish?"), thread, context=prompted(workspace)
    )
    chosen = decisions_of(out, "C0")[0]
    assert "A team of four people in Ghent" in str(llm.requests[0]["messages"]), "the passage is given"
    assert in_catalog(llm.requests[0]) == [], chosen["why"]
    assert "the prompt holds those passages" in chosen["why"], chosen["why"]
    assert len(llm.requests) == 1, "one model call: the answer"

    asked_with_a_sum = "@agent Who makes Lanternfish, and what is 4 times 12?"
    offered = await offered_for(llm, graph, thread, workspace, asked_with_a_sum)
    assert {"search_documents", "calculate"} <= set(offered), offered


async def test_calculate_is_offered_for_arithmetic_asked_in_words_not_for_a_close_embedding(
    llm, saver, workspace, thread
):
    """Asked to note today's weekday, nothing to compute: by embedding it sits at 0.42 of calculate."""
    graph = build_graph(checkpointer=saver)
    out_note = await offered_for(llm, graph, thread, workspace, "@agent Make a note of today's weekday.")
    assert "calculate" not in out_note and "save_note" in out_note, out_note
    assert "calculate" in await offered_for(llm, graph, thread, workspace, "@agent What is 17 times 23?")
    in_a_unit = "@agent How many minutes are there in a day?"
    assert "calculate" in await offered_for(llm, graph, thread, workspace, in_a_unit), "a unit asked for"
