"""What a ``calculate`` call costs in its worker process: the current workers against an earlier revision's.

The earlier ``skills/workers.py`` is read from git (``--before``, default ``HEAD~1``) and loaded beside the
current one, so both run in the same process on the same machine load. Each round starts a fresh
``Workers`` per variant (the cold call: starting a worker) and then makes ``calls`` warm calls; rounds
alternate the order of the variants. Run from the checkout: ``python bench/calculate_worker.py [rounds]
[calls] [--before REV]``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from common import median_ms, timed

from workspace_agent.skills import workers as current
from workspace_agent.skills.calculator import calculate

ROOT = Path(__file__).resolve().parents[1]


def load_revision(revision: str, folder: Path) -> ModuleType:
    """``skills/workers.py`` as it was at ``revision``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{revision}:skills/workers.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = folder / "workers_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("workers_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def one_round(module: ModuleType, calls: int) -> tuple[float, list[float]]:
    """A cold call on fresh workers, then warm ones: seconds each."""
    workers: Any = module.Workers()
    try:
        cold = await timed(lambda: workers.run(calculate, "6*7"))
        warm = [await timed(lambda: workers.run(calculate, "(3 + 4) * 2")) for _ in range(calls)]
    finally:
        workers.close()
    return cold, warm


async def main(rounds: int, calls: int, before: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        variants = {"before": load_revision(before, Path(folder)), "after": current}
        cold: dict[str, list[float]] = {name: [] for name in variants}
        warm: dict[str, list[float]] = {name: [] for name in variants}
        for n in range(rounds):
            for name in sorted(variants, reverse=bool(n % 2)):
                first, rest = await one_round(variants[name], calls)
                cold[name].append(first)
                warm[name].extend(rest)
    print(f"calculate in a worker, {rounds} rounds of 1 cold + {calls} warm calls (before = {before})")
    for label, samples in (("cold", cold), ("warm", warm)):
        b, a = median_ms(samples["before"]), median_ms(samples["after"])
        print(f"{label}: before {b:8.2f} ms  after {a:8.2f} ms  after/before {a / b:5.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("calls", nargs="?", type=int, default=50)
    parser.add_argument("--before", default="HEAD~1")
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.rounds, options.calls, options.before)))
