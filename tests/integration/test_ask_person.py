"""Issue 36, item 2: clarifying questions. The agent asks the person, the turn pauses, the answer goes on.

The model calls the built-in ``ask_person(question, choices)``; the turn pauses on an interrupt of its own
kind (``type: "question"``, not the approval card), the person's answer comes back with
``Command(resume=...)`` and reaches the model as the call's result. A bad answer asks the same question
again, naming the fault; ``clarifying_questions: false`` keeps the tool from the model. The scripted model
speaks through the real ``ChatOpenAI`` path.
"""

from __future__ import annotations

from langgraph.types import Command

from tests.support.helpers import decisions_of, user_message
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply

CITIES = {"question": "Which office should the trip go to?", "choices": ["Lisbon", "Porto"]}


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


async def test_a_question_pauses_the_turn_and_the_answer_is_the_result(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("ask_person", CITIES)), text_reply("Booked for Lisbon."))
    context = Context(workspace=workspace)
    out = await graph.ainvoke(user_message("@agent book my trip"), thread, context=context)
    assert "ask_person" in offered(llm.requests[0])
    asked = out["__interrupt__"][0].value
    call_id = asked["tool_call_id"]
    assert asked == {"type": "question", "tool_call_id": call_id, **CITIES}

    for bad, says in [({"answer": "Madrid"}, "one of: Lisbon, Porto"), (42, "text"), ("  ", "empty")]:
        again = await graph.ainvoke(Command(resume=bad), thread, context=context)
        value = again["__interrupt__"][0].value
        assert value["type"] == "question" and says in value["error"], value
        assert value["tool_call_id"] == call_id, "the same question, asked again"

    out = await graph.ainvoke(Command(resume={"answer": " lisbon "}), thread, context=context)
    assert out["messages"][-1].content == "Booked for Lisbon."
    assert tool_results(llm.requests[-1]) == ["Lisbon"], "the answer, as the choice is written"
    q1 = decisions_of(out, "Q1")
    assert q1 and q1[0]["outcome"] == {call_id: "answered"} and q1[0]["decided_by"] == "person"
    assert not decisions_of(out, "D3"), "a question is not an approval"


async def test_a_question_comes_before_the_approval_card_of_the_same_reply(
    llm, saver, database_url, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    free = {"question": "What should the note say?"}
    llm.push(tool_reply(("ask_person", free), ("save_note", {"text": "call the bank"})), text_reply("Done."))
    context = Context(workspace=workspace)
    out = await graph.ainvoke(user_message("@agent take a note"), thread, context=context)
    assert out["__interrupt__"][0].value["type"] == "question"
    out = await graph.ainvoke(Command(resume="Call the bank at nine."), thread, context=context)
    card = out["__interrupt__"][0].value
    assert card["type"] == "tool_approval" and [a["name"] for a in card["action_requests"]] == ["save_note"]
    out = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), thread, context=context)
    assert out["messages"][-1].content == "Done."
    assert tool_results(llm.requests[-1])[0] == "Call the bank at nine."
    assert await PostgresRecords(database_url).notes(workspace, "default") == ["call the bank"]


async def test_switched_off_the_tool_is_neither_offered_nor_run(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("ask_person", CITIES)), text_reply("I will pick Lisbon."))
    context = Context(workspace=workspace, clarifying_questions=False)
    out = await graph.ainvoke(user_message("@agent book my trip"), thread, context=context)
    assert "ask_person" not in offered(llm.requests[0])
    assert "__interrupt__" not in out and out["messages"][-1].content == "I will pick Lisbon."
    assert "Not run" in tool_results(llm.requests[-1])[0]
