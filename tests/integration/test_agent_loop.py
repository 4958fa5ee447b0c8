"""The agent loop end to end: scripted OpenAI-compatible server, embedded PostgreSQL, real ChatOpenAI."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from tests.support.crash import ROOT, crash_mid_tools, run_turn
from tests.support.helpers import approve_edit_reject, decisions_of, roles, three_calls, user_message
from tests.support.tools import make_test_tools, recorded
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def ctx(workspace: str, **kw) -> Context:
    return Context(workspace=workspace, **kw)


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_every_tool_call_of_one_reply_runs_and_reaches_the_model(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    ask = tool_reply(
        ("repeat", {"word": "a", "times": 1}),
        ("repeat", {"word": "b", "times": 2}),
        ("calculate", {"expression": "6*7"}),
    )
    llm.push(ask, text_reply("all done"))
    out = await graph.ainvoke(user_message("go"), thread, context=ctx(workspace, auto_approved=["*"]))
    assert out["stop_reason"] == "answered"
    assert sorted(r["args"]["word"] for r in recorded(record)) == ["a", "b"]
    answers = tool_messages(llm.requests[1])
    assert sorted(m["tool_call_id"] for m in answers) == sorted(c["id"] for c in ask["tool_calls"])
    assert sorted(m["content"] for m in answers) == ["42", "a", "b b"]
    assert roles(llm.requests[1])[-4:] == ["assistant", "tool", "tool", "tool"]


async def test_parallel_calls_take_about_one_call_of_time(llm, saver, workspace, thread, tmp_path):
    # Read from when each call ended, not from a clock bound on the whole turn: run one after another, four
    # calls of a second end at least three seconds apart however busy the machine is; run together, they
    # end within moments of each other.
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(*[("slow", {"seconds": 1.0, "label": str(i)}) for i in range(4)]), text_reply("ok"))
    out = await graph.ainvoke(user_message("go"), thread, context=ctx(workspace, auto_approved=["*"]))
    assert out["stop_reason"] == "answered"
    assert len(tool_messages(llm.requests[1])) == 4
    ended = sorted(r["t"] for r in recorded(record))
    assert len(ended) == 4
    spread = ended[-1] - ended[0]
    assert spread < 1.0, f"4 calls of 1 s ended {spread:.2f} s apart: they did not run in parallel"


async def test_approve_edit_and_reject_in_one_interrupt_resumed_from_a_second_process(
    llm, saver, database_url, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    ask = three_calls()
    ids = [c["id"] for c in ask["tool_calls"]]
    llm.push(ask, text_reply("finished"))
    context = {"workspace": workspace, "auto_approved": []}
    out = await graph.ainvoke(user_message("three"), thread, context=Context(**context))
    request = out["__interrupt__"][0].value
    assert request["type"] == "tool_approval"
    assert [a["tool_call_id"] for a in request["action_requests"]] == ids
    assert all(a["description"] for a in request["action_requests"])
    assert [r["allowed_decisions"] for r in request["review_configs"]] == [["approve", "edit", "reject"]] * 3
    assert recorded(record) == []

    resume = approve_edit_reject(ids)
    proc = subprocess.run(
        run_turn(thread, context, record, "--resume", json.dumps(resume)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["stop_reason"] == "answered" and result["answer"] == "finished"
    runs = recorded(record)
    assert sorted((r["args"]["word"], r["args"]["times"]) for r in runs) == [("w", 3), ("x", 1)]
    assert runs[0]["pid"] != os.getpid()
    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(llm.requests[1])}
    assert answers[ids[0]] == "x" and answers[ids[1]] == "w w w"
    assert "not z" in answers[ids[2]]
    sent_calls = next(m for m in llm.requests[1]["messages"] if m.get("tool_calls"))["tool_calls"]
    assert json.loads(sent_calls[1]["function"]["arguments"]) == {"word": "w", "times": "3"}
    person = [d["outcome"] for d in result["decisions"] if d["id"] == "D3"]
    assert {ids[0]: "approve"} in person and {ids[1]: "edit"} in person and {ids[2]: "reject"} in person


async def test_sigkill_mid_turn_then_resume_runs_only_the_unfinished_call(
    llm, saver, database_url, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    context = {"workspace": workspace, "auto_approved": ["*"]}
    await crash_mid_tools(llm, thread, context, record)

    llm.push(text_reply("recovered"))
    # Resume the crashed run from its last checkpoint; the slow call is capped so the test stays quick.
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record, slow_cap=0.1))
    state = await graph.aget_state(thread)
    assert state.next == ("execute_tool",), "only the unfinished call is still to run"
    out = await graph.ainvoke(None, thread, context=Context(**context))
    labels = [r["args"]["label"] for r in recorded(record)]
    assert sorted(labels[:2]) == ["a", "b"] and labels[2:] == ["c"], labels
    assert out["stop_reason"] == "answered"
    assert len(tool_messages(llm.requests[-1])) == 3


async def test_a_cut_off_tool_call_is_never_executed(llm, saver, workspace, thread, tmp_path):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("repeat", '{"word": "hal'), content="Let me", finish_reason="length"))
    out = await graph.ainvoke(user_message("go"), thread, context=ctx(workspace, auto_approved=["*"]))
    assert out["stop_reason"] == "max_tokens"
    assert out["messages"][-1].content == "Let me"
    assert recorded(record) == [] and len(llm.requests) == 1
    assert decisions_of(out, "G2")[0]["outcome"] == "max_tokens"


async def test_a_complete_tool_call_in_a_length_stop_is_not_executed_either(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("repeat", {"word": "a", "times": 1}), finish_reason="length"))
    out = await graph.ainvoke(user_message("go"), thread, context=ctx(workspace, auto_approved=["*"]))
    assert out["stop_reason"] == "max_tokens" and recorded(record) == []


async def test_terminate_ends_the_session(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("TERMINATE"))
    out = await graph.ainvoke(user_message("@agent stop"), thread, context=ctx(workspace))
    assert out["stop_reason"] == "terminated"
    llm.push(text_reply("terminate"))
    out = await graph.ainvoke(user_message("@agent stop"), thread, context=ctx(workspace))
    assert out["stop_reason"] == "answered"


async def test_max_tool_calls_is_exact_then_the_model_answers_without_tools(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    # 2 calls, then 2 more of which only 1 fits the budget of 3, then the model must answer without tools.
    llm.push(
        tool_reply(("repeat", {"word": "1", "times": 1}), ("repeat", {"word": "2", "times": 1})),
        tool_reply(("repeat", {"word": "3", "times": 1}), ("repeat", {"word": "4", "times": 1})),
        text_reply("summary"),
    )
    out = await graph.ainvoke(
        user_message("go"), thread, context=ctx(workspace, auto_approved=["*"], max_tool_calls=3)
    )
    words = [r["args"]["word"] for r in recorded(record)]
    assert sorted(words[:2]) == ["1", "2"] and words[2:] == ["3"]
    assert out["stop_reason"] == "max_tool_calls"
    assert "tools" not in llm.requests[2], "the last call must offer no tools"
    over = [m for m in tool_messages(llm.requests[2]) if "budget" in m["content"]]
    assert len(over) == 1, "the call over budget is answered, not dropped"


async def test_tool_failures_become_error_messages_and_the_turn_goes_on(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver, tools=make_test_tools())
    llm.push(
        tool_reply(
            ("explode", {"reason": "boom"}),
            ("hang", {}),
            ("nope", {}),
            ("repeat", '{"word": oops'),
            ("repeat", {"word": "a", "times": "many"}),
        ),
        text_reply("coped"),
    )
    started = time.perf_counter()
    out = await graph.ainvoke(
        user_message("go"), thread, context=ctx(workspace, auto_approved=["*"], tool_timeout=1)
    )
    assert time.perf_counter() - started < 10
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "coped"
    answers = [m["content"] for m in tool_messages(llm.requests[1])]
    assert len(answers) == 5
    text = "\n".join(answers)
    assert "exploded: boom" in text
    assert "did not finish within 1 s" in text
    assert "no tool named 'nope'" in text
    assert "not valid JSON" in text
    assert "invalid arguments for repeat" in text and "times" in text


async def test_a_malformed_resume_keeps_the_approval_pending_and_runs_nothing(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    ask = tool_reply(("repeat", {"word": "a", "times": 1}), ("repeat", {"word": "b", "times": 1}))
    llm.push(ask, text_reply("ok"))
    context = ctx(workspace, auto_approved=[])
    await graph.ainvoke(user_message("go"), thread, context=context)
    for bad, expected in [
        ("yes", "resume with"),
        ({"decisions": [{"type": "approve"}]}, "no decision for pending tool call"),
        (
            {"decisions": [{"type": "approve", "tool_call_id": "call_unknown"}, {"type": "approve"}]},
            "no pending tool call",
        ),
        ({"decisions": [{"type": "maybe"}, {"type": "approve"}]}, "type must be one of"),
        (
            {"decisions": [{"type": "edit", "edited_action": {"args": "x"}}, {"type": "approve"}]},
            "an edit needs",
        ),
    ]:
        out = await graph.ainvoke(Command(resume=bad), thread, context=context)
        assert expected in out["__interrupt__"][0].value["error"], bad
        assert recorded(record) == []
    out = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}), thread, context=context
    )
    assert out["stop_reason"] == "answered" and len(recorded(record)) == 2


async def test_always_allow_is_remembered_for_the_workspace_and_user(
    llm, saver, database_url, workspace, thread
):
    graph = build_graph(checkpointer=saver, tools=make_test_tools())
    context = ctx(workspace, auto_approved=[])
    llm.push(tool_reply(("repeat", {"word": "a", "times": 1})), text_reply("one"))
    await graph.ainvoke(user_message("go"), thread, context=context)
    await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve", "always_allow": True}]}), thread, context=context
    )
    assert await PostgresRecords(database_url).is_granted(workspace, "default", "repeat")
    llm.push(tool_reply(("repeat", {"word": "b", "times": 1})), text_reply("two"))
    out = await graph.ainvoke(user_message("again"), thread, context=context)
    assert "__interrupt__" not in out and out["messages"][-1].content == "two"
    assert any(d["decided_by"] == "policy" and "always allow" in d["why"] for d in decisions_of(out, "D3"))
    other = ctx(workspace, user_id="someone-else", auto_approved=[])
    llm.push(tool_reply(("repeat", {"word": "c", "times": 1})), text_reply("three"))
    out = await graph.ainvoke(
        user_message("again"), {"configurable": {"thread_id": "other-" + workspace}}, context=other
    )
    assert "__interrupt__" in out, "a grant is per user"


async def test_side_effecting_builtin_asks_and_read_only_does_not(
    llm, saver, database_url, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("current_datetime", {}), ("save_note", {"text": "buy milk"})), text_reply("noted"))
    out = await graph.ainvoke(user_message("note it"), thread, context=ctx(workspace))
    actions = out["__interrupt__"][0].value["action_requests"]
    assert [a["name"] for a in actions] == ["save_note"]
    out = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), thread, context=ctx(workspace)
    )
    assert await PostgresRecords(database_url).notes(workspace, "default") == ["buy milk"]


async def test_a_new_message_while_approval_is_pending_abandons_the_calls(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("repeat", {"word": "a", "times": 1})))
    out = await graph.ainvoke(user_message("go"), thread, context=ctx(workspace, auto_approved=[]))
    call_id = out["__interrupt__"][0].value["action_requests"][0]["tool_call_id"]
    llm.push(text_reply("fine"))
    # What Agent Chat UI sends when the person types instead of answering the card.
    moved_on = {
        "messages": [
            {"role": "tool", "content": "Successfully handled tool call.", "tool_call_id": call_id},
            {"role": "user", "content": "never mind"},
        ]
    }
    out = await graph.ainvoke(moved_on, thread, context=ctx(workspace, auto_approved=[]))
    assert recorded(record) == []
    assert decisions_of(out, "D3")[0]["outcome"] == {"abandoned": [call_id]}
    assert out["messages"][-1].content == "fine"
    assert not any(isinstance(m, ToolMessage) for m in out["messages"])


async def test_a_call_rejected_in_a_finished_turn_is_not_reported_abandoned_next_turn(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("repeat", {"word": "a", "times": 1})), text_reply("as you wish"))
    context = ctx(workspace, auto_approved=[])
    await graph.ainvoke(user_message("go"), thread, context=context)
    reject = {"decisions": [{"type": "reject", "message": "no"}]}
    await graph.ainvoke(Command(resume=reject), thread, context=context)
    llm.push(text_reply("next"))
    out = await graph.ainvoke(user_message("something else"), thread, context=context)
    assert decisions_of(out, "D3") == [], "the rejected call was settled in its own turn"
    assert [m.content for m in out["messages"]] == ["go", "as you wish", "something else", "next"]


async def test_state_holds_the_newest_history_limit_exchanges_then_the_running_turn(
    llm, saver, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    for i in range(4):
        llm.push(text_reply(f"answer {i}"))
        out = await graph.ainvoke(
            user_message(f"question {i}"), thread, context=ctx(workspace, history_limit=2)
        )
    shown = [m.content for m in out["messages"]]
    assert shown == ["question 1", "answer 1", "question 2", "answer 2", "question 3", "answer 3"]
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == shown[:-1]


async def test_messages_stream_token_by_token(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("one two three four"))
    pieces = []
    async for chunk, meta in graph.astream(
        user_message("hi"), thread, context=ctx(workspace), stream_mode="messages"
    ):
        if meta["langgraph_node"] == "call_model" and chunk.content:
            pieces.append(chunk.content)
    assert len(pieces) >= 4 and "".join(pieces) == "one two three four"


async def test_content_blocks_are_read_as_text(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("ok"))
    blocks = [{"type": "text", "text": "@agent what"}, {"type": "text", "text": "time is it"}]
    out = await graph.ainvoke(user_message(blocks), thread, context=ctx(workspace, chat_mode="chat"))
    assert out["route"] == "agent"
    assert llm.requests[0]["messages"][-1]["content"] == "what\ntime is it"


@pytest.mark.parametrize("text", ["", "   "])
async def test_an_empty_message_is_a_clear_error(llm, saver, workspace, thread, text):
    graph = build_graph(checkpointer=saver)
    with pytest.raises(ValueError, match="empty"):
        await graph.ainvoke(user_message(text), thread, context=ctx(workspace))
    assert llm.requests == []


async def test_a_failing_model_loses_nothing(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("first"))
    await graph.ainvoke(user_message("one"), thread, context=ctx(workspace))
    llm.push({"status": 500, "content": "upstream down"}, {"status": 500, "content": "upstream down"})
    with pytest.raises(Exception, match="upstream down"):
        await graph.ainvoke(user_message("two"), thread, context=ctx(workspace))
    llm.push(text_reply("back"))
    out = await graph.ainvoke(None, thread, context=ctx(workspace))
    assert out["messages"][-1].content == "back"
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["one", "first", "two"]
    assert isinstance(out["messages"][-1], AIMessage)


async def test_an_oversized_message_is_a_clear_error_and_the_thread_goes_on(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    with pytest.raises(ValueError, match="the limit is 1000000"):
        await graph.ainvoke(user_message("x" * 1_000_001), thread, context=ctx(workspace))
    assert llm.requests == []
    llm.push(text_reply("still here"))
    out = await graph.ainvoke(user_message("small"), thread, context=ctx(workspace))
    assert out["messages"][-1].content == "still here"


async def test_sqlite_and_memory_savers_hold_an_interrupt_across_a_restart(
    llm, database_url, workspace, tmp_path
):
    from workspace_agent.checkpoints.savers import memory_saver, sqlite_saver

    path = str(tmp_path / "threads.sqlite")
    config = {"configurable": {"thread_id": "sqlite-thread"}}
    llm.push(tool_reply(("save_note", {"text": "kept in sqlite"})), text_reply("noted"))
    async with sqlite_saver(path) as saver:
        out = await build_graph(checkpointer=saver).ainvoke(user_message("n"), config, context=ctx(workspace))
        assert "__interrupt__" in out
    async with sqlite_saver(path) as saver:  # a new process would open the file the same way
        out = await build_graph(checkpointer=saver).ainvoke(
            Command(resume={"decisions": [{"type": "approve"}]}), config, context=ctx(workspace)
        )
    assert out["messages"][-1].content == "noted"
    assert await PostgresRecords(database_url).notes(workspace, "default") == ["kept in sqlite"]

    graph = build_graph(checkpointer=memory_saver())
    llm.push(text_reply("in memory"))
    out = await graph.ainvoke(user_message("m"), config, context=ctx(workspace))
    assert out["messages"][-1].content == "in memory"
