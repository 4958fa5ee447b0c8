"""Issue 36, item 1, as an attacker tries it: scheduled jobs and their routes on ``langgraph dev`` with keys.

A job is a cron, and a cron runs under the run rules: it cannot loosen approval, widen the workspace's tools,
act as another user or reach another user's assistant. A job's marks are a run's, never a workspace's. The
store record a job's run leaves can be read, and written, by its owner only, so no one can slip a thread of
theirs into someone's list of runs to approve. ``/whoami`` names the key's user and no one else.
"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from workspace_agent.cli.assistants import ensure
from workspace_agent.cli.jobs import create_job, job_runs
from workspace_agent.core.jobs import Job, run_key


async def test_whoami_names_the_keys_user_and_refuses_a_stranger(secured_server):  # noqa: F811
    async with httpx.AsyncClient(base_url=secured_server) as http:
        assert (await http.get("/whoami", headers={"x-api-key": KEYS["bob"]})).json() == {"user": "bob"}
        for headers in ({}, {"x-api-key": "guess"}, {"authorization": "Bearer nope"}):
            refused = await http.get("/whoami", headers=headers)
            assert refused.status_code == 401 and "user" not in refused.json()


async def test_a_job_cannot_loosen_approval_widen_tools_or_act_for_another(secured_server, workspace):  # noqa: F811
    alice = get_client(url=secured_server, api_key=KEYS["alice"])
    bob = get_client(url=secured_server, api_key=KEYS["bob"])
    mine, _ = await ensure(alice, "agent", workspace, {"tools": ["calculate", "save_note"]})
    base = {"schedule": "0 9 * * *", "input": {"messages": [{"role": "user", "content": "go"}]}}
    for context, says in [
        ({"workspace": workspace, "user_id": "alice", "auto_approved": ["*"]}, "auto_approved"),
        ({"workspace": workspace, "user_id": "alice", "tools": ["*"]}, "cannot set tools"),
        ({"workspace": workspace, "user_id": "bob"}, "cannot act as"),
        ({"workspace": workspace, "user_id": "alice", "only_tools": "save_note"}, "only_tools"),
    ]:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await alice.crons.create(mine["assistant_id"], **base, context=context, enabled=False)
        assert refused.value.response.status_code in (403, 422) and says in refused.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as hidden:  # bob's job on alice's workspace
        await bob.crons.create(mine["assistant_id"], **base, context={"workspace": workspace}, enabled=False)
    assert hidden.value.response.status_code in (403, 404)

    for marks in ({"job": "x"}, {"only_tools": ["calculate"]}):  # a run's marks, never a workspace's
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await alice.assistants.update(mine["assistant_id"], context={"workspace": workspace, **marks})
        assert refused.value.response.status_code == 403, refused.value.response.text

    with pytest.raises(ValueError, match="does not offer"):  # a job's tools are within the workspace's
        await create_job(
            alice,
            Job(name="wide", workspace=workspace, prompt="go", schedule="0 9 * * *", tools=["fetch_url"]),
        )


async def test_no_one_can_slip_a_run_into_anothers_job(secured_server, llm, workspace):  # noqa: F811
    alice = get_client(url=secured_server, api_key=KEYS["alice"])
    bob = get_client(url=secured_server, api_key=KEYS["bob"])
    name = f"audit-{workspace}"[:60]
    await create_job(alice, Job(name=name, workspace=workspace, prompt="go", schedule="0 9 * * *"))
    bobs = (await bob.threads.create())["thread_id"]
    record = {"thread_id": bobs, "job": name, "started_at": 1.0}
    await bob.store.put_item(run_key("alice", name), bobs, record)  # lands under bob's own namespace
    await bob.store.put_item(("alice", "users", "alice", "job_runs", name), bobs, record)
    assert await job_runs(alice, name) == [], "bob's thread is not in alice's list of runs"
    assert (await alice.store.search_items(run_key("alice", name)))["items"] == []
