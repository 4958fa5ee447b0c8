"""Memories when served: the ``memory`` graph on the server's own cron, every ``MEMORY_EXTRACTION_INTERVAL``.

Without this, a served deployment never extracts memories (the CLI's ``memory schedule`` is a loop in a
terminal). Aegra's scheduler is the right owner: its crons live in PostgreSQL, and every instance polls them
but claims a due cron with ``SELECT … FOR UPDATE SKIP LOCKED``, so one firing starts one run however many
instances there are. Below that, ``PostgresMemories.apply`` marks a batch's chats only if none was marked
meanwhile, in the transaction that stores their memories, so even a cron fired twice (Aegra re-fires one
whose instance died mid-claim) never stores or marks a chat twice.

The cron is the project's, found by metadata and kept to one: each launch updates its schedule, removes
copies, or removes it when the interval is ``off``. With API keys configured it belongs to the deployment's
service identity (``server/auth.py``), not to a user: a user's cron runs for that user alone, while the
memory job reads every user's chats and keeps each one's memories under that chat's own user.
"""

from __future__ import annotations

import os
import secrets
from typing import Literal

from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Cron

from ..graphs.schedule import DEFAULT_INTERVAL, parse_interval
from .auth import SERVICE_KEY_ENV

JOB = {"managed_by": "workspace-agent", "job": "memory-extraction"}
OFF = ("off", "none", "0", "never")
#: The longest the scheduler waits between two looks at the crons: users' jobs start at most this late.
JOB_POLL_SECONDS = 15


def service_key() -> str:
    """The key of the deployment's service identity: ``WORKSPACE_AGENT_SERVICE_KEY``, else a new one.

    A new random key per launch is enough: it is handed to the instances in their environment and used by
    the launcher alone, and the cron it creates keeps firing as the service identity, not by the key.
    """
    return os.environ.get(SERVICE_KEY_ENV, "").strip() or secrets.token_urlsafe(32)


def cron_schedule(interval: str) -> str | None:
    """The cron expression firing every ``interval`` (e.g. ``3h`` → ``0 */3 * * *``); ``None`` for off.

    Cron fires on wall-clock boundaries, so only intervals that divide a minute, an hour or a day evenly
    have an exact expression; anything else is refused rather than silently rounded.

    Raises:
        ValueError: Not an interval, or one without an exact cron expression.
    """
    if interval.strip().lower() in OFF:
        return None
    seconds = parse_interval(interval)
    if seconds != int(seconds):
        raise ValueError(f"MEMORY_EXTRACTION_INTERVAL={interval!r}: use whole seconds")
    s = int(seconds)
    if s < 60 and 60 % s == 0:
        return f"*/{s} * * * * *"  # seconds-first: for tests and demos (CRON_ALLOW_SECONDS_SCHEDULE)
    if s % 60 == 0 and s < 3600 and 60 % (s // 60) == 0:
        return f"*/{s // 60} * * * *"
    if s % 3600 == 0 and s <= 86400 and 24 % (s // 3600) == 0:
        return "0 0 * * *" if s == 86400 else f"0 */{s // 3600} * * *"
    raise ValueError(
        f"MEMORY_EXTRACTION_INTERVAL={interval!r} has no exact cron schedule: use a divisor of a minute "
        "(e.g. 30s), of an hour (e.g. 15m) or of a day (e.g. 3h, 24h), or 'off'"
    )


def scheduler_env(interval: str | None) -> dict[str, str]:
    """Aegra's scheduler settings for ``interval``: poll often enough to fire on time.

    Users' scheduled jobs share the scheduler, so it polls at least every ``JOB_POLL_SECONDS`` (Aegra's own
    default, 60 s, would start a 9:00 job at up to 9:01). A deployment's own ``CRON_*`` settings win.
    """
    schedule = cron_schedule(interval or DEFAULT_INTERVAL)
    poll = JOB_POLL_SECONDS
    if schedule:  # the memory job's own slots need a look at least twice an interval
        poll = max(1, min(poll, int(parse_interval(interval or DEFAULT_INTERVAL)) // 2))
    env = {"CRON_POLL_INTERVAL_SECONDS": str(poll)}
    if schedule and len(schedule.split()) == 6:
        env["CRON_ALLOW_SECONDS_SCHEDULE"] = "true"
    return env | {k: v for k, v in os.environ.items() if k.startswith("CRON_")}


async def ensure_memory_cron(
    client: LangGraphClient, interval: str | None
) -> tuple[Cron | None, Literal["created", "updated", "unchanged", "removed", "off"]]:
    """Make exactly one memory cron exist with ``interval``'s schedule (none when off).

    The caller holds a lock (the launcher: a PostgreSQL advisory lock), so two launchers starting at once
    cannot both create one.
    """
    schedule = cron_schedule(interval or DEFAULT_INTERVAL)
    found = sorted(await client.crons.search(metadata=JOB, limit=100), key=lambda c: str(c.get("created_at")))
    keep, extra = (found[0], found[1:]) if found else (None, [])
    if schedule is None:
        extra = found
    for cron in extra:
        await client.crons.delete(cron["cron_id"])
    if schedule is None:
        return None, "removed" if found else "off"
    if keep is None:  # Aegra answers with the first run, fired at once; the cron is found again below
        await client.crons.create(
            "memory", schedule=schedule, input={}, metadata=JOB, on_run_completed="delete"
        )
        return (await client.crons.search(metadata=JOB, limit=1))[0], "created"
    if keep.get("schedule") == schedule and keep.get("enabled", True):
        return keep, "unchanged"
    return await client.crons.update(keep["cron_id"], schedule=schedule, enabled=True), "updated"
