"""Issue 36, item 3, served: a workspace shared with its members, through ``langgraph_sdk``.

The same story runs on ``langgraph dev`` with API keys and on ``make serve`` with two instances (each call
may reach either): alice keeps a document and a prompt in her workspace; bob, a stranger, cannot tell it
from one nobody has; made a member, he is answered from her documents under her prompt in a thread of his
own, cannot add to her documents, cannot see her threads or her members; made a manager, he adds a
document; removed, he reaches nothing of it again.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.security.test_workspaces import QUESTION, alice_has_the_secret, prompts_since, text_file, turn
from tests.serving.conftest import serve, serving_env  # noqa: F401 - the Aegra fixtures
from tests.serving.test_jobs_served import own_database  # noqa: F401 - a database no other launcher polls
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.members import unknown_message
from workspace_agent.cli.jobs import create_job, delete_job, edit_job, job_runs, run_now, set_enabled
from workspace_agent.core.context import document_scope
from workspace_agent.core.jobs import Job
from workspace_agent.nodes.uploads import MEMBERS_READ

PROMPT = "You answer for the north office of Lanternfish."


def as_user(url: str, name: str):
    return get_client(url=url, api_key=KEYS[name])


async def refused(call, status: int) -> str:
    """The server's refusal of ``call``: its status must be ``status``; returns what it said."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    assert caught.value.response.status_code == status, caught.value.response.text
    return caught.value.response.text


async def shared_story(alice_url: str, bob_url: str, llm, workspace: str) -> None:
    alice, bob = as_user(alice_url, "alice"), as_user(bob_url, "bob")
    await alice.assistants.create("agent", context={"workspace": workspace, "system_prompt": PROMPT})
    await alice_has_the_secret(alice_url, llm, workspace)
    [hers] = await alice.threads.search(limit=1)
    shared = f"alice/{workspace}"

    # a stranger: her workspace and one nobody has are refused in the same words, before any model call
    start = len(llm.requests)
    said = await refused(turn(bob, llm, shared, QUESTION), 404)
    nobody = await refused(turn(bob, llm, f"{shared}-nobody", QUESTION), 404)
    assert unknown_message(shared) in said
    assert said.replace(f"{shared}", "<ws>") == nobody.replace(f"{shared}-nobody", "<ws>")
    assert len(llm.requests) == start, "no turn ran"
    await refused(bob.http.get(f"/workspaces/{shared}/members"), 404)
    llm.script.clear()  # the replies the refused turns left unused

    # a member: her documents, under her prompt, in his own thread; his file is not added to hers
    added = await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "member"})
    assert added == {"workspace": shared, "user": "bob", "role": "member", "added": True}
    listed = (await bob.http.get("/workspaces/shared"))["workspaces"]
    assert [w for w in listed if w["workspace"] == shared] == [{"workspace": shared, "role": "member"}]
    start = len(llm.requests)
    out = await turn(bob, llm, shared, [{"type": "text", "text": QUESTION}, text_file("forged.txt", "0000")])
    prompt = prompts_since(llm, start)
    assert "7315" in prompt and PROMPT in prompt, "her document, her settings"
    assert [(u["outcome"], u["reason"]) for u in out["uploads"]] == [("refused", MEMBERS_READ)]
    titles = [d.title for d in await DocumentStore().list_documents(document_scope("alice", workspace))]
    assert titles == ["ledger.txt"]
    assert await bob.threads.search(metadata={"owner": "alice"}) == []
    await refused(bob.threads.get(hers["thread_id"]), 404)
    await refused(bob.http.get(f"/workspaces/{shared}/members"), 403)
    await refused(bob.http.put(f"/workspaces/{shared}/members/bob", json={"role": "manager"}), 403)

    # a manager: adds a document to her workspace, and sees its members
    await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "manager"})
    out = await turn(bob, llm, shared, [{"type": "text", "text": "add this"}, text_file("rota.txt", "Rota.")])
    assert [u["outcome"] for u in out["uploads"]] == ["added"]
    titles = [d.title for d in await DocumentStore().list_documents(document_scope("alice", workspace))]
    assert sorted(titles) == ["ledger.txt", "rota.txt"]
    listed = await bob.http.get(f"/workspaces/{shared}/members")
    assert listed["members"] == [{"user": "bob", "role": "manager", "added_by": "alice"}]

    # settings: a manager's change, then the owner's own assistant, each reaches the members' runs
    changed = await bob.http.put(f"/workspaces/{shared}/settings", json={"system_prompt": "Rota first."})
    assert changed["settings"]["system_prompt"] == "Rota first."
    start = len(llm.requests)
    await turn(bob, llm, shared, QUESTION)
    assert "Rota first." in prompts_since(llm, start)
    [assistant] = await alice.assistants.search(graph_id="agent", metadata={"owner": "alice"}, limit=1)
    await alice.assistants.update(
        assistant["assistant_id"], context={"workspace": workspace, "system_prompt": "Owner's word."}
    )
    start = len(llm.requests)
    await turn(bob, llm, shared, QUESTION)
    assert "Owner's word." in prompts_since(llm, start)

    # removed: nothing more, in the stranger's words
    await alice.http.delete(f"/workspaces/{workspace}/members/bob")
    start = len(llm.requests)
    assert unknown_message(shared) in await refused(turn(bob, llm, shared, QUESTION), 404)
    assert len(llm.requests) == start
    llm.script.clear()
    listed = (await bob.http.get("/workspaces/shared"))["workspaces"]
    assert shared not in [w["workspace"] for w in listed], "other tests share with bob too"


async def test_a_shared_workspace_on_langgraph_dev(secured_server, llm, workspace):  # noqa: F811
    await shared_story(secured_server, secured_server, llm, workspace)


