"""Scheduled agent jobs: a workspace, a prompt, a schedule, the tools it may use and a time limit.

A job is kept as the serving engine's own cron (Aegra's under ``make serve``, ``langgraph dev``'s crons):
the engine owns the schedule, claims a due slot once however many instances poll, and after downtime fires
a missed job once, not once per missed slot. This module is the job's shape and its translation to and from
a cron, so the CLI, a program and the tests agree on it. Each firing is an ordinary run of the ``agent``
graph on a thread of its own, whose context says it is the job's (``Context.job``):

- **no one is there**, so ``ask_person`` is never offered, and a call that needs approval leaves the run
  waiting on its approval card: a job never approves for the person (AnythingLLM's jobs approve every
  call themselves);
- its tools are the job's ``tools`` within the workspace's (``Context.only_tools`` narrows, never widens);
- its ``time_limit`` ends it as ``timed_out``, keeping what it did;
- its first node records the run under the job in the store (``record_run``): the engines do not carry a
  cron's metadata onto the threads they fire (Aegra drops it), so this record is how a job's runs are found.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .context import SLUG, WORKSPACE_REF
from .state import Decision, decision

#: The store namespace a job's runs are recorded under, after the user's (``run_key``).
JOB_RUNS = "job_runs"
#: A cron's metadata that marks it as a job (and names it), so jobs are found among other crons.
KIND = "agent_job"
#: Seconds a job's run may work unless the job says otherwise.
DEFAULT_TIME_LIMIT = 600.0


class Job(BaseModel):
    """One scheduled job, as its owner writes it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=SLUG.pattern, description="The job's name, unique among its owner's jobs.")
    workspace: str = Field(
        pattern=WORKSPACE_REF.pattern, description="The workspace the job runs in (owner/slug: a shared one)."
    )
    prompt: str = Field(min_length=1, max_length=8000, description="The message each run starts with.")
    schedule: str = Field(
        description="Five-field cron syntax, read in timezone (e.g. 0 9 * * 1-5). Six fields, seconds first, "
        "where the server allows them (make serve with CRON_ALLOW_SECONDS_SCHEDULE, for tests and demos)."
    )
    timezone: str = Field(default="UTC", description="IANA time zone the schedule is read in.")
    tools: list[str] | None = Field(
        default=None,
        description="Tool-name patterns the job may use, within the workspace's; unset: its all.",
    )
    time_limit: float = Field(
        default=DEFAULT_TIME_LIMIT, gt=0, le=86_400, description="Seconds a run may work."
    )
    enabled: bool = Field(default=True, description="False: paused, fired by nothing but run now.")

    @field_validator("prompt")
    @classmethod
    def _words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the prompt is empty")
        return value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        value = " ".join(value.split())
        fields = len(value.split())
        if fields not in (5, 6) or not croniter.is_valid(value, second_at_beginning=fields == 6):
            raise ValueError(f"{value!r} is not a five-field cron schedule (minute hour day month weekday)")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Europe/Berlin)") from None
        return value

    def context(self, user: str | None) -> dict[str, Any]:
        """The runs' context: the job's marks and limits, and its owner (Aegra keeps a cron's as sent)."""
        values: dict[str, Any] = {
            "workspace": self.workspace,
            "job": self.name,
            "time_limit": self.time_limit,
        }
        if self.tools is not None:
            values["only_tools"] = list(self.tools)
        if user is not None:
            values["user_id"] = user
        return values

    def run_input(self) -> dict[str, Any]:
        """The input of each run: the prompt as the person's message."""
        return {"messages": [{"role": "user", "content": self.prompt}]}

    def cron(self, user: str | None) -> dict[str, Any]:
        """The keyword arguments of ``crons.create`` (and, but ``on_run_completed``, of ``crons.update``)."""
        return {
            "schedule": self.schedule,
            "timezone": self.timezone,
            "input": self.run_input(),
            "context": self.context(user),
            "metadata": {"kind": KIND, "job": self.name, "workspace": self.workspace},
            "on_run_completed": "keep",  # each run is a thread the person can open
            "enabled": self.enabled,
        }

    @classmethod
    def from_cron(cls, cron: dict[str, Any]) -> Job:
        """The job a cron holds (one ``Job.cron`` made); ``ValueError`` for a cron that holds none."""
        payload = cron.get("payload") or {}
        context = payload.get("context") or (payload.get("config") or {}).get("configurable") or {}
        messages = (payload.get("input") or {}).get("messages") or [{}]
        return cls(
            name=str((cron.get("metadata") or {}).get("job") or context.get("job") or ""),
            workspace=context.get("workspace", "default"),
            prompt=messages[0].get("content", ""),
            schedule=cron["schedule"],
            timezone=payload.get("timezone") or cron.get("timezone") or "UTC",
            tools=context.get("only_tools"),
            time_limit=context.get("time_limit", DEFAULT_TIME_LIMIT),
            enabled=cron.get("enabled", True),
        )


def next_runs(job: Job, count: int = 1, now: datetime | None = None) -> list[datetime]:
    """The job's next ``count`` slots, in its time zone: what ``jobs list`` shows."""
    zone = ZoneInfo(job.timezone)
    seconds = len(job.schedule.split()) == 6
    it = croniter(job.schedule, (now or datetime.now(UTC)).astimezone(zone), second_at_beginning=seconds)
    return [it.get_next(datetime) for _ in range(count)]


def deadline(time_limit: float | None) -> float | None:
    """When a run with ``time_limit`` seconds of work must stop (epoch seconds); ``None`` for no limit."""
    return time.time() + time_limit if time_limit else None


def time_left(until: float | None) -> float | None:
    """Seconds until ``until`` (never below 0); ``None`` for no limit."""
    return None if until is None else max(0.0, until - time.time())


def run_key(user_id: str, job: str) -> tuple[str, ...]:
    """Where a user's job records its runs in the store.

    Under ``("users", user)``: where Aegra keeps each user's part of the store, and where ``server/auth.py``
    lets that user, and only them, read under ``langgraph dev``.
    """
    return ("users", user_id, JOB_RUNS, job)


def timed_out(time_limit: float | None, detail: str) -> dict[str, Any]:
    """The update of a run past its time limit: ``timed_out`` (J1), so the turn goes to ``finish``."""
    why = f"the run reached its time limit of {time_limit or 0:g} s: {detail}"
    note: Decision = decision("J1", "code", "timed_out", why)
    return {"stop_reason": "timed_out", "decisions": [note]}
