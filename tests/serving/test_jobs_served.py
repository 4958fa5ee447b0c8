"""Issue 36, item 1, served: scheduled agent jobs on the engines' own crons, through ``langgraph_sdk``.

- ``langgraph dev`` with API keys: alice's job is listed, run now, waits on its approval card (a job never
  approves for the person), is approved from its list of runs and goes on; bob can neither see, run, edit
  nor read the runs of alice's job; the job fires on its schedule (the engine's crons).
- ``make serve`` with API keys: alice's job is hers alone, and its run ends ``timed_out`` at its limit.
- ``make serve`` with two instances, on a database of their own (no other server of the session polls its
  crons): a job fires on schedule, each slot once across both instances; after both are stopped for several
  slots, the missed job runs once when they are back, not once per missed slot.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from workspace_agent.checkpoints.db import close_pools
from workspace_agent.cli.jobs import (
    JobError,
    create_job,
    decide,
    delete_job,
    edit_job,
    find_job,
    job_runs,
    list_jobs,
    run_now,
    set_enabled,
)
from workspace_agent.core.jobs import Job, run_key
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def job_rule(request: dict) -> dict:
    """The jobs' model: a prompt naming a note asks to save it; after a tool's result, it reports it."""
    messages = request.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        return text_reply(f"report: {messages[-1].get('content')}")
    text = str(messages[-1].get("content")) if messages else ""
    if "note" in text and "save_note" in {t["function"]["name"] for t in request.get("tools", [])}:
        return tool_reply(("save_note", {"text": "weekly figures"}))
    return text_reply("nothing to do")


async def wait_for(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := await check():
            return value
        await asyncio.sleep(0.5)
    pytest.fail(f"waited {seconds} s for {what}")


async def test_a_job_waits_for_its_owner_and_is_approved_from_its_runs(
    secured_server,  # noqa: F811
    llm,
    monkeypatch,
    workspace,
):
    monkeypatch.setattr(llm, "rule", job_rule)
    alice = get_client(url=secured_server, api_key=KEYS["alice"])
    bob = get_client(url=secured_server, api_key=KEYS["bob"])
    name = f"notes-{workspace}"[:60]
    job = Job(
        name=name,
        workspace=workspace,
        prompt="@agent save a note of the weekly figures",
        schedule="0 9 * * 1",
        timezone="Europe/Lisbon",
        tools=["save_note", "calculate"],
        time_limit=120,
    )
    await create_job(alice, job)
    with pytest.raises(JobError, match="exists already"):
        await create_job(alice, job)
    listed = [j for j, _ in await list_jobs(alice)]
    assert listed == [job], "the job reads back as it was written"
    assert await job_runs(alice, name) == [], "created, not run: the first run is at the first slot"

    thread = await run_now(alice, name)
    runs = await wait_for(lambda: _waiting(alice, name), 60, "the run to wait on its approval card")
    assert [r.thread_id for r in runs] == [thread]
    card = runs[0].waiting_on
    assert card is not None and card["type"] == "tool_approval"
    assert [(a["name"], a["args"]) for a in card["action_requests"]] == [
        ("save_note", {"text": "weekly figures"})
    ]
    offered = [t["function"]["name"] for t in llm.requests[-1]["tools"]]
    assert sorted(offered) == ["calculate", "save_note"], "the job's tools only; never ask_person"

    # bob sees nothing of it, and cannot run, edit, pause, approve or read it
    assert await list_jobs(bob) == [] and await find_job(bob, name) is None
    for attempt in (run_now(bob, name), edit_job(bob, name, prompt="x"), set_enabled(bob, name, False)):
        with pytest.raises(JobError, match="no job named"):
            await attempt
    with pytest.raises(JobError, match="no job named"):
        await decide(bob, name, thread[:8], approve=True)
    cron_id = (await find_job(alice, name))["cron_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.crons.update(cron_id, enabled=False)
    assert refused.value.response.status_code == 404
    stolen = await bob.store.search_items(run_key("alice", name))
    assert stolen["items"] == [], "bob's search is confined to his own part of the store"
    with pytest.raises(httpx.HTTPStatusError):
        await bob.threads.get(thread)

    out = await decide(alice, name, thread[:8], approve=True)
    assert out["messages"][-1]["content"].startswith("report: Saved note")
    (run,) = await job_runs(alice, name)
    assert run.state == "completed" and run.answer and run.answer.startswith("report: Saved note")

    edited = await edit_job(alice, name, schedule="30 8 * * 1-5", tools=["calculate"])
    assert edited.schedule == "30 8 * * 1-5" and (await list_jobs(alice))[0][0].tools == ["calculate"]
    await set_enabled(alice, name, False)
    assert (await find_job(alice, name))["enabled"] is False
    await delete_job(alice, name)
    assert await find_job(alice, name) is None
    assert (await alice.threads.get(thread))["thread_id"] == thread, "a deleted job's runs stay"


async def _waiting(client, name):
    runs = await job_runs(client, name)
    return runs if runs and runs[0].state == "waiting" else None


async def test_a_job_fires_on_its_schedule_under_langgraph_dev(secured_server, llm, monkeypatch, workspace):  # noqa: F811
    monkeypatch.setattr(llm, "rule", job_rule)
    alice = get_client(url=secured_server, api_key=KEYS["alice"])
    name = f"tick-{workspace}"[:60]
    await create_job(
        alice, Job(name=name, workspace=workspace, prompt="@agent anything new?", schedule="* * * * *")
    )
    try:
        runs = await wait_for(lambda: job_runs(alice, name), 80, "the minute's firing")
        run = await wait_for(lambda: _finished(alice, name), 30, "the fired run to finish")
        assert len(runs) == 1 and run.answer == "nothing to do"
    finally:
        await delete_job(alice, name)


async def _finished(client, name):
    runs = await job_runs(client, name)
    return runs[0] if runs and runs[0].state == "completed" else None


@pytest.fixture
async def own_database(database_url: str) -> AsyncIterator[str]:
    """A database of its own on the session's server: no other launcher of the session polls its crons."""
    name = f"jobs_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {name}")
    yield urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))  # Aegra reads a URL, not a DSN
    await close_pools()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def fired_at(client, name: str) -> list[float]:
    """When the engine created each run of the job (the firing, before any queue), oldest first."""
    times = []
    for run in await job_runs(client, name, limit=100):
        created = (await client.runs.list(run.thread_id))[-1]["created_at"]
        times.append(datetime.fromisoformat(str(created)).timestamp())
    return sorted(times)


