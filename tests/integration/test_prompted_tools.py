"""Prompted tool calling through the real ChatOpenAI path: JSON text becomes calls, approval still applies."""

from __future__ import annotations

import json

from langgraph.types import Command

from tests.support.helpers import decisions_of, user_message
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.context import Context
from workspace_agent.providers.scripted import text_reply


async def test_json_text_is_run_as_tool_calls_and_answered_from_a_digest(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(
        text_reply('```json\n{"name": "calculate", "arguments": {"expression": "6*7"}}\n```'),
        text_reply("42"),
    )
    context = Context(workspace=workspace, native_tool_calling=False)
    out = await graph.ainvoke(user_message("@agent what is 6*7?"), thread, context=context)
    assert out["route"] == "agent" and out["stop_reason"] == "answered"
    first, second = llm.requests
    assert "tools" not in first and "calculate" in first["messages"][0]["content"]
    assert "tools" not in second
    assert 'calculate({"expression": "6*7"}) returned: 42' in second["messages"][-1]["content"]
    assert not any(m["role"] == "tool" for m in second["messages"])
    assert "prompted" in decisions_of(out, "C1")[0]["why"]


async def test_prompted_calls_still_need_approval_and_unknown_names_are_text(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, native_tool_calling=False)
    llm.push(
        text_reply(json.dumps({"name": "save_note", "arguments": {"text": "milk"}})), text_reply("saved")
    )
    out = await graph.ainvoke(user_message("@agent remember milk"), thread, context=context)
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "save_note"
    out = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), thread, context=context
    )
    assert "Rejected by the user: no" in llm.requests[-1]["messages"][-1]["content"]

    llm.push(text_reply('{"name": "format_disk", "arguments": {}}'), text_reply("I cannot do that."))
    out = await graph.ainvoke(user_message("@agent do it"), thread, context=context)
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "I cannot do that."
    assert "Tools:" not in llm.requests[-1]["messages"][0]["content"], "asked again without the tools"
    assert any(d["outcome"] == "no such tool" for d in decisions_of(out, "C1"))


async def test_automatic_mode_without_native_tools_is_plain_chat(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("hello"))
    out = await graph.ainvoke(
        user_message("hi"), thread, context=Context(workspace=workspace, native_tool_calling=False)
    )
    assert out["route"] == "chat" and "Tools:" not in llm.requests[0]["messages"][0]["content"]
