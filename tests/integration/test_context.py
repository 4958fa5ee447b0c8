"""Conversation context: route (A3), chat log, history (B4) and trimming (B11), end to end."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from psycopg.rows import dict_row

from tests.support.helpers import decisions_of, roles, user_message
from tests.support.tools import make_test_tools
from workspace_agent.core.context import QUERY_REFUSAL, Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.providers.tokens import count
from workspace_agent.samples.scripted_model import text_reply, tool_reply

MARKER = "--prompt truncated for brevity--"


def request_tokens(request: dict) -> int:
    """The request's size by the same estimate trim budgets with."""
    total = 5
    for m in request["messages"]:
        total += 3 + count(m.get("content") or "")
        for call in m.get("tool_calls") or []:
            total += count(call["function"]["name"] + call["function"]["arguments"])
    return total


async def seed(saver, thread: dict, n: int, pad: str = "") -> None:
    """Earlier exchanges in the thread's state, where history is read from (as if n turns had run)."""
    pairs = [(HumanMessage(f"question {i}{pad}"), AIMessage(f"answer {i}{pad}")) for i in range(n)]
    earlier = [m for pair in pairs for m in pair]
    await build_graph(checkpointer=saver).aupdate_state(thread, {"messages": earlier}, as_node="finish")


def history_of(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"][1:-1] if m["role"] in ("user", "assistant")]


@pytest.mark.parametrize("message", ["plain question", "@agent plain question"])
async def test_history_limit_holds_in_chat_and_agent_mode(
    llm, saver, database_url, workspace, thread, message
):
    await seed(saver, thread, 10)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("fine"))
    out = await graph.ainvoke(
        user_message(message), thread, context=Context(workspace=workspace, chat_mode="chat", history_limit=3)
    )
    assert out["route"] == ("agent" if message.startswith("@agent") else "chat")
    assert history_of(llm.requests[0]) == [
        "question 7",
        "answer 7",
        "question 8",
        "answer 8",
        "question 9",
        "answer 9",
    ]
    assert llm.requests[0]["messages"][-1]["content"] == "plain question"
    assert ("tools" in llm.requests[0]) == (out["route"] == "agent")


@pytest.mark.parametrize("chat_mode", ["chat", "automatic"])
async def test_history_limit_zero_means_none(llm, saver, database_url, workspace, thread, chat_mode):
    await seed(saver, thread, 4)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("fine"))
    await graph.ainvoke(
        user_message("q"), thread, context=Context(workspace=workspace, chat_mode=chat_mode, history_limit=0)
    )
    assert roles(llm.requests[0]) == ["system", "user"]


async def test_history_is_never_reversed_when_trimmed(llm, saver, database_url, workspace, thread):
    # AnythingLLM keeps the *oldest* exchanges when its compressor runs after a short retrieval; we keep the
    # newest, in order. A small window forces the history share to bind.
    pad = " and more" * 20
    await seed(saver, thread, 10, pad)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("fine"))
    out = await graph.ainvoke(
        user_message("word " * 700),
        thread,
        context=Context(workspace=workspace, chat_mode="chat", context_window=1200, reply_reserve=100),
    )
    history = history_of(llm.requests[0])
    kept = decisions_of(out, "B11")[0]["outcome"]["history_kept"]
    assert 0 < kept < 10
    expected = [x for i in range(10 - kept, 10) for x in (f"question {i}{pad}", f"answer {i}{pad}")]
    assert history == expected


async def test_a_user_message_larger_than_the_window_is_sent_alone(
    llm, saver, database_url, workspace, thread
):
    await seed(saver, thread, 3)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("fine"))
    window = 2000
    out = await graph.ainvoke(
        user_message("start " + "lorem ipsum dolor " * 2000 + " end"),
        thread,
        context=Context(workspace=workspace, chat_mode="chat", context_window=window),
    )
    request = llm.requests[0]
    assert roles(request) == ["user"]
    content = request["messages"][0]["content"]
    assert MARKER in content and content.startswith("start") and content.endswith("end")
    assert count(content) <= 0.8 * window
    assert decisions_of(out, "B11")[0]["outcome"]["user_alone"] is True


async def test_an_over_share_system_prompt_is_cut_in_the_middle_and_fits(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("fine"))
    window = 2000
    system = "BEGIN " + "rule " * 3000 + " END"
    await graph.ainvoke(
        user_message("hi " * 200),
        thread,
        context=Context(workspace=workspace, chat_mode="chat", context_window=window, system_prompt=system),
    )
    request = llm.requests[0]
    assert MARKER in request["messages"][0]["content"]
    assert request["messages"][0]["content"].startswith("BEGIN")
    assert request_tokens(request) + 600 <= window
    assert request["messages"][-1]["content"] == ("hi " * 200), (
        "the user message within its share is untouched"
    )


async def test_everything_fitting_is_left_untouched(llm, saver, database_url, workspace, thread):
    await seed(saver, thread, 2)
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("fine"))
    out = await graph.ainvoke(
        user_message("hello"), thread, context=Context(workspace=workspace, chat_mode="chat")
    )
    assert decisions_of(out, "B11")[0]["outcome"]["cut"] is False
    assert not any(MARKER in (m.get("content") or "") for m in llm.requests[0]["messages"])


