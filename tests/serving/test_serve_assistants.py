"""One assistant per workspace, made once, against both servers: Aegra (409 on a duplicate) and langgraph dev
(which makes copies)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from workspace_agent.cli.assistants import assistant_id, ensure, listing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["langgraph dev", "make serve"])
def server_url(request) -> str:
    if request.param == "langgraph dev":
        return request.getfixturevalue("dev_server")
    return request.getfixturevalue("served_url")


async def managed(client, workspace: str) -> list[dict]:
    return await client.assistants.search(metadata={"workspace": workspace}, limit=100)


async def test_create_is_idempotent_and_converges_on_the_settings(server_url, workspace):
    client = get_client(url=server_url)
    first, outcome = await ensure(client, "agent", workspace, {"chat_mode": "query"})
    assert outcome == "created" and first["assistant_id"] == assistant_id("agent", workspace)
    again, outcome = await ensure(client, "agent", workspace, {"chat_mode": "query"})
    assert (again["assistant_id"], outcome) == (first["assistant_id"], "unchanged")
    changed, outcome = await ensure(client, "agent", workspace, {"chat_mode": "chat", "top_n": 2})
    assert (changed["assistant_id"], outcome) == (first["assistant_id"], "updated")
    assert changed["context"] == {"chat_mode": "chat", "top_n": 2, "workspace": workspace}
    raced = await asyncio.gather(
        *(ensure(client, "agent", workspace, {"chat_mode": "chat"}) for _ in range(4))
    )
    assert {a["assistant_id"] for a, _ in raced} == {first["assistant_id"]}
    assert len(await managed(client, workspace)) == 1
    memory, outcome = await ensure(client, "memory", workspace, {"min_chats": 2})
    assert outcome == "created" and memory["graph_id"] == "memory"
    assert [(a["graph_id"], a["metadata"]["workspace"]) for a in await listing(client, workspace)] == [
        ("agent", workspace),
        ("memory", workspace),
    ]


async def test_bad_settings_are_refused_before_reaching_the_server(server_url, workspace):
    client = get_client(url=server_url)
    for bad in ({"top_n": "4"}, {"no_such_field": 1}, {"approval_required": "*"}):
        with pytest.raises(ValueError):
            await ensure(client, "agent", workspace, bad)
    with pytest.raises(ValueError, match="unknown graph"):
        await ensure(client, "nope", workspace, {})
    assert await managed(client, workspace) == []


def test_the_cli_command_twice_makes_one_assistant(server_url, workspace):
    cli = [str(Path(sys.executable).with_name("workspace-agent")), "--workspace", workspace, "--mode", "chat"]
    env = {**os.environ, "WORKSPACE_AGENT_SERVER": server_url}
    outs = [
        subprocess.run([*cli, "assistant", "create"], env=env, capture_output=True, text=True, cwd=ROOT)
        for _ in range(2)
    ]
    assert [o.returncode for o in outs] == [0, 0], [o.stderr for o in outs]
    assert outs[0].stdout.startswith("created") and outs[1].stdout.startswith("unchanged")
    listed = subprocess.run([*cli, "assistant", "list"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert listed.stdout.count(assistant_id("agent", workspace)) == 1
    bad = subprocess.run(
        [*cli, "--set", "top_n=-1", "assistant", "create"], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert bad.returncode == 1 and "top_n" in bad.stderr


async def test_with_api_keys_each_user_gets_their_own_workspace_assistant(serve, workspace):
    served = serve(WORKSPACE_AGENT_API_KEYS="k-alice:alice,k-bob:bob", LANGGRAPH_API_KEY="k-alice")
    assert "memory extraction: off" in served.out.read_text()  # the launcher authenticated as alice
    alice = get_client(url=served.urls[0], api_key="k-alice")
    bob = get_client(url=served.urls[0], api_key="k-bob")
    mine, outcome = await ensure(alice, "agent", workspace, {"chat_mode": "query"})
    theirs, their_outcome = await ensure(bob, "agent", workspace, {})
    assert (outcome, their_outcome) == ("created", "created")
    assert mine["assistant_id"] != theirs["assistant_id"]
    assert (await ensure(bob, "agent", workspace, {}))[1] == "unchanged"
    assert [a["assistant_id"] for a in await listing(alice, workspace)] == [mine["assistant_id"]]
    assert [a["assistant_id"] for a in await listing(bob, workspace)] == [theirs["assistant_id"]]
