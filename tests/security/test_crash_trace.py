"""Issue 13 item 10: an honest trace after a crash.

A tool that was running when the process died may have done its work; only its result was lost. The trace
must say "interrupted, may have run", never "never run": when the person moves on with a new message, and
when the crashed run is resumed (the call then runs again, which is why tools key their effects by
``tool_call_id``).
"""

from __future__ import annotations

from tests.support.crash import crash_mid_tools
from tests.support.helpers import decisions_of, user_message
from tests.support.tools import make_test_tools
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply


async def test_a_new_message_after_a_crash_records_the_running_call_as_interrupted(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    context = {"workspace": workspace, "auto_approved": ["*"]}
    ids = await crash_mid_tools(llm, thread, context, record)

    llm.push(text_reply("fine"))
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    out = await graph.ainvoke(user_message("never mind"), thread, context=Context(**context))
    trace = [d["outcome"] for d in out["decisions"] if d["id"] in ("D3", "C10")]
    assert not any("abandoned" in o for o in trace if isinstance(o, dict)), f"never run was claimed: {trace}"
    [interrupted] = [o for o in trace if isinstance(o, dict) and "interrupted" in o]
    assert ids[2] in interrupted["interrupted"], "c was running when the process died"
    [note] = [d for d in decisions_of(out, "C10") if "interrupted" in d["outcome"]]
    assert "may have run" in note["why"]


async def test_resuming_a_crashed_run_says_the_call_may_have_run_before(
    llm, saver, workspace, thread, tmp_path
):
    record = tmp_path / "runs.jsonl"
    context = {"workspace": workspace, "auto_approved": ["*"]}
    ids = await crash_mid_tools(llm, thread, context, record)

    llm.push(text_reply("recovered"))
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record, slow_cap=0.1))
    out = await graph.ainvoke(None, thread, context=Context(**context))
    assert out["stop_reason"] == "answered"
    again = [d for d in decisions_of(out, "C10") if isinstance(d["outcome"], dict) and ids[2] in d["outcome"]]
    assert [d["outcome"][ids[2]] for d in again] == ["interrupted, may have run", "ok"], again
    assert "run again" in again[0]["why"]


async def test_an_ordinary_turn_and_an_approval_resume_record_no_interruption(
    llm, saver, workspace, thread, tmp_path
):
    from langgraph.types import Command

    graph = build_graph(checkpointer=saver, tools=make_test_tools(tmp_path / "runs.jsonl"))
    llm.push(tool_reply(("repeat", {"word": "a", "times": 1})), text_reply("done"))
    out = await graph.ainvoke(user_message("go"), thread, context=Context(workspace=workspace))
    assert not any("interrupted" in str(d["outcome"]) for d in out["decisions"])
    llm.push(tool_reply(("repeat", {"word": "b", "times": 1})), text_reply("done"))
    out = await graph.ainvoke(
        user_message("again"), thread, context=Context(workspace=workspace, auto_approved=[])
    )
    out = await graph.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), thread, context=Context(workspace=workspace)
    )
    assert out["stop_reason"] == "answered"
    assert not any("interrupted" in str(d["outcome"]) for d in out["decisions"])


async def test_save_note_run_again_with_its_tool_call_id_saves_one_note(database_url, workspace):
    """How a tool makes itself idempotent: its effect is keyed by the ``tool_call_id`` of the call."""
    from workspace_agent.checkpoints.chatlog import PostgresRecords
    from workspace_agent.skills.builtin import builtin_tools

    records = PostgresRecords(database_url)
    [save] = [t for t in builtin_tools(workspace, "ann", records) if t.name == "save_note"]
    assert "tool_call_id" not in save.tool_call_schema.model_json_schema()["properties"], "not the model's"
    call = {"type": "tool_call", "name": "save_note", "args": {"text": "buy milk"}, "id": "call-1"}
    first, again = await save.ainvoke(call), await save.ainvoke(call)
    assert first.content == again.content
    await save.ainvoke({**call, "id": "call-2"})
    assert await records.notes(workspace, "ann") == ["buy milk", "buy milk"], "a new call is a new note"
