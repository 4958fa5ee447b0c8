"""``workspace-agent jobs …``: scheduled agent jobs on a server (``make serve``, ``langgraph dev``).

A job is the server's own cron (``core/jobs.py``), so the engine schedules it and this module only speaks
the LangGraph API: the same calls a program or Studio makes. Each firing is a thread of its own; ``runs``
lists them with their state, and a run waiting on an approval card is approved or rejected from there,
since a job never approves for the person.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Literal, cast
from urllib.parse import quote

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Cron
from pydantic import ValidationError
from rich.console import Console

from ..core.jobs import DEFAULT_TIME_LIMIT, KIND, Job, next_runs, run_key
from .assistants import context_of, ensure, find, server_options

RunState = Literal["running", "waiting", "completed", "timed_out", "failed"]


class JobError(ValueError):
    """A job that does not exist, already exists, or cannot be made as asked."""


@dataclass
class JobRun:
    """One firing of a job: its thread, its state, and what it waits for when it waits."""

    thread_id: str
    started_at: float
    state: RunState
    #: The approval card (or question) a waiting run shows; ``None`` when it waits for nothing.
    waiting_on: dict[str, Any] | None = None
    answer: str | None = None


async def whoami(client: LangGraphClient) -> str:
    """The user the server knows this client as (``GET /whoami``)."""
    return str((await client.http.get("/whoami"))["user"])


async def find_job(client: LangGraphClient, name: str) -> Cron | None:
    """The caller's job named ``name``: the engine shows each user only their own crons."""
    found = await client.crons.search(metadata={"kind": KIND, "job": name}, limit=2)
    return found[0] if found else None


async def _job_cron(client: LangGraphClient, name: str) -> Cron:
    cron = await find_job(client, name)
    if cron is None:
        raise JobError(f"there is no job named {name!r}")
    return cron


async def list_jobs(client: LangGraphClient) -> list[tuple[Job, Cron]]:
    """The caller's jobs, by name."""
    found: list[Cron] = []
    while True:
        page = await client.crons.search(metadata={"kind": KIND}, limit=100, offset=len(found))
        found += page
        if len(page) < 100:
            break
    return sorted(((Job.from_cron(dict(c)), c) for c in found), key=lambda pair: pair[0].name)


async def _workspace_assistant(client: LangGraphClient, workspace: str) -> dict[str, Any]:
    """The workspace's assistant, made (with the server's defaults) if the workspace has none yet.

    A workspace shared with the caller (``owner/slug``) is run on the graph's own assistant: its runs take
    the workspace's shared settings from the server, which are returned here as the context.
    """
    if "/" in workspace:
        shared = await client.http.get(f"/workspaces/{quote(workspace, safe='/')}/settings")
        return {"assistant_id": "agent", "context": shared.get("settings") or {}}
    assistant = await find(client, "agent", workspace)
    if assistant is None:
        assistant, _ = await ensure(client, "agent", workspace, {})
    return dict(assistant)


def _check_tools(job: Job, assistant: dict[str, Any]) -> None:
    """A job's tools are a subset of its workspace's: one the workspace leaves out is refused here."""
    allowed = context_of(cast(Any, assistant)).get("tools")
    if job.tools is None or allowed is None:
        return
    outside = [t for t in job.tools if not any(fnmatchcase(t, p) for p in allowed)]
    if outside:
        raise JobError(
            f"workspace {job.workspace!r} does not offer {', '.join(outside)}: a job uses the workspace's "
            f"tools ({', '.join(allowed)}) or fewer"
        )


async def _cron_fields(client: LangGraphClient, job: Job) -> dict[str, Any]:
    """The cron of ``job``; in a workspace shared with its owner, holding the workspace's settings as now.

    Aegra fires a cron with the context it was sent, so a member's job carries the shared settings in it,
    taken anew on each save. A run whose approval or tools are no longer the workspace's is refused at its
    first step (``checkpoints/members.check_member_run``) until the job is saved again.
    """
    fields = job.cron(await whoami(client))
    if "/" in job.workspace:
        shared = context_of(cast(Any, await _workspace_assistant(client, job.workspace)))
        fields["context"] = {**shared, **fields["context"]}
    return fields