# Two launches of two instances (each waited on for up to 150 s) and 34 s of slots: the suite's 120 s cut it
# short on a busy machine, in the second launch. The limit is for a hang.
@pytest.mark.timeout(600)
async def test_two_instances_fire_each_slot_once_and_a_missed_slot_once_after_a_restart(
    serve, llm, monkeypatch, own_database, workspace
):
    """Slots are every 5 s, aligned to the clock, so a firing belongs to the slot its time falls in.

    Each firing moves the job's next slot past now, so a slot fired twice (two instances) or the missed slots
    fired one after another at the restart (one per poll, a second apart) would put two firings in one slot.
    """
    monkeypatch.setattr(llm, "rule", job_rule)
    fast = {"CRON_POLL_INTERVAL_SECONDS": "1", "CRON_ALLOW_SECONDS_SCHEDULE": "true"}
    served = serve(instances=2, DATABASE_URL=own_database, **fast)
    clients = [get_client(url=u) for u in served.urls]
    name = "every-five-seconds"
    job = Job(name=name, workspace=workspace, prompt="@agent anything new?", schedule="*/5 * * * * *")
    await create_job(clients[0], job)
    await asyncio.sleep(16)  # three slots or so, each polled by both instances every second
    fired = await fired_at(clients[1], name)
    assert len(fired) >= 2, fired
    slots = [int(t // 5) for t in fired]
    assert len(set(slots)) == len(slots), f"a slot fired twice: {fired}"

    served.stop()
    down = time.time()
    await asyncio.sleep(18)  # three slots pass with no instance up
    served = serve(instances=2, port=served.port, DATABASE_URL=own_database, **fast)
    back = time.time()
    clients = [get_client(url=u) for u in served.urls]
    await asyncio.sleep(4)
    await set_enabled(clients[0], name, False)
    after = [t for t in await fired_at(clients[0], name) if t > down]
    assert after and after[0] - back < 4, f"the missed job did not run when the server came back: {after}"
    slots = [int(t // 5) for t in after]
    assert len(set(slots)) == len(slots), f"the missed slots were fired one by one: {after}"


def jobs_cli(server: str, *args: str) -> subprocess.CompletedProcess:
    """``workspace-agent jobs`` as a person types it, against ``server``."""
    command = [str(Path(sys.executable).with_name("workspace-agent")), *args[:2], "jobs", "--server", server]
    env = {**os.environ, "TZ": "Europe/Berlin"}
    return subprocess.run([*command, *args[2:]], env=env, capture_output=True, text=True, timeout=120)


async def test_the_command_line_schedules_runs_lists_and_approves_a_job(
    dev_server, llm, monkeypatch, workspace
):
    monkeypatch.setattr(llm, "rule", job_rule)
    at = ("--workspace", workspace)
    name = f"cli-{workspace}"[:60]
    add = jobs_cli(
        dev_server, *at, "add", name, "--prompt", "@agent save a note", "--schedule", "0 7 * * 1-5"
    )
    assert add.returncode == 0, add.stderr
    assert "0 7 * * 1-5 (Europe/Berlin)" in add.stdout and "first run" in add.stdout
    listed = jobs_cli(dev_server, *at, "list")
    assert f"{name}\t{workspace}\t0 7 * * 1-5\tEurope/Berlin\t" in listed.stdout, listed.stdout

    started = jobs_cli(dev_server, *at, "run", name)
    assert started.returncode == 0, started.stderr
    thread = started.stdout.split("thread ")[1].strip()
    client = get_client(url=dev_server)
    await wait_for(lambda: _waiting(client, name), 60, "the run to wait for approval")
    runs = jobs_cli(dev_server, *at, "runs", name)
    assert f"{thread[:8]}" in runs.stdout and "waiting" in runs.stdout
    assert 'save_note({"text": "weekly figures"})' in runs.stdout, runs.stdout

    rejected = jobs_cli(dev_server, *at, "reject", name, thread[:8])
    assert rejected.returncode == 0, rejected.stderr
    assert "report: " in rejected.stdout and "reject" in rejected.stdout.lower()
    assert "completed" in jobs_cli(dev_server, *at, "runs", name).stdout

    bad = jobs_cli(dev_server, *at, "edit", name, "--schedule", "every monday")
    assert bad.returncode == 1 and "not a five-field cron schedule" in bad.stderr
    bad = jobs_cli(dev_server, *at, "edit", name, "--tz", "Mars/Olympus")
    assert bad.returncode == 1 and "IANA time zone" in bad.stderr
    assert jobs_cli(dev_server, *at, "pause", name).returncode == 0
    assert "\tpaused\t" in jobs_cli(dev_server, *at, "list").stdout
    assert jobs_cli(dev_server, *at, "delete", name).returncode == 0
    gone = jobs_cli(dev_server, *at, "run", name)
    assert gone.returncode == 1 and "no job named" in gone.stderr


def slow_rule(request: dict) -> dict:
    """A model that takes 6 s over any reply: a job's run with a shorter time limit ends on it."""
    return {**text_reply("too late"), "delay": 6}


async def test_under_make_serve_with_keys_a_job_is_its_owners_and_ends_at_its_time_limit(
    keyed_served_url,  # noqa: F811
    llm,
    monkeypatch,
    workspace,
):
    alice = get_client(url=keyed_served_url, api_key=KEYS["alice"])
    bob = get_client(url=keyed_served_url, api_key=KEYS["bob"])
    name = f"limit-{workspace}"[:60]
    job = Job(
        name=name, workspace=workspace, prompt="@agent anything new?", schedule="0 9 * * 1", time_limit=2
    )
    await create_job(alice, job)
    assert await list_jobs(bob) == [] and await find_job(bob, name) is None
    with pytest.raises(JobError, match="no job named"):
        await run_now(bob, name)

    monkeypatch.setattr(llm, "rule", slow_rule)
    thread = await run_now(alice, name)
    run = await wait_for(lambda: _ended(alice, name), 60, "the run to end")
    assert run.thread_id == thread and run.state == "timed_out", run
    assert run.answer and "time limit of 2 s" in run.answer
    state = await alice.threads.get_state(thread)
    assert [d["outcome"] for d in state["values"]["decisions"] if d["id"] == "J1"] == ["timed_out"]
    await delete_job(alice, name)


async def _ended(client, name):
    runs = await job_runs(client, name)
    return runs[0] if runs and runs[0].state not in ("running", "waiting") else None
