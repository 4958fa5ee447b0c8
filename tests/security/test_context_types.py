"""Item 1: every Context field is checked by type, in the graph, through the SDK and on the CLI's ``--set``.

Before, ``auto_approved="github-*"`` was iterated character by character and its lone ``*`` approved every
tool; ``history_limit="abc"`` failed with a ``TypeError`` deep in a node; ``memories_enabled="no"`` counted as
true; ``tool_timeout=-5`` was accepted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.support.helpers import user_message
from tests.support.tools import make_test_tools, recorded
from workspace_agent.core.context import ContextError
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply

CLI = str(Path(sys.executable).with_name("workspace-agent"))

BAD = [
    ("auto_approved", "github-*", "must be a list of strings"),
    ("history_limit", "abc", "must be a whole number"),
    ("history_limit", True, "must be a whole number"),
    ("memories_enabled", "no", "must be true or false"),
    ("choose_tools", "no", "must be true or false"),
    ("tool_timeout", -5, "must be above 0"),
    ("tool_timeout", "5", "must be a number"),
    ("workspace", "", "must be a slug"),
    ("workspace", "../other", "must be a slug"),
    ("approval_required", ["*", 3], "approval_required[1]"),
    ("similarity_threshold", 2, "0.0 up to 1.0"),
    ("chat_mode", "shout", "must be one of"),
]


@pytest.mark.parametrize(("name", "value", "says"), BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
async def test_a_bad_setting_stops_the_turn_before_anything_runs(
    llm, saver, workspace, thread, tmp_path, name, value, says
):
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("slow", {"seconds": 0, "label": "unasked"})), text_reply("done"))
    context = {"workspace": workspace, "approval_required": ["*"], name: value}
    with pytest.raises(ContextError) as refused:
        await graph.ainvoke(user_message("go"), thread, context=context)
    assert f"'{name}" in str(refused.value) and says in str(refused.value)
    assert llm.requests == [] and recorded(record) == [], "nothing was asked of the model, no tool ran"
    assert (await graph.aget_state(thread)).values == {}, "the thread holds nothing of the refused turn"


async def test_a_string_pattern_no_longer_approves_every_tool(llm, saver, workspace, thread, tmp_path):
    """The attack itself: ``"github-*"`` as a string used to approve ``slow`` through its lone ``*``."""
    record = tmp_path / "runs.jsonl"
    graph = build_graph(checkpointer=saver, tools=make_test_tools(record))
    llm.push(tool_reply(("slow", {"seconds": 0, "label": "x"})), text_reply("done"))
    with pytest.raises(ContextError):
        await graph.ainvoke(
            user_message("go"), thread, context={"workspace": workspace, "auto_approved": "github-*"}
        )
    llm.reset()
    llm.push(tool_reply(("slow", {"seconds": 0, "label": "x"})), text_reply("done"))
    out = await graph.ainvoke(
        user_message("go"), thread, context={"workspace": workspace, "auto_approved": ["github-*"]}
    )
    assert "__interrupt__" in out and recorded(record) == [], "as a list it approves github-* tools only"


async def test_bad_settings_through_the_sdk_name_the_field(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    for name, value, says in [
        ("history_limit", "abc", "must be a whole number"),
        ("memories_enabled", "no", "must be true or false"),
        ("choose_tools", "no", "must be true or false"),
        ("tool_timeout", -5, "must be above 0"),
    ]:
        thread = await client.threads.create()
        with pytest.raises(Exception) as failed:
            await client.runs.wait(
                thread["thread_id"],
                "agent",
                input=user_message("hi"),
                context={"workspace": workspace, name: value},
            )
        assert f"'{name}'" in str(failed.value) and says in str(failed.value), str(failed.value)
    thread = await client.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.runs.wait(
            thread["thread_id"],
            "agent",
            input=user_message("hi"),
            context={"workspace": workspace, "auto_approved": "github-*"},
        )
    assert refused.value.response.status_code == 403
    assert "'auto_approved' must be a list of strings" in refused.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.assistants.create("agent", context={"workspace": workspace, "history_limit": "abc"})
    assert refused.value.response.status_code == 422 and "'history_limit'" in refused.value.response.text
    assert llm.requests == []


def cli(database_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run([CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_set_names_the_field_and_reads_json_lists(database_url, tmp_path):
    for setting, says in [
        ("history_limit=abc", "'history_limit' must be a whole number"),
        ("auto_approved=github-*", "'auto_approved' must be a list of strings"),
        ("memories_enabled=no", "'memories_enabled' must be true or false"),
        ("tool_timeout=-5", "'tool_timeout' must be above 0"),
        ("history_limit", "--set expects name=value"),
    ]:
        done = cli(database_url, tmp_path, "--demo", "--workspace", "cli-set", "--set", setting, "ask", "hi")
        assert done.returncode == 1 and says in " ".join(done.stderr.split()), done.stderr
        assert "Traceback" not in done.stderr
    done = cli(
        database_url,
        tmp_path,
        "--demo",
        "--workspace",
        "cli-set",
        "--set",
        'auto_approved=["nothing-*"]',
        "--set",
        "history_limit=2",
        "--set",
        "memories_enabled=false",
        "ask",
        "hello",
    )
    assert done.returncode == 0, done.stderr
