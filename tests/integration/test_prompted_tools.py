"""Prompted tool calling through the real ChatOpenAI path: JSON text becomes calls, approval still applies."""

from __future__ import annotations

import json

from langchain_core.tools import StructuredTool
from langgraph.types import Command

from tests.support.helpers import decisions_of, token, user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.providers.tokens import count
from workspace_agent.samples.scripted_model import text_reply


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


async def test_every_call_of_a_reply_runs_and_the_digest_lists_them_all(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    two_blocks = (  # the shape the 0.5B model writes for two things at once (live_parallel_1-0-1)
        '```json\n{"name": "calculate", "arguments": {"expression": "6*7"}}\n```\n'
        '```json\n{"name": "calculate", "arguments": {"expression": "2+3"}}\n```'
    )
    llm.push(text_reply(two_blocks), text_reply("42 and 5"))
    context = Context(workspace=workspace, native_tool_calling=False)
    out = await graph.ainvoke(user_message("@agent what are 6*7 and 2+3?"), thread, context=context)
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "42 and 5"
    digest_text = llm.requests[1]["messages"][-1]["content"]
    assert 'calculate({"expression": "6*7"}) returned: 42' in digest_text
    assert 'calculate({"expression": "2+3"}) returned: 5' in digest_text
    assert decisions_of(out, "C1")[0]["outcome"] == ["calculate", "calculate"]
    assert max_tokens_of(llm.requests[0]) == context.reply_reserve, "a runaway list cannot fill the window"


async def test_a_key_given_twice_goes_back_to_the_model_which_writes_the_calls_again(
    llm, saver, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    doubled = '{"name": "calculate", "arguments": {"expression": "6*7", "expression": "2+3"}}'
    again = '[{"name": "calculate", "arguments": {"expression": "6*7"}}, {"name": "calculate", "arguments": {"expression": "2+3"}}]'  # noqa: E501
    llm.push(text_reply(doubled), text_reply(again), text_reply("42 and 5"))
    context = Context(workspace=workspace, native_tool_calling=False)
    out = await graph.ainvoke(user_message("@agent what are 6*7 and 2+3?"), thread, context=context)
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "42 and 5"
    first_round = llm.requests[1]["messages"]
    assert "Tools:" in first_round[0]["content"], "the catalog is offered again for the repeat"
    assert "'expression' is given more than once" in first_round[-1]["content"]
    ran = [d["outcome"] for d in decisions_of(out, "C10") if isinstance(d["outcome"], dict)]
    assert len(ran) == 2 and all(v == "ok" for r in ran for v in r.values())
    assert "Tools:" in llm.requests[2]["messages"][0]["content"], "the tools are offered after every round"
    assert decisions_of(out, "C1")[-1]["outcome"] == "answer", "and the model ended the loop"


async def test_a_catalog_too_large_for_the_window_is_cut_to_the_relevant_tools_and_recorded(
    llm, saver, workspace, thread
):
    def tool(name: str, description: str) -> StructuredTool:
        schema = {"type": "object", "properties": {"q": {"type": "string", "description": description}}}
        return StructuredTool(name=name, description=description, args_schema=schema, func=lambda **_: "x")

    many = [tool(f"gadget_{i}", f"Polishes gadget {i} with a soft cloth and some wax") for i in range(40)]
    graph = build_graph(checkpointer=saver, tools=many)
    llm.push(text_reply('[{"name": "calculate", "arguments": {"expression": "6*7"}}]'), text_reply("42"))
    context = Context(  # every tool offered (C0 off): the cut under test is the window's
        workspace=workspace, native_tool_calling=False, context_window=2048, choose_tools=False
    )
    out = await graph.ainvoke(user_message("@agent calculate 6*7"), thread, context=context)
    cut = next(d for d in decisions_of(out, "C1") if "left_out" in d["outcome"])
    assert "calculate" in cut["outcome"]["offered"] and len(cut["outcome"]["left_out"]) > 10
    sent = sum(count(m["content"]) + 3 for m in llm.requests[0]["messages"]) + 5
    assert sent + context.reply_reserve <= context.window
    trimmed = decisions_of(out, "B11")[0]
    assert "for the tool catalog" in trimmed["why"]


def max_tokens_of(request: dict) -> int | None:
    return request.get("max_tokens") or request.get("max_completion_tokens")


async def test_a_call_grammar_goes_with_the_catalog_only_when_the_endpoint_takes_one(
    llm, saver, workspace, thread, monkeypatch
):
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, native_tool_calling=False)
    call = text_reply('[{"name": "calculate", "arguments": {"expression": "6*7"}}]')
    llm.push(call, text_reply("42"))
    await graph.ainvoke(user_message("@agent what is 6*7?"), thread, context=context)
    assert not any("grammar" in r for r in llm.requests), "an endpoint is not assumed to be llama.cpp"

    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)  # a graph keeps the model settings it was built with
    llm.reset()
    llm.push(call, text_reply("42"))
    out = await graph.ainvoke(user_message("@agent and 6*7 again?"), thread, context=context)
    first, second = llm.requests
    assert "call-calculate ::=" in first["grammar"] and first["grammar"].startswith("root ::= ")
    assert "call-calculate ::=" in second["grammar"], "after the results the tools are offered again"
    assert out["messages"][-1].content == "42"
    assert "under the call grammar" in decisions_of(out, "C1")[0]["why"]


