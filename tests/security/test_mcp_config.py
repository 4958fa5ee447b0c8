"""Issue 13 item 2: a run cannot choose what the server executes or reads through MCP.

Before the fix, ``context.mcp_config`` named the servers file, so any HTTP client could make the server run a
command of its choosing (a stdio block's ``command``) and point the file at ``/dev/zero`` or a FIFO, which
exhausted memory or hung every MCP turn. Now the file is the deployment's (``MCP_CONFIG``), read only as a
regular file under a size cap, with a timeout, off the sessions' thread; a run picks servers by name only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.integration.test_mcp import stdio
from tests.support.helpers import user_message
from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.nodes.services import Services
from workspace_agent.samples.scripted_model import text_reply
from workspace_agent.skills.mcp import MAX_FILE_BYTES, close_mcp
from workspace_agent.skills.mcp import config as mcp_config
from workspace_agent.skills.mcp.config import ENV_VAR

ROOT = Path(__file__).resolve().parents[2]
RECORDER = ROOT / "tests" / "support" / "mcp_servers" / "recorder.py"


def marking_server(marker: Path) -> dict:
    """A stdio block whose command creates ``marker``: if it ever runs, the file appears."""
    return {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w').close()"]}


@pytest.fixture(autouse=True)
async def close_sessions():
    yield
    await close_mcp()


async def test_a_runs_context_cannot_name_a_servers_file_or_a_command(
    llm, dev_server, dev_mcp_config, workspace, tmp_path
):
    marker = tmp_path / "ran-as-the-server-user"
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps({"mcpServers": {"evil": marking_server(marker)}}))
    assert not dev_mcp_config.exists(), "the deployment has no MCP servers in this test"
    client = get_client(url=dev_server)
    attempts = [
        {"mcp_config": str(evil)},  # the field that used to name the file
        {"mcpServers": {"evil": marking_server(marker)}},  # a servers block inline
        {"mcp_servers": [str(evil)]},  # a path where a server name belongs
        {"mcp_servers": {"evil": marking_server(marker)}},  # a block where a list of names belongs
        {"mcp_servers": ["evil"]},  # a name the deployment does not have
    ]
    outcomes = []
    for extra in attempts:
        thread_id = (await client.threads.create())["thread_id"]
        llm.reset()
        llm.push(text_reply("ok"))
        try:
            result = await client.runs.wait(
                thread_id, "agent", input=user_message("hi"), context={"workspace": workspace, **extra}
            )
            outcome = "error" if isinstance(result, dict) and "__error__" in result else "ran"
        except Exception as exc:  # rejected by the server: as good as ignored
            outcome = f"rejected: {type(exc).__name__}"
        offered = [t["function"]["name"] for r in llm.requests for t in r.get("tools", [])]
        assert not any(n.startswith("evil") for n in offered), (extra, offered)
        outcomes.append(outcome)
    await asyncio.sleep(1.0)  # a started process would have created the marker by now
    assert not marker.exists(), f"a command named by a run's context ran on the server: {outcomes}"
    # the shapes that are not even the field's type are refused, not silently dropped
    assert outcomes[3] != "ran", outcomes


async def test_mcp_servers_names_only_the_deployments_servers(monkeypatch, tmp_path, workspace):
    record = tmp_path / "calls.jsonl"
    path = tmp_path / "servers.json"
    block = {"command": sys.executable, "args": [str(RECORDER)], "env": {"MCP_RECORD": str(record)}}
    path.write_text(json.dumps({"mcpServers": {"rec": block}}))
    monkeypatch.setenv(ENV_VAR, str(path))
    toolset = await Services(records=MemoryRecords()).toolset(
        Context(workspace=workspace, mcp_servers=["rec", "/etc/passwd"])
    )
    assert "rec-echo" in toolset.tools
    assert toolset.problems == [
        "MCP server '/etc/passwd' named in mcp_servers is not one of the deployment's servers (rec)"
    ]


@pytest.mark.parametrize("kind", ["fifo", "device", "oversize", "directory"])
async def test_a_servers_file_that_is_not_a_small_regular_file_is_a_problem_not_a_hang(
    kind, llm, saver, workspace, thread, tmp_path, monkeypatch
):
    if kind == "fifo":
        path = tmp_path / "servers.fifo"
        os.mkfifo(path)
        expected = "is not a regular file"
    elif kind == "device":
        path, expected = Path("/dev/zero"), "is not a regular file"
    elif kind == "oversize":
        path = tmp_path / "huge.json"
        with path.open("wb") as f:  # sparse: the cap must hold without reading the whole file
            f.truncate(MAX_FILE_BYTES + 1)
        expected = f"is larger than {MAX_FILE_BYTES} bytes"
    else:
        path, expected = tmp_path, "is not a regular file"
    monkeypatch.setenv(ENV_VAR, str(path))
    started = time.monotonic()
    toolset = await asyncio.wait_for(
        Services(records=MemoryRecords()).toolset(Context(workspace=workspace)), 10
    )
    assert time.monotonic() - started < 3
    assert len(toolset.problems) == 1 and expected in toolset.problems[0], toolset.problems
    assert str(path) in toolset.problems[0] and "calculate" in toolset.tools

    llm.push(text_reply("still answering"))
    out = await asyncio.wait_for(
        build_graph(checkpointer=saver).ainvoke(
            user_message("hi"), thread, context=Context(workspace=workspace)
        ),
        20,
    )
    assert out["messages"][-1].content == "still answering"


async def test_a_read_that_hangs_times_out_and_never_stalls_the_sessions_thread(
    tmp_path, monkeypatch, workspace
):
    """A file on a dead network mount cannot be made here, so the read itself is held on an event."""
    record = tmp_path / "calls.jsonl"
    good = tmp_path / "good.json"
    block = {"command": sys.executable, "args": [str(RECORDER)], "env": {"MCP_RECORD": str(record)}}
    good.write_text(json.dumps({"mcpServers": {"rec": block}}))
    monkeypatch.setenv(ENV_VAR, str(good))
    services = Services(records=MemoryRecords())
    echo = (await services.toolset(Context(workspace=workspace))).tools["rec-echo"]

    stuck = tmp_path / "stuck.json"
    stuck.write_text("{}")
    release = __import__("threading").Event()
    real_read = mcp_config._read_regular_file

    def hanging_read(path: Path):
        if path == stuck:
            release.wait(30)
        return real_read(path)

    monkeypatch.setattr(mcp_config, "_read_regular_file", hanging_read)
    monkeypatch.setattr(mcp_config, "READ_TIMEOUT", 1.0)
    monkeypatch.setenv(ENV_VAR, str(stuck))
    try:
        loading = asyncio.ensure_future(services.toolset(Context(workspace=workspace)))
        await asyncio.sleep(0.2)  # the read is now hanging
        started = time.monotonic()
        # the sessions' thread still serves the servers it holds while the read hangs
        assert (await asyncio.wait_for(echo.ainvoke({"text": "alive"}), 5))[0]["text"] == "alive"
        assert time.monotonic() - started < 2
        toolset = await asyncio.wait_for(loading, 5)
        assert len(toolset.problems) == 1 and "could not be read within 1 s" in toolset.problems[0]
        assert "calculate" in toolset.tools
    finally:
        release.set()


async def test_a_run_cannot_widen_the_mcp_servers_its_workspace_uses(
    llm, dev_server, dev_mcp_config, workspace, tmp_path
):
    """The workspace uses ``rec`` only; a run naming ``other`` too would reach a server the owner left out."""
    record, other = tmp_path / "rec.jsonl", tmp_path / "other.jsonl"
    dev_mcp_config.write_text(
        json.dumps({"mcpServers": {"rec": stdio("rec", record), "other": stdio("other", other)}})
    )
    try:
        client = get_client(url=dev_server)
        assistant = await client.assistants.create(
            "agent", context={"workspace": workspace, "mcp_servers": ["rec"]}
        )
        for widened in (["rec", "other"], ["other"], []):
            thread_id = (await client.threads.create())["thread_id"]
            llm.reset()
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await client.runs.wait(
                    thread_id,
                    assistant["assistant_id"],
                    input=user_message("hi"),
                    context={"workspace": workspace, "mcp_servers": widened},
                )
            assert refused.value.response.status_code == 403, widened
            assert "cannot set mcp_servers" in refused.value.response.text
            assert llm.requests == [], "nothing ran"
        llm.push(text_reply("ok"))
        thread_id = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread_id, assistant["assistant_id"], input=user_message("hi"))
        offered = {t["function"]["name"] for t in llm.requests[0].get("tools", [])}
        assert not any(name.startswith("other-") for name in offered), offered
    finally:
        dev_mcp_config.unlink(missing_ok=True)
