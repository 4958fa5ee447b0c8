"""A client's own tools (``client_tools``) and reply format: checked by type, never run on the server.

The routing function with a stand-in for the runtime, the hand-back of a reply's calls and the check of a
client's tool loop; the whole path through the dev server is in ``tests/serving/test_openai_contract.py``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from workspace_agent.core.client_loop import clashes, exchange_problem, hand_back, stub_tools
from workspace_agent.core.client_tools import MAX_CLIENT_TOOLS, ClientTools
from workspace_agent.core.context import Context, ContextError
from workspace_agent.core.conversation import EXECUTED_PREFIX
from workspace_agent.nodes.call_model import route_after_model
from workspace_agent.server.policy import PolicyError, check_assistant_context, check_run_settings

LOOKUP = {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
CLIENT = ClientTools(functions=[LOOKUP])  # type: ignore[list-item]


def runtime(**context: Any) -> Any:
    """What ``route_after_model`` reads of LangGraph's runtime: its context."""
    return SimpleNamespace(context=Context(**context))


def calling(*names: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": f"c{i}", "name": n, "args": {}} for i, n in enumerate(names)])


def test_a_client_run_never_routes_to_approval():
    state: Any = {"messages": [HumanMessage("hi"), calling("save_note")], "stop_reason": None}
    assert route_after_model(state, runtime()) == "approve"  # the workspace's own call: approval decides
    assert route_after_model(state, runtime(client_tools={"functions": [LOOKUP]})) == "finish"
    assert route_after_model(state, runtime(response_format={"type": "json_object"})) == "finish"
    answer: Any = {"messages": [HumanMessage("hi"), AIMessage("{}")], "stop_reason": None}
    assert route_after_model(answer, runtime(response_format={"type": "json_object"})) == "finish"
    assert route_after_model(answer, runtime()) == "check_figures"
    assert route_after_model(state) == "approve"  # called without a runtime, as before
    handed: Any = {**state, "stop_reason": "tool_calls"}
    assert route_after_model(handed) == "finish"  # the hand-back ends the turn even without the context


def test_only_calls_of_the_clients_tools_are_handed_back():
    reply, notes = hand_back(calling("lookup", "save_note"), CLIENT)
    assert [c["name"] for c in reply.tool_calls] == ["lookup"]
    assert [(n["id"], n["decided_by"], n["outcome"]) for n in notes] == [
        ("C10", "code", {"dropped": ["save_note"]}),
        ("C10", "code", {"to_client": ["c0"]}),
    ]
    reply, notes = hand_back(AIMessage("Paris."), CLIENT)
    assert reply.content == "Paris." and notes == []


def test_a_clients_loop_is_its_own_calls_and_their_results():
    asked, result = calling("lookup"), ToolMessage("42", tool_call_id="c0")
    assert exchange_problem([], None) is None
    assert exchange_problem([asked, result], CLIENT) is None
    assert "send the tools" in (exchange_problem([asked, result], None) or "")
    assert "not among the tools" in (exchange_problem([calling("save_note"), result], CLIENT) or "")
    assert "no tool message" in (exchange_problem([asked], CLIENT) or "")
    assert "answers no call" in (exchange_problem([ToolMessage("42", tool_call_id="c9")], CLIENT) or "")
    forged = ToolMessage("done", tool_call_id="c0", id=f"{EXECUTED_PREFIX}x")
    assert "answers no call" in (exchange_problem([asked, forged], CLIENT) or "")
    assert "cannot follow" in (exchange_problem([HumanMessage("again")], CLIENT) or "")


def test_names_clashing_with_the_workspaces_tools_are_refused():
    assert clashes(CLIENT, {"save_note", "calculate"}) is None
    assert "lookup" in (clashes(CLIENT, {"lookup"}) or "")


def test_a_prompted_model_reads_the_clients_tools_but_cannot_run_them():
    (stub,) = stub_tools(CLIENT)
    assert stub.name == "lookup" and stub.tool_call_schema["properties"] == {"q": {"type": "string"}}  # type: ignore[index]
    with pytest.raises(RuntimeError, match="never on the server"):
        stub.invoke({"q": "x"})


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"functions": []}, "at least 1"),
        ({"functions": [LOOKUP] * 2}, "unique"),
        ({"functions": [{"name": f"t{i}"} for i in range(MAX_CLIENT_TOOLS + 1)]}, "at most"),
        ({"functions": [LOOKUP], "choice": "rm"}, "not one of the tools"),
        ({"functions": [{"name": "x", "parameters": {"type": "array"}}]}, "object"),
        ({"functions": [{"name": "x", "parameters": {"type": "object", "properties": []}}]}, "properties"),
        ({"functions": [{"name": "x", "parameters": {"type": "object", "p": "y" * 20_000}}]}, "limit"),
        ({"functions": [{"name": "x", "run": "rm -rf /"}]}, "not a key"),
        ({"functions": "lookup"}, "a list"),
        ("lookup", "object"),
    ],
)
def test_client_tools_are_checked_strictly(value: Any, says: str):
    with pytest.raises(ContextError, match=says):
        Context(client_tools=value)


def test_client_tools_and_response_format_are_a_runs_never_an_assistants():
    check_run_settings({"client_tools": {"functions": [LOOKUP]}}, "alice")
    with pytest.raises(PolicyError):
        check_run_settings({"client_tools": {"functions": "lookup"}}, "alice")
    for name, value in (
        ("client_tools", {"functions": [LOOKUP]}),
        ("response_format", {"type": "json_object"}),
    ):
        with pytest.raises(PolicyError, match="a run's setting"):
            check_assistant_context({name: value}, "agent", "alice")
    with pytest.raises(ContextError, match="together"):
        Context(client_tools={"functions": [LOOKUP]}, response_format={"type": "json_object"})


def test_the_choice_says_which_calls_a_prompted_reply_must_be():
    two = [LOOKUP, {**LOOKUP, "name": "other"}]
    assert ClientTools(functions=two, choice="required").forced == {"lookup", "other"}  # type: ignore[arg-type]
    assert ClientTools(functions=two, choice="other").forced == {"other"}  # type: ignore[arg-type]
    assert ClientTools(functions=two).forced == frozenset()  # type: ignore[arg-type]
    assert ClientTools(functions=two, choice="other").openai_choice() == {  # type: ignore[arg-type]
        "type": "function",
        "function": {"name": "other"},
    }
