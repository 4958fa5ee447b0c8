"""The prompted agent loop belongs to the model: dependent rounds, repeats, the budget, streamed answers.

Through the scripted OpenAI-compatible server and the real ``ChatOpenAI`` path, in prompted mode (the
embedded model's path): the model writes its calls as JSON text and reads each round's results as a digest.
"""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool

from tests.integration.test_documents import ingest
from tests.support.helpers import decisions_of, user_message
from tests.support.tools import recorded
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.core.context import Context
from workspace_agent.core.prompts import ASK_ANSWER, ASK_NEXT_STEP, NAMED_UNUSED, REMINDER, REPEATED
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply

VALUES = {"alpha": "7341", "beta": "1002"}


def ran(record: Path, tool: str, args: dict) -> None:
    """Write down a tool's run, as ``tests.support.tools.recorded`` reads it."""
    with record.open("a") as f:
        f.write(json.dumps({"tool": tool, "args": args}) + "\n")


def key_tools(record: Path) -> list[BaseTool]:
    """``lookup`` finds a key's value; ``record`` keeps a value: the second needs the first's result."""

    def lookup(key: str) -> str:
        """Look up the value stored under a key."""
        ran(record, "lookup", {"key": key})
        return f"{key} = {VALUES.get(key, 'unknown')}"

    def record_value(value: str) -> str:
        """Record a value in the ledger."""
        if not value.strip():
            raise ValueError("there is nothing to record")
        ran(record, "record", {"value": value})
        return f"recorded {value}"

    return [StructuredTool.from_function(lookup), StructuredTool.from_function(record_value, name="record")]


def calls(*pairs: tuple[str, dict]) -> dict:
    """A prompted reply writing these calls as the JSON list the catalog asks for."""
    return text_reply(json.dumps([{"name": n, "arguments": a} for n, a in pairs]))


def prompted(workspace: str, **kw) -> Context:
    """A prompted run offered every tool: these tests are about the loop; the turn's tool choice (C0) has
    its own (test_choose_tools)."""
    return Context(
        workspace=workspace, native_tool_calling=False, auto_approved=["*"], choose_tools=False, **kw
    )


async def streamed_text(graph, text: str, thread: dict, context: Context) -> str:
    """What ``call_model`` streamed to a client during one turn (the ``messages`` stream's text)."""
    streamed = []
    async for message, meta in graph.astream(
        user_message(text), thread, context=context, stream_mode="messages"
    ):
        if meta["langgraph_node"] == "call_model" and message.content:
            streamed.append(message.content)
    return "".join(streamed)


async def alpha_recorded(llm, graph, thread, workspace: str, question: str, answer: str) -> dict:
    """A turn in which the model looks alpha up, records its value (7341), then answers ``answer``."""
    llm.push(calls(("lookup", {"key": "alpha"})), calls(("record", {"value": "7341"})), text_reply(answer))
    return await graph.ainvoke(user_message(question), thread, context=prompted(workspace))