async def test_agent_tool_results_larger_than_the_window_are_cut_but_kept_with_their_calls(
    llm, saver, database_url, workspace, thread
):
    await seed(saver, thread, 5)
    graph = build_graph(checkpointer=saver, tools=make_test_tools())
    window = 3000
    big = [("repeat", {"word": f"w{i}", "times": 2500}) for i in range(3)]
    llm.push(tool_reply(*big), text_reply("summarised"))
    out = await graph.ainvoke(
        user_message("@agent go"),
        thread,
        context=Context(workspace=workspace, auto_approved=["*"], context_window=window),
    )
    assert out["stop_reason"] == "answered"
    request = llm.requests[1]
    assert request_tokens(request) + 600 <= window
    messages = request["messages"]
    asked = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    ids = [c["id"] for c in messages[asked]["tool_calls"]]
    assert sorted(m["tool_call_id"] for m in messages[asked + 1 :]) == sorted(ids)
    assert all(m["role"] == "tool" for m in messages[asked + 1 :])
    assert all(MARKER in m["content"] for m in messages[asked + 1 :])
    assert messages[asked - 1]["content"] == "go"


async def test_at_agent_in_chat_mode_routes_to_the_agent_and_strips_the_prefix(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message("@agent what time is it"), thread, context=Context(workspace=workspace, chat_mode="chat")
    )
    assert out["route"] == "agent"
    assert llm.requests[0]["messages"][-1]["content"] == "what time is it"
    assert "@agent" in decisions_of(out, "A3")[0]["why"]


@pytest.mark.parametrize("text", ["hello @agent", "@Agent hello", " @agent hello"])
async def test_agent_prefix_is_case_sensitive_and_at_position_zero(llm, saver, workspace, thread, text):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message(text), thread, context=Context(workspace=workspace, chat_mode="chat")
    )
    assert out["route"] == "chat"


async def test_automatic_without_native_tool_calling_is_plain_chat(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("ok"))
    out = await graph.ainvoke(
        user_message("hello"), thread, context=Context(workspace=workspace, native_tool_calling=False)
    )
    assert out["route"] == "chat" and "tools" not in llm.requests[0]
    assert "natively" in decisions_of(out, "A3")[0]["why"]


async def test_query_mode_refuses_without_context_and_logs_it_excluded(
    llm, saver, database_url, workspace, thread
):
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(
        user_message("what is in my docs?"), thread, context=Context(workspace=workspace, chat_mode="query")
    )
    assert out["stop_reason"] == "refused" and out["messages"][-1].content == QUERY_REFUSAL
    assert llm.requests == [], "a refusal does not call the model"
    from workspace_agent.checkpoints.db import connection

    async with connection(database_url) as conn:
        conn.row_factory = dict_row
        rows = await (
            await conn.execute("SELECT * FROM chat_log WHERE workspace = %s", (workspace,))
        ).fetchall()
    assert len(rows) == 1 and rows[0]["include"] is False and rows[0]["stop_reason"] == "refused"
    # excluded from later history
    llm.push(text_reply("ok"))
    await graph.ainvoke(user_message("hello"), thread, context=Context(workspace=workspace, chat_mode="chat"))
    assert roles(llm.requests[0]) == ["system", "user"]


async def test_every_turn_is_one_chat_log_row(llm, saver, database_url, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(tool_reply(("calculate", {"expression": "1+1"})), text_reply("two"))
    await graph.ainvoke(
        user_message("@agent 1+1?"), thread, context=Context(workspace=workspace, user_id="ann")
    )
    from workspace_agent.checkpoints.db import connection

    async with connection(database_url) as conn:
        rows = await (
            await conn.execute("SELECT * FROM chat_log WHERE workspace = %s", (workspace,))
        ).fetchall()
    assert len(rows) == 1
    row = rows[0]
    assert (row["user_id"], row["thread_id"], row["prompt"], row["response"]) == (
        "ann",
        thread["configurable"]["thread_id"],
        "1+1?",
        "two",
    )
    assert (row["route"], row["stop_reason"], row["include"], row["memory_processed_at"]) == (
        "agent",
        "answered",
        True,
        None,
    )
    assert json.loads(json.dumps(row["sources"])) == [] and row["created_at"] is not None


async def test_system_prompt_variables_are_filled(llm, saver, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("ok"))
    await graph.ainvoke(
        user_message("hi"),
        thread,
        context=Context(
            workspace=workspace,
            user_id="bob",
            chat_mode="chat",
            system_prompt="{workspace}|{user_id}|{date}|{weekday}|{datetime}",
        ),
    )
    ws, user, date, weekday, stamp = llm.requests[0]["messages"][0]["content"].split("|")
    now = dt.datetime.fromisoformat(stamp)
    assert (ws, user) == (workspace, "bob") and weekday == now.strftime("%A")
    assert date == f"{now:%B} {now.day}, {now.year}", "AnythingLLM's {date}: the month by name"


def test_a_negative_history_limit_is_a_clear_config_error():
    with pytest.raises(ValueError, match="'history_limit' must be from 0 up to 10000, got -1"):
        Context(history_limit=-1)
    with pytest.raises(ValueError, match="unknown context field"):
        Context.from_mapping({"histroy_limit": 3})