async def test_a_shared_workspace_on_make_serve_with_two_instances(serve, llm, workspace):  # noqa: F811
    keys = ",".join(f"{key}:{user}" for user, key in KEYS.items())
    served = serve(2, WORKSPACE_AGENT_API_KEYS=keys)
    await shared_story(served.urls[0], served.urls[1], llm, workspace)


async def test_a_members_job_runs_in_the_shared_workspace_until_he_is_removed(
    secured_server,  # noqa: F811
    llm,
    workspace,
):
    """A job names the workspace as its member does; each run is checked again, so removal stops it."""
    alice, bob = as_user(secured_server, "alice"), as_user(secured_server, "bob")
    await alice.assistants.create("agent", context={"workspace": workspace, "system_prompt": PROMPT})
    await alice_has_the_secret(secured_server, llm, workspace)
    await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "member"})
    shared = f"alice/{workspace}"
    job = Job(name=f"vault-{workspace}"[:60], workspace=shared, prompt=QUESTION, schedule="0 9 * * *")
    await create_job(bob, job)

    start = len(llm.requests)
    thread = await run_now(bob, job.name)
    await bob.runs.join(thread, (await bob.runs.list(thread))[0]["run_id"])
    prompt = prompts_since(llm, start)
    assert "7315" in prompt and PROMPT in prompt, "her document, her settings, in his job's run"
    [run] = await job_runs(bob, job.name)
    assert run.state == "completed" and run.thread_id == thread

    await alice.http.delete(f"/workspaces/{workspace}/members/bob")
    start = len(llm.requests)
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await run_now(bob, job.name)
    assert caught.value.response.status_code == 404
    assert len(llm.requests) == start
    await delete_job(bob, job.name)


async def until(check, timeout: float = 60):
    """``await check()`` every half second until it is truthy; its last value."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (found := await check()) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.5)
    return found


async def test_a_members_scheduled_job_on_make_serve_fires_on_the_workspace_settings(
    serve,  # noqa: F811
    llm,
    own_database,  # noqa: F811
    workspace,
):
    """Aegra fires a cron with the context it was sent and no admission between: the job carries the
    workspace's settings, and a firing whose approval or tools are no longer the workspace's is refused at
    its first step until the job is saved again.
    """
    keys = ",".join(f"{key}:{user}" for user, key in KEYS.items())
    fast = {"CRON_POLL_INTERVAL_SECONDS": "1", "CRON_ALLOW_SECONDS_SCHEDULE": "true"}
    served = serve(1, DATABASE_URL=own_database, WORKSPACE_AGENT_API_KEYS=keys, **fast)
    url = served.urls[0]
    alice, bob = as_user(url, "alice"), as_user(url, "bob")
    hers = {"workspace": workspace, "system_prompt": PROMPT, "tools": ["search_documents", "calculate"]}
    assistant = await alice.assistants.create("agent", context=hers)
    await alice_has_the_secret(url, llm, workspace)
    await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "member"})
    name = f"vault-{workspace}"[:60]
    job = Job(name=name, workspace=f"alice/{workspace}", prompt=QUESTION, schedule="*/5 * * * * *")

    async def newest(state: str):
        runs = await job_runs(bob, name)
        return runs[0] if runs and runs[0].state == state and runs[0].thread_id not in seen else None

    seen: set[str] = set()
    start = len(llm.requests)
    await create_job(bob, job)
    fired = await until(lambda: newest("completed"))
    assert fired, await job_runs(bob, name)
    prompt = prompts_since(llm, start)
    assert "7315" in prompt and PROMPT in prompt, "her document and her prompt, in a firing of his job"

    # she narrows the workspace's tools: his saved job no longer holds its settings, and is refused
    await alice.assistants.update(assistant["assistant_id"], context={**hers, "tools": ["calculate"]})
    await set_enabled(bob, name, False)
    seen |= {r.thread_id for r in await job_runs(bob, name)}
    start = len(llm.requests)
    await set_enabled(bob, name, True)
    failed = await until(lambda: newest("failed"))
    assert failed, await job_runs(bob, name)
    [refusal] = await bob.runs.list(failed.thread_id)
    assert "changed the shared settings" in str(refusal), refusal
    await set_enabled(bob, name, False)
    assert len(llm.requests) == start, "the refused firing called no model"

    # saved again, it takes the settings as they are now
    seen |= {r.thread_id for r in await job_runs(bob, name)}
    await edit_job(bob, name, time_limit=120)
    await set_enabled(bob, name, True)
    assert await until(lambda: newest("completed")), await job_runs(bob, name)
    await delete_job(bob, name)


def members_cli(server: str, user: str, *args: str) -> subprocess.CompletedProcess:
    """``workspace-agent members`` as a person types it, with their key in the environment."""
    command = [str(Path(sys.executable).with_name("workspace-agent")), "members", "--server", server, *args]
    env = {**os.environ, "WORKSPACE_AGENT_API_KEY": KEYS[user]}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


async def test_the_command_line_shares_lists_and_removes(secured_server, workspace):  # noqa: F811
    shared = f"alice/{workspace}"
    added = members_cli(secured_server, "alice", "add", workspace, "bob", "--role", "manager")
    assert added.returncode == 0 and f"bob added to {shared} as manager" in added.stdout, added.stderr
    listed = members_cli(secured_server, "bob", "list", shared)
    assert f"{shared}: owner alice" in listed.stdout and "bob  manager  (added by alice)" in listed.stdout
    assert f"{shared}  (manager)" in members_cli(secured_server, "bob", "shared").stdout
    assert members_cli(secured_server, "alice", "remove", workspace, "bob").returncode == 0
    refused = members_cli(secured_server, "bob", "list", shared)
    assert refused.returncode == 1 and unknown_message(shared) in refused.stderr + refused.stdout