async def test_a_refused_grammar_is_dropped_recorded_and_the_reply_read_as_free_text(
    llm, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)
    refusal = {"status": 400, "content": "Failed to initialize samplers: failed to parse grammar"}
    call = text_reply('{"name": "calculate", "arguments": {"expression": "6*7"}}')
    llm.push(refusal, call, text_reply("42"))
    context = Context(workspace=workspace, native_tool_calling=False)
    out = await graph.ainvoke(user_message("@agent what is 6*7?"), thread, context=context)
    refused, retried, _ = llm.requests
    assert "grammar" in refused and "grammar" not in retried
    assert out["messages"][-1].content == "42" and out["stop_reason"] == "answered"
    [record] = [d for d in decisions_of(out, "C1") if d["outcome"] == "grammar refused"]
    assert "failed to parse grammar" in record["why"]


async def test_a_call_repeated_with_the_same_arguments_runs_once_and_the_drop_is_recorded(
    llm, saver, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    same = {"name": "calculate", "arguments": {"expression": "133+34"}}
    other = {"name": "calculate", "arguments": {"expression": "2*3"}}
    llm.push(text_reply(json.dumps([same, same, other, same])), text_reply("167 and 6"))
    context = Context(workspace=workspace, native_tool_calling=False)
    out = await graph.ainvoke(user_message("@agent add 133 and 34, and 2 times 3"), thread, context=context)
    ran = [c for m in out["messages"] if m.type == "ai" for c in m.tool_calls]
    assert [c["args"]["expression"] for c in ran] == ["133+34", "2*3"]
    [record] = [d for d in decisions_of(out, "C1") if d["outcome"] == "repeats dropped"]
    assert "2 time(s)" in record["why"]


def closing_tokens(text: str, more: float) -> list[dict]:
    """``text`` as tokens whose last one closes the list, giving a comma instead the chance ``more``."""
    return [token(text[:-1]), token("]", ("]", 1 - more), (",", more))]


async def test_a_list_closed_while_another_call_was_likely_is_reopened_and_both_calls_run(
    llm, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)
    first = '[{"name": "calculate", "arguments": {"expression": "6*7"}}]'
    head = first[:-1] + ","
    went_on = head + ' {"name": "calculate", "arguments": {"expression": "2+3"}}]'
    llm.push(
        {**text_reply(first), "logprobs": closing_tokens(first, 0.2)},
        {**text_reply(went_on), "logprobs": closing_tokens(went_on[len(head) :], 0.001)},
        text_reply("42 and 5"),
    )
    context = Context(workspace=workspace, native_tool_calling=False)
    out = await graph.ainvoke(user_message("@agent what are 6*7 and 2+3?"), thread, context=context)
    asked, reopened, answered = llm.requests
    assert asked["logprobs"] is True and asked["top_logprobs"] > 1
    assert reopened["messages"][-1] == {"role": "assistant", "content": head}, "it goes on from its own list"
    assert reopened["grammar"].startswith('root ::= ws call ( ws "," ws call )')
    assert reopened["messages"][:-1] == asked["messages"]
    ran = [c["args"]["expression"] for m in out["messages"] if m.type == "ai" for c in m.tool_calls]
    assert ran == ["6*7", "2+3"]
    assert not any(m.response_metadata.get("logprobs") for m in out["messages"]), "not kept in the thread"
    assert 'calculate({"expression": "2+3"}) returned: 5' in answered["messages"][-1]["content"]
    [record] = [d for d in decisions_of(out, "C1") if d["outcome"] == "list reopened"]
    assert "0.20" in record["why"] and "1 time(s)" in record["why"]


async def test_a_list_closed_without_doubt_or_a_reopening_cut_off_keeps_the_calls_written(
    llm, saver, workspace, thread, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, native_tool_calling=False)
    first = '[{"name": "calculate", "arguments": {"expression": "6*7"}}]'
    llm.push({**text_reply(first), "logprobs": closing_tokens(first, 0.003)}, text_reply("42"))
    out = await graph.ainvoke(user_message("@agent what is 6*7?"), thread, context=context)
    assert len(llm.requests) == 2 and out["messages"][-1].content == "42", "no reopening below the bar"
    assert not [d for d in decisions_of(out, "C1") if d["outcome"] == "list reopened"]

    llm.reset()
    runaway = first[:-1] + ', {"name": "calculate", "arguments": {"expression": "6*7'
    llm.push(
        {**text_reply(first), "logprobs": closing_tokens(first, 0.5)},
        text_reply(runaway, finish_reason="length"),
        text_reply("42"),
    )
    out = await graph.ainvoke(user_message("@agent and 6*7 again?"), thread, context=context)
    ran = [c["args"]["expression"] for c in out["messages"][-3].tool_calls]
    assert len(llm.requests) == 3 and ran == ["6*7"], "a continuation cut off adds nothing"
    assert out["stop_reason"] == "answered"
