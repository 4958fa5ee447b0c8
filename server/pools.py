"""Connection budgets for N Aegra instances on one PostgreSQL.

Each instance opens three kinds of connections: Aegra's SQLAlchemy engine (threads, runs, assistants, crons:
``SQLALCHEMY_POOL_SIZE`` + ``SQLALCHEMY_MAX_OVERFLOW``), its LangGraph pool (checkpointer and store:
``LANGGRAPH_MAX_POOL_SIZE``), and the project's own pool for the chat log, chunks and memories (at most
``PROJECT_POOL`` per event loop, see ``checkpoints/db.py``). Unsized, that is 30 + 20 + 8 = 58 per instance,
and the embedded PostgreSQL allows 100 in all: two default instances already exhaust it, and the first
thing to fail under load would be a new connection, not a slow one. So the launcher reads the server's
``max_connections``, keeps ``RESERVED`` for everything else (the CLI, ``langgraph dev``, migrations, psql),
and splits the rest evenly.
"""

from __future__ import annotations

from dataclasses import dataclass

PROJECT_POOL = 8
"""The project's pool per event loop (``checkpoints/db.py``); an Aegra instance runs one loop."""
WATCHER_POOL = 3
"""The folder watcher's pool: one connection holds its pass's lock, two do the work."""
RESERVED = 20
"""Connections left for other clients of the same database."""
AEGRA_DEFAULTS = {"sqlalchemy": 10, "overflow": 20, "langgraph": 20}
"""Aegra's own defaults: an instance never gets more than it would unsized."""
MINIMUM = {"sqlalchemy": 2, "overflow": 2, "langgraph": 4}
"""Below this an instance serves a handful of runs at once; the launcher refuses instead."""


@dataclass(frozen=True)
class PoolPlan:
    """Connections one instance may open, by pool, and what they add up to for all instances."""

    instances: int
    max_connections: int
    sqlalchemy: int
    overflow: int
    langgraph: int

    @property
    def per_instance(self) -> int:
        """The most connections one instance can hold at once."""
        return self.sqlalchemy + self.overflow + self.langgraph + PROJECT_POOL

    @property
    def total(self) -> int:
        """The most connections all instances can hold at once."""
        return self.per_instance * self.instances

    def env(self) -> dict[str, str]:
        """Aegra's settings for this plan."""
        return {
            "SQLALCHEMY_POOL_SIZE": str(self.sqlalchemy),
            "SQLALCHEMY_MAX_OVERFLOW": str(self.overflow),
            "LANGGRAPH_MAX_POOL_SIZE": str(self.langgraph),
            "LANGGRAPH_MIN_POOL_SIZE": str(min(2, self.langgraph)),
        }

    def describe(self) -> str:
        """One line for the launcher's banner."""
        return (
            f"{self.instances} instance(s) × ({self.sqlalchemy}+{self.overflow} SQLAlchemy + "
            f"{self.langgraph} checkpointer + {PROJECT_POOL} project) = {self.total} of "
            f"{self.max_connections} connections ({self.max_connections - self.total} left for other clients)"
        )


def plan_pools(max_connections: int, instances: int, reserved: int = RESERVED) -> PoolPlan:
    """Split ``max_connections - reserved`` evenly across ``instances``.

    Within an instance, the checkpointer gets half of what is left after the project's pool (every
    superstep of every run writes through it), the SQLAlchemy engine a quarter as its steady pool and a
    quarter as overflow for bursts of run creation; none gets more than Aegra's default.

    Raises:
        ValueError: The instances do not fit; the message says how many would.
    """
    if instances < 1:
        raise ValueError(f"SERVE_INSTANCES must be at least 1, got {instances}")
    share = (max_connections - reserved) // instances - PROJECT_POOL
    plan = PoolPlan(
        instances=instances,
        max_connections=max_connections,
        sqlalchemy=min(AEGRA_DEFAULTS["sqlalchemy"], share // 4),
        overflow=min(AEGRA_DEFAULTS["overflow"], share // 4),
        langgraph=min(AEGRA_DEFAULTS["langgraph"], share - 2 * (share // 4)),
    )
    if any(getattr(plan, name) < least for name, least in MINIMUM.items()):
        smallest = sum(MINIMUM.values()) + PROJECT_POOL
        fits = max(0, (max_connections - reserved) // smallest)
        raise ValueError(
            f"{instances} instances do not fit in PostgreSQL's max_connections={max_connections} "
            f"({reserved} kept for other clients, at least {smallest} per instance): at most {fits} fit. "
            "Raise max_connections or serve fewer instances."
        )
    return plan
