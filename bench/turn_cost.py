"""Cost of a full one-tool turn on PostgreSQL: our graph against LangChain's prebuilt agent, same saver.

Both graphs run on ONE pool-backed saver (``postgres_saver``), with the same in-process model (one tool call,
then an answer) and the same read-only tool, so the difference is what each graph does per turn. Ours runs
as a program runs it: its chat log, documents and memories in the project's PostgreSQL and its turn lock on.
A third line, ours with the chat log and documents in memory, separates the checkpoints from our nodes' own
queries; both graphs once more on an ``InMemorySaver`` give the cost of a turn without checkpoint I/O.
It prints:

- per turn: checkpoints written (supersteps + 1 for the input), saver calls, statements, and round trips
  (waits in psycopg's ``wait`` that had to read the server's answer: every query, pipeline sync and pool
  check goes through it), split by who asked;
- the median one-tool turn on a fresh thread, all graphs interleaved so machine noise hits all alike;
- throughput with 50 threads running a turn at once, rounds interleaved, on PostgreSQL and in memory;
- the split: time in memory, and checkpoint I/O on top of it, per turn and per checkpoint.

Goals (issue 14): a turn ≤ 2× the prebuilt agent's time, throughput ≥ 0.5× its throughput.
``--stock-saver`` runs the PostgreSQL lines on langgraph's own ``AsyncPostgresSaver``, on a pool checked by
a query, as the project did before.
Run: ``python bench/turn_cost.py [turns] [threads] [rounds] [--stock-saver]``.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from common import ToolThenAnswer, median_ms, timed
from langchain.agents import create_agent
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg.waiting import Wait
from psycopg_pool import AsyncConnectionPool
from turn_overhead import NoDocuments

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.checkpoints.embedded import database_url
from workspace_agent.checkpoints.savers import POOL_SIZE, postgres_saver
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.skills.builtin import current_datetime

BASELINE, OURS = "prebuilt create_agent", "workspace-agent"
NO_OWN_IO = "workspace-agent, log+docs in memory"
MEM_BASELINE, MEM_OURS = "prebuilt, InMemorySaver", "workspace-agent, InMemorySaver"
SAVER_CALLS = ("aget_tuple", "aput", "aput_writes", "alist", "aget_delta_channel_history")
_asker: contextvars.ContextVar[str] = contextvars.ContextVar("asker", default="nodes")


class Probe:
    """Counts saver calls and waits on the server (≈ round trips), by who asked, while switched on."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.on = False
        self.counts: Counter[str] = Counter()

    @contextmanager
    def installed(self) -> Iterator[Probe]:
        """Wrap psycopg's waits and the saver's calls for the duration of the block."""
        probe = self
        async_wait, sync_wait = psycopg.AsyncConnection.wait, psycopg.Connection.wait

        def blocking(gen: Generator[Any, Any, Any], who: str) -> Generator[Any, Any, Any]:
            # A wait is a round trip when it had to wait for the server's answer (a read-only wait);
            # sending a pipeline's queries, or reading what has already arrived, is not.
            counted, sent = False, None
            while True:
                try:
                    state = gen.send(sent)
                except StopIteration as stop:
                    return stop.value
                if state == Wait.R and not counted and probe.on:
                    probe.counts[f"trips {who}"] += 1
                    counted = True
                sent = yield state

        async def counted_async_wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            return await async_wait(conn, blocking(gen, _asker.get()), *args, **kwargs)

        def counted_sync_wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            return sync_wait(conn, blocking(gen, "turn lock (sync connection)"), *args, **kwargs)

        def wrap(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def call(*args: Any, **kwargs: Any) -> Any:
                if probe.on:
                    probe.counts[f"calls {name}"] += 1
                token = _asker.set(f"saver.{name}")
                try:
                    return await method(*args, **kwargs)
                finally:
                    _asker.reset(token)

            return call

        async_execute, async_executemany = psycopg.AsyncCursor.execute, psycopg.AsyncCursor.executemany

        async def counted_execute(cur: Any, *args: Any, **kwargs: Any) -> Any:
            if probe.on:
                probe.counts[f"queries {_asker.get()}"] += 1
            return await async_execute(cur, *args, **kwargs)

        async def counted_executemany(cur: Any, query: Any, params: Any, **kwargs: Any) -> Any:
            params = list(params)
            if probe.on:
                probe.counts[f"queries {_asker.get()}"] += len(params)
            return await async_executemany(cur, query, params, **kwargs)

        psycopg.AsyncCursor.execute = counted_execute  # type: ignore[method-assign]
        psycopg.AsyncCursor.executemany = counted_executemany  # type: ignore[method-assign]
        psycopg.AsyncConnection.wait = counted_async_wait  # type: ignore[method-assign]
        psycopg.Connection.wait = counted_sync_wait  # type: ignore[method-assign]
        originals = {name: getattr(self.saver, name) for name in SAVER_CALLS}
        for name, method in originals.items():
            setattr(self.saver, name, wrap(name, method))
        try:
            yield self
        finally:
            psycopg.AsyncConnection.wait, psycopg.Connection.wait = async_wait, sync_wait  # type: ignore[method-assign]
            psycopg.AsyncCursor.execute = async_execute  # type: ignore[method-assign]
            psycopg.AsyncCursor.executemany = async_executemany  # type: ignore[method-assign]
            for name in originals:
                delattr(self.saver, name)

    async def per_turn(self, turn: Callable[[], Awaitable[Any]], turns: int = 20) -> dict[str, float]:
        """Mean counts over ``turns`` sequential turns."""
        self.counts.clear()
        self.on = True
        try:
            for _ in range(turns):
                await turn()
        finally:
            self.on = False
        return {k: v / turns for k, v in sorted(self.counts.items())}


RUN = uuid.uuid4().hex[:8]
#: What a run leaves in the database, removed when it ends: its threads' checkpoints and its chat log.
CLEANUP = (
    "DELETE FROM checkpoints WHERE thread_id LIKE %(threads)s",
    "DELETE FROM checkpoint_blobs WHERE thread_id LIKE %(threads)s",
    "DELETE FROM checkpoint_writes WHERE thread_id LIKE %(threads)s",
    "DELETE FROM chat_log WHERE workspace = %(workspace)s",
)


def thread() -> dict:
    return {"configurable": {"thread_id": f"turn-cost-{RUN}-{uuid.uuid4().hex}"}}


async def remove_run(saver: Any, workspace: str) -> None:
    """Delete this run's threads and chat log rows."""
    async with saver.conn.connection() as conn:
        for statement in CLEANUP:
            await conn.execute(statement, {"threads": f"turn-cost-{RUN}-%", "workspace": workspace})


async def throughput(turn: Callable[[], Awaitable[Any]], threads: int) -> float:
    """Turns per second with ``threads`` threads each running one turn at once.

    The previous burst's garbage is collected first, outside the timing: otherwise whichever graph runs
    next pays for it (measured: the order of two graphs alone moved their ratio from 0.32x to 0.71x).
    """
    await asyncio.sleep(0.05)  # let the previous burst's background writes finish
    gc.collect()
    started = time.perf_counter()
    await asyncio.gather(*(turn() for _ in range(threads)))
    return threads / (time.perf_counter() - started)


def ratio_line(label: str, value: float, base: float, unit: str, goal: str) -> str:
    return f"  {label:<34}: {value:8.2f} {unit}  ratio {value / base:.2f}x  {goal}"


Turns = dict[str, Callable[[], Awaitable[Any]]]


async def timings(graphs: Turns, turns: int) -> dict[str, float]:
    """Median turn time of every graph in ms, runs interleaved so machine noise hits all alike."""
    samples: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(turns):
        for name, turn in graphs.items():
            samples[name].append(await timed(turn))
    return {name: median_ms(s) for name, s in samples.items()}


async def rates(graphs: Turns, threads: int, rounds: int) -> dict[str, float]:
    """Median throughput of every graph, ``threads`` turns at once, rounds interleaved."""
    samples: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(rounds):
        for name, turn in graphs.items():
            samples[name].append(await throughput(turn, threads))
    return {name: statistics.median(r) for name, r in samples.items()}


async def io_split(saver: Any, graphs: Turns) -> dict[str, float]:
    """Checkpoints, saver calls, queries and round trips per turn, by who asked; checkpoints per graph."""
    print("per turn, mean of 20 sequential turns (checkpoints written = supersteps + 1 for the input):")
    checkpoints = {}
    with Probe(saver).installed() as probe:
        for name, turn in graphs.items():
            counts = await probe.per_turn(turn)
            trips = sum(v for k, v in counts.items() if k.startswith("trips"))
            puts = checkpoints[name] = counts.get("calls aput", 0.0)
            saver_trips = sum(v for k, v in counts.items() if k.startswith("trips saver"))
            print(
                f"  {name}: {puts:.0f} checkpoints, {trips:.1f} round trips ({saver_trips:.1f} checkpoint "
                f"I/O: {saver_trips / max(puts, 1):.2f} per checkpoint)"
            )
            for key, value in counts.items():
                print(f"      {key:<44} {value:6.1f}")
    return checkpoints


@asynccontextmanager
async def stock_saver() -> AsyncIterator[AsyncPostgresSaver]:
    """Langgraph's own saver on a pool checked by psycopg's round trip: what the project used before."""
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    check = AsyncConnectionPool.check_connection
    url = await asyncio.to_thread(database_url)
    async with AsyncConnectionPool(url, max_size=POOL_SIZE, kwargs=kwargs, check=check, open=False) as pool:
        await pool.wait(timeout=30)
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        yield saver


async def main(turns: int, threads: int, rounds: int, stock: bool) -> None:
    model = ToolThenAnswer(calls=[("current_datetime", {})])
    message = {"messages": [{"role": "user", "content": "what time is it?"}]}
    context = Context(model="bench", workspace=f"bench-{RUN}")
    stock_name = "langgraph's AsyncPostgresSaver, its pool checked by a query"
    print("saver:", stock_name if stock else "the project's postgres_saver()")
    async with stock_saver() if stock else postgres_saver() as saver:
        try:
            await measure(saver, turns, threads, rounds, model, message, context)
        finally:
            await remove_run(saver, context.workspace)


async def measure(
    saver: Any, turns: int, threads: int, rounds: int, model: Any, message: dict, context: Context
) -> None:
    """Build the graphs on ``saver`` (and in memory), print the counts, the timings and the split."""
    clock = StructuredTool.from_function(current_datetime)
    no_documents: Any = NoDocuments()
    ours = build_graph(checkpointer=saver, model=model)
    no_own_io = build_graph(checkpointer=saver, model=model, records=MemoryRecords(), documents=no_documents)
    prebuilt = create_agent(model, [clock], checkpointer=saver)
    # The same two graphs with checkpoints in process memory: what a turn costs without checkpoint I/O.
    ours_mem = build_graph(
        checkpointer=InMemorySaver(), model=model, records=MemoryRecords(), documents=no_documents
    )
    prebuilt_mem = create_agent(model, [clock], checkpointer=InMemorySaver())
    on_postgres: Turns = {
        BASELINE: lambda: prebuilt.ainvoke(message, thread()),
        OURS: lambda: ours.ainvoke(message, thread(), context=context),
        NO_OWN_IO: lambda: no_own_io.ainvoke(message, thread(), context=context),
    }
    in_memory: Turns = {
        MEM_BASELINE: lambda: prebuilt_mem.ainvoke(message, thread()),
        MEM_OURS: lambda: ours_mem.ainvoke(message, thread(), context=context),
    }
    for _ in range(20):  # warm up: imports, schemas, pools, caches
        for turn in (*on_postgres.values(), *in_memory.values()):
            await turn()
    checkpoints = await io_split(saver, on_postgres)
    if not turns:
        return
    ms = await timings({**on_postgres, **in_memory}, turns)
    print(f"one-tool turn, fresh thread, median of {turns} (interleaved):")
    for name in on_postgres:
        print(ratio_line(name, ms[name], ms[BASELINE], "ms", "(goal <= 2x)" if name == OURS else ""))
    for name in in_memory:
        print(ratio_line(name, ms[name], ms[MEM_BASELINE], "ms", ""))
    per_s = await rates(on_postgres, threads, rounds)
    print(f"throughput on PostgreSQL, {threads} threads x 1 turn at once, median of {rounds} rounds:")
    for name, rate in per_s.items():
        print(ratio_line(name, rate, per_s[BASELINE], "turns/s", "(goal >= 0.5x)" if name == OURS else ""))
    # The same burst without checkpoint I/O: how much of the throughput gap is the graph's own work.
    per_s = await rates(in_memory, threads, rounds)
    print(f"throughput in memory, {threads} threads x 1 turn at once, median of {rounds} rounds:")
    for name, rate in per_s.items():
        print(ratio_line(name, rate, per_s[MEM_BASELINE], "turns/s", ""))
    print("split of a turn on PostgreSQL: the same graph in memory, and the checkpoint I/O on top of it:")
    for pg, mem in ((BASELINE, MEM_BASELINE), (NO_OWN_IO, MEM_OURS)):
        io = ms[pg] - ms[mem]
        n = checkpoints[pg]
        print(
            f"  {pg:<34}: {ms[mem]:6.2f} ms in memory + {io:6.2f} ms checkpoint I/O "
            f"({n:.0f} checkpoints, {io / n:.2f} ms each)"
        )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:] if a != "--stock-saver"]
    turns, threads, rounds = (args + [200, 50, 5][len(args) :])[:3]
    asyncio.run(main(turns, threads, rounds, "--stock-saver" in sys.argv))
