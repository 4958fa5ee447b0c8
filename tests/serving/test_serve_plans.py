"""The launcher's arithmetic: connection budgets per instance count, and intervals as cron schedules."""

from __future__ import annotations

import os

import pytest

from workspace_agent.server.memory_cron import cron_schedule, scheduler_env
from workspace_agent.server.pools import PROJECT_POOL, plan_pools


@pytest.mark.parametrize("instances", [1, 2, 3, 4, 5])
def test_every_supported_instance_count_fits_the_embedded_servers_100_connections(instances):
    plan = plan_pools(100, instances)
    assert plan.total <= 100 - 20
    assert plan.per_instance == plan.sqlalchemy + plan.overflow + plan.langgraph + PROJECT_POOL
    assert plan.env()["LANGGRAPH_MAX_POOL_SIZE"] == str(plan.langgraph) and plan.langgraph >= 4


def test_the_numbers_for_one_and_two_instances():
    one, two = plan_pools(100, 1), plan_pools(100, 2)
    assert (one.sqlalchemy, one.overflow, one.langgraph, one.per_instance) == (10, 18, 20, 56)
    assert (two.sqlalchemy, two.overflow, two.langgraph, two.per_instance, two.total) == (8, 8, 16, 40, 80)


def test_too_many_instances_are_refused_with_how_many_fit():
    with pytest.raises(ValueError, match="at most 5 fit"):
        plan_pools(100, 6)
    assert plan_pools(400, 6).total <= 380


@pytest.mark.parametrize(
    ("interval", "schedule"),
    [
        ("3h", "0 */3 * * *"),
        ("24h", "0 0 * * *"),
        ("15m", "*/15 * * * *"),
        ("30s", "*/30 * * * * *"),
        ("off", None),
    ],
)
def test_intervals_become_exact_cron_schedules(interval, schedule):
    assert cron_schedule(interval) == schedule


@pytest.mark.parametrize("interval", ["1h30m", "7m", "5h", "soon"])
def test_intervals_without_an_exact_schedule_are_refused(interval):
    with pytest.raises(ValueError):
        cron_schedule(interval)


def test_the_scheduler_polls_often_enough_for_the_interval_and_for_jobs(monkeypatch):
    for name in [n for n in os.environ if n.startswith("CRON_")]:
        monkeypatch.delenv(name)
    assert scheduler_env("3h") == {"CRON_POLL_INTERVAL_SECONDS": "15"}  # users' jobs start on time
    assert scheduler_env("2s") == {"CRON_POLL_INTERVAL_SECONDS": "1", "CRON_ALLOW_SECONDS_SCHEDULE": "true"}
    assert scheduler_env("off") == {"CRON_POLL_INTERVAL_SECONDS": "15"}
    monkeypatch.setenv("CRON_POLL_INTERVAL_SECONDS", "2")  # the deployment's own setting wins
    assert scheduler_env("off") == {"CRON_POLL_INTERVAL_SECONDS": "2"}