async def test_a_second_dependent_call_runs_and_the_turn_ends_on_the_models_text(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    answer = "The value of alpha is 7341, and it is recorded."
    out = await alpha_recorded(
        llm, graph, thread, workspace, "@agent look up the key alpha, then record its value", answer
    )
    assert [(r["tool"], r["args"]) for r in recorded(record)] == [
        ("lookup", {"key": "alpha"}),
        ("record", {"value": "7341"}),
    ]
    assert out["stop_reason"] == "answered"
    assert out["messages"][-1].content == "The value of alpha is 7341, and it is recorded."
    first, second, third = llm.requests
    for request in (second, third):  # the tools are offered again after every round
        assert "- record:" in request["messages"][0]["content"]
        assert request["messages"][0]["content"] == first["messages"][0]["content"], "the prefix holds"
    assert (
        "lookup" in second["messages"][-1]["content"] and "alpha = 7341" in second["messages"][-1]["content"]
    )
    assert 'record({"value": "7341"}) returned: recorded 7341' in third["messages"][-1]["content"]
    chosen = [d["outcome"] for d in decisions_of(out, "C1") if d["decided_by"] == "model"]
    assert chosen == [["lookup"], ["record"], "answer"]


async def test_the_next_round_hears_which_tools_the_question_names_until_they_have_run(
    llm, saver, workspace, thread, tmp_path
):
    """The 1.5B ran ``calculate`` for "work out 58*17 and store it in a note", then the same call again."""
    graph = build_graph(checkpointer=saver, tools=key_tools(tmp_path / "runs.jsonl"))
    out = await alpha_recorded(
        llm, graph, thread, workspace, "@agent look up the key alpha, then record its value", "Recorded 7341."
    )
    hint = NAMED_UNUSED.format(tools="record")
    first, second, third = (r["messages"][-1]["content"] for r in llm.requests)
    assert hint not in first, "before any result the catalog's rule is enough"
    assert second.endswith(hint + ASK_NEXT_STEP), "lookup ran, record not yet: the ask names it"
    assert hint not in third and third.endswith(ASK_NEXT_STEP), "once record ran, nothing is named"
    [noted] = [d for d in decisions_of(out, "C1") if isinstance(d["outcome"], dict)]
    assert noted["outcome"] == {"named_unused": ["record"]} and "not used in this turn yet" in noted["why"]
    assert out["messages"][-1].content == "Recorded 7341."


async def test_a_call_repeated_in_a_later_round_is_answered_from_its_result_not_run_again(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(
        calls(("lookup", {"key": "beta"})),
        calls(("lookup", {"key": "beta"})),
        text_reply("beta is 1002"),
    )
    out = await graph.ainvoke(user_message("@agent what is beta?"), thread, context=prompted(workspace))
    assert [r["tool"] for r in recorded(record)] == ["lookup"], "the repeat did not run"
    repeat = llm.requests[2]["messages"][-1]["content"]
    assert repeat.count("returned: beta = 1002") == 1, "the repeat's result is read once (repeat_once)"
    assert f'lookup({{"key": "beta"}}) {REPEATED}' in repeat
    [noted] = [d for d in decisions_of(out, "C10") if "repeat, not run" in str(d["outcome"])]
    assert "already ran in this turn" in noted["why"]
    assert out["messages"][-1].content == "beta is 1002"


async def test_after_a_round_of_nothing_but_repeats_the_model_is_asked_for_its_answer(
    llm, saver, workspace, thread, tmp_path
):
    """The 1.5B once repeated a call seven times after its result: one round of repeats is where it stops.

    Without the call grammar (an endpoint that takes none), the repeat is answered from its result (C10).
    """
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(*[calls(("lookup", {"key": "beta"})) for _ in range(2)], text_reply("beta is 1002"))
    out = await graph.ainvoke(
        user_message("@agent what is beta?"), thread, context=prompted(workspace, max_tool_calls=8)
    )
    assert len(recorded(record)) == 1 and len(llm.requests) == 3, "2 calls asked (1 run), then the answer"
    last = llm.requests[-1]
    assert "No more tools can be used" in last["messages"][-1]["content"]
    [withheld] = [d for d in decisions_of(out, "G1") if d["outcome"] == "tools withheld"]
    assert "only repeated calls" in withheld["why"]
    assert out["stop_reason"] != "max_tool_calls" and out["messages"][-1].content == "beta is 1002"


async def test_a_failed_call_repeated_is_given_its_error_again_and_the_model_asked_for_its_answer(
    llm, saver, workspace, thread
):
    """The 1.5B wrote one runaway expression six rounds running, refused the same way each time."""
    graph = build_graph(checkpointer=saver)
    runaway = ("calculate", {"expression": "12 * 12 * 12 *"})
    llm.push(calls(runaway), calls(runaway), text_reply("I could not work that out."))
    out = await graph.ainvoke(
        user_message("@agent what is 12 times 12?"), thread, context=prompted(workspace, max_tool_calls=8)
    )
    ran = [d for d in decisions_of(out, "C10") if isinstance(d["outcome"], dict)]
    assert [list(d["outcome"].values()) for d in ran] == [["error"], ["repeat, not run"]], out["decisions"]
    last = llm.requests[-1]["messages"][-1]["content"]
    assert last.count("not an arithmetic expression") == 1 and REPEATED in last, "its error is read once"
    assert "No more tools can be used" in last, "a round of repeats, failed ones too, asks for the answer"
    assert len(llm.requests) == 3 and out["messages"][-1].content == "I could not work that out."


async def test_under_the_grammar_a_reply_of_repeats_is_asked_again_without_their_tools(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """Asked to compute and note, the 1.5B wrote its ``calculate`` again instead of the note.

    Asked again, only the tools the question names and no call has used stay in the grammar: offered
    every other one, it reached for ``current_datetime`` after a sum. With none of those left, the repeat
    takes the older way: answered from its result, then the answer is asked for.
    """
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(
        calls(("lookup", {"key": "alpha"})),
        calls(("lookup", {"key": "alpha"})),
        calls(("record", {"value": "7341"})),
        text_reply("alpha is 7341; recorded."),
    )
    out = await graph.ainvoke(
        user_message("@agent look up alpha, then record it"), thread, context=prompted(workspace)
    )
    assert [(r["tool"], r["args"]) for r in recorded(record)] == [
        ("lookup", {"key": "alpha"}),
        ("record", {"value": "7341"}),
    ]
    repeated, asked_again = llm.requests[1:3]
    assert asked_again["messages"] == repeated["messages"], "the same prompt: only the reply is asked again"
    assert "call-lookup" in repeated["grammar"] and "call-lookup" not in asked_again["grammar"]
    assert "call-record" in asked_again["grammar"] and asked_again["grammar"].splitlines()[0].endswith(
        "| text"
    )
    [noted] = [
        d
        for d in decisions_of(out, "C1")
        if isinstance(d["outcome"], dict) and "repeat_refused" in d["outcome"]
    ]
    assert noted["outcome"] == {"repeat_refused": ["lookup"]} and "already run in this turn" in noted["why"]
    assert out["messages"][-1].content == "alpha is 7341; recorded."

    llm.reset()  # nothing named is left to call: the repeat is answered from its result (C10)
    llm.push(
        calls(("lookup", {"key": "beta"})), calls(("lookup", {"key": "beta"})), text_reply("beta is 1002")
    )
    out = await graph.ainvoke(user_message("@agent what is beta?"), thread, context=prompted(workspace))
    answer = llm.requests[2]
    assert (
        answer["grammar"].startswith("root ::= text\n")
        and "No more tools" in answer["messages"][-1]["content"]
    )
    assert not [d for d in decisions_of(out, "C1") if "repeat_refused" in str(d["outcome"])]
    assert out["messages"][-1].content == "beta is 1002" and len(llm.requests) == 3

    llm.reset()  # a repeat beside a new call is not refused: the new call runs, the repeat is answered (C10)
    llm.push(
        calls(("lookup", {"key": "beta"})),
        calls(("lookup", {"key": "beta"}), ("lookup", {"key": "alpha"})),
        text_reply("beta is 1002, alpha is 7341"),
    )
    out = await graph.ainvoke(user_message("@agent beta and alpha?"), thread, context=prompted(workspace))
    assert len(llm.requests) == 3 and [r["args"] for r in recorded(record)][-2:] == [
        {"key": "beta"},
        {"key": "alpha"},
    ]


async def test_a_repeat_beside_a_new_call_keeps_the_tools_offered(llm, saver, workspace, thread, tmp_path):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(
        calls(("lookup", {"key": "beta"})),
        calls(("lookup", {"key": "beta"}), ("lookup", {"key": "alpha"})),
        text_reply("beta is 1002, alpha is 7341"),
    )
    out = await graph.ainvoke(user_message("@agent beta and alpha?"), thread, context=prompted(workspace))
    assert [r["args"]["key"] for r in recorded(record)] == ["beta", "alpha"]
    assert not [d for d in decisions_of(out, "G1") if d["outcome"] == "tools withheld"]
    assert "If a part is still to do" in llm.requests[-1]["messages"][-1]["content"]


async def test_a_call_written_after_the_budget_reaches_the_person_as_words_not_json(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(calls(("lookup", {"key": "alpha"})), calls(("record", {"value": "7341"})))
    out = await graph.ainvoke(
        user_message("@agent look up alpha, then record it"),
        thread,
        context=prompted(workspace, max_tool_calls=1),
    )
    answer = out["messages"][-1].content
    assert out["stop_reason"] == "max_tool_calls" and [r["tool"] for r in recorded(record)] == ["lookup"]
    assert '"name"' not in answer and "tool calls are spent" in answer and "alpha = 7341" in answer
    [withheld] = [d for d in decisions_of(out, "G1") if d["outcome"] == "call withheld"]
    assert "not the JSON" in withheld["why"]


async def test_a_call_cut_off_by_the_token_limit_reaches_the_person_as_words_not_json(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """The 1.5B once wrote a timestamp into a ``calculate`` expression until the reply ran out."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    cut = '[{"name": "record", "arguments": {"value": "2026-12-03T08:27:41 2026-12-03T08:27:41 2026-12'
    llm.push(calls(("lookup", {"key": "alpha"})), text_reply(cut, finish_reason="length"))
    out = await graph.ainvoke(
        user_message("@agent look up alpha, then record it"), thread, context=prompted(workspace)
    )
    answer = out["messages"][-1].content
    assert [r["tool"] for r in recorded(record)] == ["lookup"] and out["stop_reason"] == "max_tokens"
    assert '"name"' not in answer and "cut off by the output limit" in answer and "alpha = 7341" in answer
    [withheld] = [d for d in decisions_of(out, "G1") if d["outcome"] == "call withheld"]
    assert "cut off" in withheld["why"]


def clock_tools(record: Path) -> list[BaseTool]:
    """``today`` and ``ring`` take no arguments; ``today`` only reads, as ``current_datetime``."""

    def today() -> str:
        """Today's date."""
        ran(record, "today", {})
        return "2026-12-07 (Monday)"

    def ring() -> str:
        """Ring the office bell."""
        ran(record, "ring", {})
        return "rang"

    return [
        StructuredTool.from_function(today, metadata={"readOnlyHint": True}),
        StructuredTool.from_function(ring),
        *key_tools(record),
    ]


async def test_a_tool_without_arguments_that_answered_is_not_offered_again_in_the_turn(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """The 1.5B called ``current_datetime`` a second time after its result: a round to hear the same date.

    A read-only tool that takes no arguments answers the same within a turn, so once it has, the grammar
    leaves it out; a tool without arguments that acts (ringing twice is two rings) and tools with arguments
    stay. When the turn has no other tool, the next reply is the answer.
    """
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=clock_tools(record))
    llm.push(
        calls(("ring", {}), ("today", {})),  # a write after a lookup would wait for it (held_writes)
        calls(("lookup", {"key": "alpha"})),
        text_reply("It is Monday; alpha is 7341."),
    )
    out = await graph.ainvoke(
        user_message("@agent ring the bell, then tell me the day and alpha"),
        thread,
        context=prompted(workspace),
    )
    first, second, third = (r["grammar"] for r in llm.requests)
    assert "call-today" in first and "call-today" not in second and "call-today" not in third
    assert "call-ring" in second and "call-lookup" in second and second.splitlines()[0].endswith("| text")
    assert "today" in llm.requests[1]["messages"][0]["content"], "still in the catalog: the cached prefix"
    assert sorted(r["tool"] for r in recorded(record)[:2]) == ["ring", "today"]
    assert recorded(record)[2]["tool"] == "lookup"
    [left_out] = [
        d for d in decisions_of(out, "C1") if isinstance(d["outcome"], dict) and "answered" in d["outcome"]
    ][:1]
    assert left_out["outcome"] == {"answered": ["today"]} and "no arguments" in left_out["why"]
    assert out["messages"][-1].content == "It is Monday; alpha is 7341."

    llm.reset()  # offered only the tool that has answered: the next reply is the answer, one round sooner
    llm.push(calls(("today", {})), text_reply("Today is Monday."))
    out = await graph.ainvoke(
        user_message("@agent what day is it?"), thread, context=prompted(workspace, tools=["today"])
    )
    assert len(llm.requests) == 2 and llm.requests[1]["grammar"].startswith("root ::= text\n")
    assert "No more tools can be used" in llm.requests[1]["messages"][-1]["content"]
    [withheld] = [d for d in decisions_of(out, "G1") if d["outcome"] == "tools withheld"]
    assert "take no arguments and have answered" in withheld["why"]
    assert out["messages"][-1].content == "Today is Monday."


async def test_a_spent_budget_asks_for_text_under_a_grammar_that_admits_no_call(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver, tools=key_tools(tmp_path / "runs.jsonl"))
    llm.push(calls(("lookup", {"key": "alpha"})), text_reply("alpha is 7341"))
    out = await graph.ainvoke(
        user_message("@agent what is alpha?"), thread, context=prompted(workspace, max_tool_calls=1)
    )
    last = llm.requests[-1]
    assert last["grammar"].startswith("root ::= text\n") and "call-lookup" not in last["grammar"]
    assert "logprobs" not in last and out["messages"][-1].content == "alpha is 7341"


async def test_a_text_reply_under_the_grammar_streams_in_chunks_and_a_call_reply_does_not(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver, tools=key_tools(tmp_path / "runs.jsonl"))
    answer = "The value of alpha is 7341, as the ledger says."
    llm.push(calls(("lookup", {"key": "alpha"})), text_reply(answer))
    chunks, progress = [], []
    async for mode, data in graph.astream(
        user_message("@agent what is alpha?"),
        thread,
        context=prompted(workspace),
        stream_mode=["messages", "custom"],
    ):
        if mode == "custom":
            progress.append(data["progress"])
        elif data[1]["langgraph_node"] == "call_model":
            chunks.append(data[0])
    texts = [c.content for c in chunks if c.content]
    assert len(texts) > 3 and "".join(texts) == answer, "the answer arrives word by word"
    assert not any("name" in t for t in texts), "the call reply never streams as text"
    assert progress == ["reading", "writing", "tool", "reading", "writing"]
    final = (await graph.aget_state(thread)).values["messages"][-1]
    assert final.content == answer
    assert {c.id for c in chunks if c.content} == {final.id}, (
        "the streamed chunks and the answer are one message"
    )


async def test_a_prose_reply_quoting_a_call_never_streams_its_json(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver, tools=key_tools(tmp_path / "runs.jsonl"))
    call = '[{"name": "lookup", "arguments": {"key": "alpha"}}]'
    quoted = f"You can use the lookup tool. Here is the call:\n```json\n{call}\n```"
    answer = "The value of alpha is 7341."
    llm.push(text_reply(quoted), calls(("lookup", {"key": "alpha"})), text_reply(answer))
    shown = await streamed_text(graph, "@agent what is alpha?", thread, prompted(workspace))
    assert "```" not in shown and "{" not in shown and '"name"' not in shown, shown
    assert shown.startswith("You can use the lookup tool.") and shown.endswith(answer)
    values = (await graph.aget_state(thread)).values
    assert values["messages"][-1].content == answer
    assert [d for d in decisions_of(values, "C1") if d["outcome"] == "described call asked for"]


async def test_a_document_delimiter_copied_into_a_prose_reply_is_never_streamed(
    llm, saver, workspace, thread, monkeypatch
):
    """With history the 1.5B closed an answer with "[END CONTEXT 3]": never streamed, cut from the answer."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)
    answer = "The Team plan costs 12 EUR a month."
    llm.push(text_reply(f"{answer}\n\n[END CONTEXT 3]"))
    shown = await streamed_text(graph, "@agent What does the Team plan cost?", thread, prompted(workspace))
    assert shown.startswith("The Team plan costs") and "CONTEXT" not in shown and "[" not in shown, shown
    values = (await graph.aget_state(thread)).values
    assert values["messages"][-1].content == answer

    header = "<document_metadata>\nsourceDocument: pricing.md\n</document_metadata>\n\n"
    llm.push(text_reply(f"{answer}\n\nThe relevant context is:\n{header}Team: 12 EUR a month."))
    shown = await streamed_text(graph, "@agent And the Team plan's price?", thread, prompted(workspace))
    assert "document_metadata" not in shown and "sourceDocument" not in shown


async def with_a_slot(llm, saver, workspace, thread, record: Path, *replies: dict) -> dict:
    """A turn whose first reply looks alpha up and records it with a slot, ``<lookup>``, for its value."""
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(calls(("lookup", {"key": "alpha"}), ("record", {"value": "<lookup>"})), *replies)
    return await graph.ainvoke(
        user_message("@agent look up alpha, then record its value"), thread, context=prompted(workspace)
    )


async def test_a_call_written_with_a_slot_for_a_result_waits_and_the_next_round_writes_it(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """The 1.5B writes both steps at once, the second with ``<lookup>`` for the value it does not have."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    out = await with_a_slot(
        llm,
        saver,
        workspace,
        thread,
        record,
        calls(("record", {"value": "7341"})),
        text_reply("Recorded 7341."),
    )
    assert [(r["tool"], r["args"]) for r in recorded(record)] == [
        ("lookup", {"key": "alpha"}),
        ("record", {"value": "7341"}),
    ], "the call with a slot did not run; the next round's did"
    first, second, third = (r["grammar"].splitlines()[0] for r in llm.requests)
    assert first.endswith("| text") and third == "root ::= text", "after the asked write, the answer"
    assert not second.endswith("| text"), "the round after a waiting call is written as calls"
    assert "<lookup> stands where a value belongs" in llm.requests[1]["messages"][-1]["content"]
    assert out["messages"][-1].content == "Recorded 7341."


async def test_a_call_written_with_the_same_slot_again_is_not_waited_for_a_second_time(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """Held to calls only, the 1.5B wrote the same slot round after round until the budget was spent."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    again = calls(("record", {"value": "<lookup>"}))
    out = await with_a_slot(llm, saver, workspace, thread, record, again, text_reply("alpha is 7341."))
    assert [r["tool"] for r in recorded(record)] == ["lookup"]
    _, second, third = (r["grammar"].splitlines()[0] for r in llm.requests)
    assert not second.endswith("| text"), "the first time, the waiting call is asked for"
    assert third.endswith("| text"), "written again as it was, it is not forced a second time"
    assert out["messages"][-1].content == "alpha is 7341." and len(llm.requests) == 3


async def test_a_call_that_changes_something_waits_for_the_lookups_written_before_it(
    llm, saver, workspace, thread, database_url, monkeypatch
):
    """The 1.5B writes "compute, then save" as one list, the note holding its own guess of the product."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)
    llm.push(
        calls(("calculate", {"expression": "37*43"}), ("save_note", {"text": "37*43 is 1600"})),
        calls(("save_note", {"text": "37*43 is 1591"})),
        text_reply("Saved: 37*43 is 1591."),
    )
    out = await graph.ainvoke(
        user_message("@agent compute 37*43 and save the result as a note"),
        thread,
        context=prompted(workspace),
    )
    assert await PostgresRecords(database_url).notes(workspace, "default") == ["37*43 is 1591"], (
        "the guessed note never ran; the one written with calculate's result did"
    )
    assert "this call changes something, so it waits" in llm.requests[1]["messages"][-1]["content"]
    assert "returned: 1591" in llm.requests[1]["messages"][-1]["content"]
    second = llm.requests[1]["grammar"]
    assert not second.splitlines()[0].endswith("| text"), "the held call is written again, as a call"
    assert "save_note" in second and "calculate" not in second, "of the tool it chose, only"
    assert out["messages"][-1].content == "Saved: 37*43 is 1591."


async def test_a_call_that_changes_something_runs_at_once_when_nothing_is_looked_up_before_it(
    llm, saver, workspace, thread, database_url, monkeypatch
):
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    graph = build_graph(checkpointer=saver)
    llm.push(
        calls(("save_note", {"text": "buy milk"}), ("calculate", {"expression": "2+2"})),
        text_reply("Saved, and 2+2 is 4."),
    )
    await graph.ainvoke(
        user_message("@agent save a note 'buy milk' and tell me 2+2"), thread, context=prompted(workspace)
    )
    assert await PostgresRecords(database_url).notes(workspace, "default") == ["buy milk"]
    assert len(llm.requests) == 2, "both calls ran in the first round"


async def test_an_answer_that_says_which_tool_to_call_is_asked_for_that_call(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """The 1.5B sometimes writes the step it means to take as advice instead of as a call."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=key_tools(record))
    llm.push(
        text_reply("To find it, you need to call the `lookup` function with the key alpha."),
        calls(("lookup", {"key": "alpha"})),
        text_reply("alpha is 7341"),
    )
    out = await graph.ainvoke(user_message("@agent what is alpha?"), thread, context=prompted(workspace))
    assert [r["tool"] for r in recorded(record)] == ["lookup"]
    asked_again = llm.requests[1]
    assert asked_again["messages"] == llm.requests[0]["messages"], (
        "the same prompt: only the reply is asked again"
    )
    assert not asked_again["grammar"].splitlines()[0].endswith("| text")
    [noted] = [d for d in decisions_of(out, "C1") if d["outcome"] == "described call asked for"]
    assert "lookup" in noted["why"] and out["messages"][-1].content == "alpha is 7341"

    llm.reset()
    llm.push(text_reply("I used the lookup tool earlier; alpha is 7341."))
    out = await graph.ainvoke(user_message("@agent and alpha again?"), thread, context=prompted(workspace))
    assert len(llm.requests) == 1, "naming a tool in passing is an answer"


async def test_document_context_before_the_question_brings_the_reminder_too(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """Between the catalog and the question, a thousand tokens of documents turned the 1.5B to prose too."""
    monkeypatch.setenv(
        "EMBEDDING_MODEL", "scripted-embed"
    )  # the real embeddings client, on the scripted server
    monkeypatch.setenv("DOCUMENT_ROOTS", str(tmp_path))
    doc = tmp_path / "pricing.md"
    doc.write_text("# Pricing\n\nThe Team plan includes 250 checks per installation.\n")
    graph = build_graph(checkpointer=saver)
    assert [a["title"] for a in (await ingest(workspace, doc))["added"]] == ["pricing.md"]
    llm.push(calls(("calculate", {"expression": "4*250"})), text_reply("1000 checks."))
    await graph.ainvoke(
        user_message("@agent How many checks do 4 installations of the Team plan include?"),
        thread,
        context=prompted(workspace, similarity_threshold=0.0),
    )
    first, second = (r["messages"][-1]["content"] for r in llm.requests)
    assert "250 checks per installation" in first and first.endswith(REMINDER), "context came with it"
    assert REMINDER not in second, "after results, the next-step ask"

    llm.reset()  # a question alone, in a fresh thread of an empty workspace: the rule stands right before it
    llm.push(text_reply("Hello!"))
    fresh = {"configurable": {"thread_id": thread["configurable"]["thread_id"] + "-fresh"}}
    await graph.ainvoke(user_message("@agent hello"), fresh, context=prompted(workspace + "-empty"))
    assert not llm.requests[0]["messages"][-1]["content"].endswith(REMINDER)


async def test_after_history_the_reminder_goes_with_the_first_round_only(llm, saver, workspace, thread):
    """Said again after the results, "reply with only the JSON list" drew the 1.5B into repeating its call."""
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("Hello!"))
    await graph.ainvoke(user_message("hello"), thread, context=prompted(workspace))
    llm.push(calls(("calculate", {"expression": "37*43"})), text_reply("1591."))
    await graph.ainvoke(user_message("@agent what is 37*43?"), thread, context=prompted(workspace))
    first, second = (r["messages"][-1]["content"] for r in llm.requests[1:])
    assert first.endswith(REMINDER), "history stands between the catalog and the question"
    assert REMINDER not in second and second.endswith(ASK_NEXT_STEP), "after results, the next-step ask"


async def test_after_the_first_round_the_earlier_exchanges_are_left_out(
    llm, saver, workspace, thread, tmp_path
):
    """The first round reads the history ("my key" is alpha); later rounds read the turn and its results only.

    With the history in every round the 1.5B saved the history's last answer as the note it was asked for.
    """
    graph = build_graph(checkpointer=saver, tools=key_tools(tmp_path / "runs.jsonl"))
    llm.push(text_reply("Noted: your key is alpha."))
    await graph.ainvoke(user_message("My key is alpha."), thread, context=prompted(workspace))
    out = await alpha_recorded(
        llm, graph, thread, workspace, "@agent look up my key, then record its value", "Recorded 7341."
    )
    first, *later = (r["messages"] for r in llm.requests[1:])
    said = [[m["content"] for m in request if m["role"] != "system"] for request in (first, *later)]
    assert said[0][:2] == ["My key is alpha.", "Noted: your key is alpha."]
    assert len(later) == 2
    for request, texts in zip(later, said[1:], strict=True):
        assert request[0] == first[0], "the system prompt and catalog stay: the server's cached prefix"
        assert not set(texts) & {"My key is alpha.", "Noted: your key is alpha."}, "no earlier exchange"
        assert texts[0].startswith("look up my key, then record its value")
    assert [d["outcome"] for d in decisions_of(out, "B4") if d["decided_by"] == "code"][-2:] == [
        "earlier exchanges left out",
        "earlier exchanges left out",
    ]
    assert out["messages"][-1].content == "Recorded 7341."


async def test_a_write_made_from_results_ends_the_work_unless_another_action_is_asked(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """After a note made from a result was saved, the 1.5B wrote the same note again: a round for nothing.

    A write that succeeded after results were in is the last step, so the next reply is the answer. While
    the question asks for an action that has not run (ringing the bell after recording), the tools stay.
    """
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=clock_tools(record))
    answer = "alpha is 7341, and it is recorded."
    out = await alpha_recorded(
        llm, graph, thread, workspace, "@agent look up alpha and record its value", answer
    )
    grammars = [r["grammar"] for r in llm.requests]
    assert len(grammars) == 3 and grammars[2].startswith("root ::= text\n"), "the third reply is the answer"
    asked = llm.requests[2]["messages"][-1]["content"]
    assert asked.endswith(ASK_NEXT_STEP), "the question's ask, not the spent budget's 'give the results'"
    [withheld] = [d for d in decisions_of(out, "G1") if d["outcome"] == "tools withheld"]
    assert "record ran and succeeded" in withheld["why"]
    assert [r["tool"] for r in recorded(record)] == ["lookup", "record"]
    assert out["messages"][-1].content == "alpha is 7341, and it is recorded."

    llm.reset()  # the question asks for a second action: after the write the tools are still offered
    llm.push(
        calls(("lookup", {"key": "beta"})),
        calls(("record", {"value": "1002"})),
        calls(("ring", {})),
        text_reply("beta is 1002; recorded, and the bell rang."),
    )
    out = await graph.ainvoke(
        user_message("@agent look up beta, record its value, then ring the bell"),
        thread,
        context=prompted(workspace),
    )
    grammars = [r["grammar"] for r in llm.requests]
    assert "call-ring" in grammars[2], "ring is still to do"
    assert grammars[3].startswith("root ::= text\n"), "both actions ran: the answer"
    assert [r["tool"] for r in recorded(record)][2:] == ["lookup", "record", "ring"]


async def test_a_write_in_the_first_round_or_one_that_failed_ends_nothing(
    llm, saver, workspace, thread, tmp_path, monkeypatch
):
    """A write before any result may come before what is asked next; a failed one is the model's to judge."""
    monkeypatch.setenv("CALL_GRAMMAR", "true")
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=clock_tools(record))
    llm.push(calls(("ring", {})), calls(("lookup", {"key": "alpha"})), text_reply("Rang; alpha is 7341."))
    out = await graph.ainvoke(
        user_message("@agent ring the bell, then tell me alpha"), thread, context=prompted(workspace)
    )
    assert "call-lookup" in llm.requests[1]["grammar"]
    assert [r["tool"] for r in recorded(record)] == ["ring", "lookup"]
    assert not [d for d in decisions_of(out, "G1") if d["outcome"] == "tools withheld"]

    llm.reset()  # a write the tool refused: the model is offered its tools again
    llm.push(
        calls(("lookup", {"key": "alpha"})),
        calls(("record", {"value": ""})),
        calls(("record", {"value": "7341"})),
        text_reply("Recorded 7341."),
    )
    await graph.ainvoke(
        user_message("@agent look up alpha and record its value"), thread, context=prompted(workspace)
    )
    assert "call-record" in llm.requests[2]["grammar"]
    assert llm.requests[3]["grammar"].startswith("root ::= text\n")


async def test_with_only_calculate_a_made_up_figure_is_refused_once_and_the_model_answers(
    llm, saver, workspace, thread
):
    """Nothing is left to look the figure up with: the next reply is the answer, not another guess."""
    llm.push(
        calls(("calculate", {"expression": "3 * 100"})),
        text_reply("The documents do not give the Team plan's price, so I cannot say what 3 cost."),
    )
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(
        user_message("@agent What do 3 Lanternfish Team installations cost per month?"),
        thread,
        context=prompted(workspace, only_tools=["calculate"]),
    )
    assert out["messages"][-1].content.startswith("The documents do not give the Team plan's price")
    (unsourced,) = decisions_of(out, "G3")[:1]
    assert list(unsourced["outcome"].values()) == [{"unsourced": [100.0]}]
    assert next(d["outcome"] for d in decisions_of(out, "G1")) == "tools withheld"
    answer_ask = llm.requests[1]["messages"][-1]["content"]
    assert "100 is in no tool result" in answer_ask, "the refusal reaches the model in its digest"
    assert answer_ask.endswith(ASK_ANSWER), "asked for the answer, not for the next step"