async def create_job(client: LangGraphClient, job: Job) -> Cron:
    """Schedule ``job`` on the server; its first run is at its first slot, not now.

    Aegra fires a new cron at once unless it is created disabled, so every job is created disabled and then
    enabled: the first run is at the schedule's next slot on either engine.
    """
    if await find_job(client, job.name) is not None:
        raise JobError(f"a job named {job.name!r} exists already: edit it, or delete it first")
    assistant = await _workspace_assistant(client, job.workspace)
    _check_tools(job, assistant)
    fields = await _cron_fields(client, job)
    await client.crons.create(assistant["assistant_id"], **{**fields, "enabled": False})
    cron = await _job_cron(client, job.name)
    if job.enabled:
        cron = await client.crons.update(cron["cron_id"], enabled=True)
    return cron


async def edit_job(client: LangGraphClient, name: str, **changes: Any) -> Job:
    """Change some of a job's fields (not its name or workspace); the schedule restarts from now."""
    cron = await _job_cron(client, name)
    current = Job.from_cron(dict(cron))
    unknown = set(changes) - (set(Job.model_fields) - {"name", "workspace"})
    if unknown:
        raise JobError(f"a job's {', '.join(sorted(unknown))} cannot be changed: make a new job")
    job = Job(**{**current.model_dump(), **changes})
    if "tools" in changes:
        _check_tools(job, await _workspace_assistant(client, job.workspace))
    fields = await _cron_fields(client, job)
    fields.pop("on_run_completed")
    await client.crons.update(cron["cron_id"], **fields)
    return job


async def set_enabled(client: LangGraphClient, name: str, enabled: bool) -> None:
    """Pause a job (``False``) or resume it: paused, only "run now" starts it."""
    await client.crons.update((await _job_cron(client, name))["cron_id"], enabled=enabled)


async def delete_job(client: LangGraphClient, name: str) -> None:
    """Delete the job's schedule; the threads of its runs stay the person's."""
    await client.crons.delete((await _job_cron(client, name))["cron_id"])


async def run_now(client: LangGraphClient, name: str) -> str:
    """Start one run of the job now, as its schedule would (the same input and context); its thread id."""
    cron = await _job_cron(client, name)
    job = Job.from_cron(dict(cron))
    thread = (await client.threads.create(metadata={"job": job.name}))["thread_id"]
    context = job.context(await whoami(client))
    await client.runs.create(thread, cron["assistant_id"], input=job.run_input(), context=context)
    return thread


def _run_state(thread: dict[str, Any], values: dict[str, Any]) -> RunState:
    status = thread.get("status")
    if status == "busy":
        return "running"
    if status == "interrupted":
        return "waiting"
    if status == "error":
        return "failed"
    return "timed_out" if values.get("stop_reason") == "timed_out" else "completed"


async def job_runs(client: LangGraphClient, name: str, limit: int = 20) -> list[JobRun]:
    """The job's runs, newest first, as recorded by the runs themselves (``nodes/route.py``)."""
    await _job_cron(client, name)
    user = await whoami(client)
    found = await client.store.search_items(run_key(user, name), limit=100)
    items = sorted(found["items"], key=lambda i: -float(i["value"].get("started_at", 0)))[:limit]
    runs = []
    for item in items:
        thread_id = item["value"]["thread_id"]
        try:
            thread = dict(await client.threads.get(thread_id))
            state = dict(await client.threads.get_state(thread_id))
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:  # the person deleted the run's thread
                continue
            raise
        values = state.get("values") or {}
        values = values if isinstance(values, dict) else {}
        tasks = cast(list[dict[str, Any]], state.get("tasks") or [])
        interrupts = [i for t in tasks for i in t.get("interrupts") or []]
        run_state = _run_state(thread, values)
        if run_state != "waiting" and interrupts:
            run_state = "waiting"  # Aegra's thread status can lag its state
        messages = values.get("messages") or []
        answer = messages[-1].get("content") if messages and run_state != "waiting" else None
        waiting_on = interrupts[0]["value"] if run_state == "waiting" and interrupts else None
        runs.append(
            JobRun(
                thread_id, float(item["value"]["started_at"]), run_state, waiting_on, answer and str(answer)
            )
        )
    return runs


async def decide(client: LangGraphClient, name: str, run: str, approve: bool) -> dict[str, Any]:
    """Approve or reject every call a waiting run of the job shows, and let the run go on to its end.

    ``run`` is the run's thread id or a unique prefix of it, as ``runs`` prints it.
    """
    waiting = [r for r in await job_runs(client, name, limit=100) if r.thread_id.startswith(run)]
    if len(waiting) != 1:
        raise JobError(f"job {name!r} has {'no' if not waiting else 'more than one'} run {run!r}")
    card = waiting[0].waiting_on
    if card is None or card.get("type") != "tool_approval":
        raise JobError(f"run {waiting[0].thread_id} of job {name!r} is not waiting for an approval")
    kind = "approve" if approve else "reject"
    decisions = [{"type": kind, "tool_call_id": a["tool_call_id"]} for a in card["action_requests"]]
    cron = await _job_cron(client, name)
    job = Job.from_cron(dict(cron))
    result = await client.runs.wait(
        waiting[0].thread_id,
        cron["assistant_id"],
        command={"resume": {"decisions": decisions}},
        context=job.context(await whoami(client)),
    )
    return dict(result) if isinstance(result, dict) else {}


# ── the command line ─────────────────────────────────────────────────────────────────────────────────────


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``jobs add|list|edit|pause|resume|delete|run|runs|approve|reject``."""
    parser = sub.add_parser("jobs", help="scheduled agent jobs on a server (make serve, langgraph dev)")
    server_options(parser)
    actions = parser.add_subparsers(dest="jobs_action", required=True)
    for action, text in (
        ("add", "schedule a new job in --workspace"),
        ("edit", "change a job's prompt, schedule, time zone, tools or time limit"),
    ):
        p = actions.add_parser(action, help=text)
        p.add_argument("name")
        p.add_argument("--prompt", required=action == "add", help="the message each run starts with")
        p.add_argument("--schedule", required=action == "add", help="cron syntax, e.g. '0 9 * * 1-5'")
        p.add_argument("--tz", help="IANA time zone of the schedule (default: this machine's, else UTC)")
        p.add_argument("--tools", help="comma-separated tool names (patterns) the job may use")
        p.add_argument(
            "--time-limit", type=float, help=f"seconds a run may work (default {DEFAULT_TIME_LIMIT:g})"
        )
        if action == "add":
            p.add_argument("--paused", action="store_true", help="create it paused")
    actions.add_parser("list", help="your jobs, their schedules and next runs")
    for action, text in (
        ("pause", "stop a job's schedule (run now still works)"),
        ("resume", "start a paused job's schedule again"),
        ("delete", "delete a job (its runs' threads stay)"),
        ("run", "run a job now"),
        ("runs", "a job's runs: running, waiting (with the approval they wait for), completed, timed out"),
    ):
        actions.add_parser(action, help=text).add_argument("name")
    for action in ("approve", "reject"):
        p = actions.add_parser(action, help=f"{action} every call a waiting run of a job asks about")
        p.add_argument("name")
        p.add_argument("run", help="the run's thread id, or its first characters as runs shows them")
    parser.set_defaults(handler=command)


def local_zone() -> str:
    """The IANA time zone of this machine (``TZ``, ``/etc/timezone``, ``/etc/localtime``), else UTC."""
    if (zone := os.environ.get("TZ", "").lstrip(":")) and "/" in zone:
        return zone
    try:
        with open("/etc/timezone", encoding="utf-8") as f:
            return f.read().strip() or "UTC"
    except OSError:
        pass
    target = os.path.realpath("/etc/localtime")
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "UTC"


def _changes(args: argparse.Namespace) -> dict[str, Any]:
    given = {
        "prompt": args.prompt,
        "schedule": args.schedule,
        "timezone": args.tz,
        "tools": [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools is not None else None,
        "time_limit": args.time_limit,
    }
    return {k: v for k, v in given.items() if v is not None}


def _say(console: Console, line: str) -> None:
    """One line as it is, tabs kept: for scripts, never wrapped, coloured or read as markup."""
    console.file.write(line + "\n")


def _print_runs(console: Console, runs: list[JobRun]) -> None:
    for run in runs:
        when = datetime.fromtimestamp(run.started_at).isoformat(timespec="seconds")
        line = f"{run.thread_id[:8]}\t{when}\t{run.state}"
        if run.waiting_on and run.waiting_on.get("type") == "tool_approval":
            calls = [f"{a['name']}({json.dumps(a['args'])})" for a in run.waiting_on["action_requests"]]
            line += "\twaits for approval of " + ", ".join(calls)
        elif run.waiting_on:
            line += f"\twaits for an answer: {run.waiting_on.get('question')}"
        elif run.answer:
            line += f"\t{run.answer[:120]}"
        _say(console, line)


async def _work(args: argparse.Namespace, console: Console) -> int:
    client = get_client(url=args.server, api_key=args.api_key)
    action, name = args.jobs_action, str(getattr(args, "name", ""))
    if action == "add":
        values = {"name": name, "workspace": args.workspace, "timezone": local_zone(), **_changes(args)}
        job = Job(**values, enabled=not args.paused)
        await create_job(client, job)
        first = "paused" if args.paused else f"first run {next_runs(job)[0].isoformat(timespec='minutes')}"
        _say(
            console, f"scheduled job {job.name} in {job.workspace}: {job.schedule} ({job.timezone}), {first}"
        )
    elif action == "edit":
        job = await edit_job(client, name, **_changes(args))
        _say(console, f"job {job.name}: {job.schedule} ({job.timezone}), time limit {job.time_limit:g} s")
    elif action == "list":
        for job, _cron in await list_jobs(client):
            upcoming = next_runs(job)[0].isoformat(timespec="minutes") if job.enabled else "paused"
            tools = ",".join(job.tools) if job.tools is not None else "workspace's tools"
            fields = [job.name, job.workspace, job.schedule, job.timezone, upcoming, tools, job.prompt[:60]]
            _say(console, "\t".join(fields))
    elif action in ("pause", "resume"):
        await set_enabled(client, name, action == "resume")
        _say(console, f"job {name} {'paused' if action == 'pause' else 'resumed'}")
    elif action == "delete":
        await delete_job(client, name)
        _say(console, f"job {name} deleted; the threads of its runs stay")
    elif action == "run":
        _say(console, f"job {name} started: thread {await run_now(client, name)}")
    elif action == "runs":
        _print_runs(console, await job_runs(client, name))
    else:
        result = await decide(client, name, args.run, action == "approve")
        messages = result.get("messages") or [{}]
        _say(console, str(messages[-1].get("content", "")))
    return 0


def command(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run one ``jobs`` action against the server and print its outcome."""
    console = console or Console()
    try:
        return asyncio.run(_work(args, console))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise JobError(problems) from None
    except httpx.HTTPStatusError as exc:
        raise JobError(f"{args.server} answered {exc.response.status_code}: {exc.response.text}") from None
    except httpx.TransportError as exc:
        raise JobError(f"no server at {args.server} ({exc}); start one with `make serve`") from None
