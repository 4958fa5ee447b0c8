"""A resume that names an older checkpoint forks the thread, as Studio does; each branch keeps its own record.

LangGraph resumes at a checkpoint the thread has moved past by rerunning its tasks, but the answer an
interrupted task got there the first time is still stored on that checkpoint and comes back first: the
approve node would take the old decision for the new one (a person's "reject" on the fork ran the tool
again). So a resume addressed to an older checkpoint first copies it (``update_state(...,
as_node="__copy__")``, what Studio's fork does) and resumes the copy, which holds no answers yet. The run's
config then names the checkpoint it forked (``FORK_KEY``), so ``approve`` can say that its approval came
from a fork. The original branch's checkpoints are not written to.

The same class serves in-process and under a server: ``langgraph dev`` and Aegra copy the compiled graph
with their own checkpointer, and the copy keeps its class. Built with a saver of its own, the graph also
holds the thread's turn lock for the run (``checkpoints.turn_lock``); a server's copy has none, since the
server's multitask strategy decides there.

A served client does not write thread state either (DESIGN §2 "Who sets what"): a state written
``as_node="approve"`` would put calls in ``approved`` that no person approved. ``langgraph dev`` refuses that
in the auth handler, but Aegra's ``POST /threads/{id}/state`` calls none, so the graph itself refuses a
state write whose config carries a server's authenticated user. Only Studio's fork anchor (no values,
``as_node="__copy__"``), which copies a checkpoint without changing it, passes. A program's own
``update_state`` (no server in between) is trusted, as the program is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateUpdate

from ..checkpoints.turn_lock import TurnLock, turn_lock_for
from ..core.state import FORK_KEY

#: The configurable key under which a server (``langgraph dev``, Aegra) passes the authenticated user.
SERVED_USER = "langgraph_auth_user"


#: What a served client is told when it writes thread state (here, and by the dev server's auth handler).
STATE_WRITE_REFUSED = (
    "thread state is written by the graph only; answer an approval with Command(resume=...), "
    "or fork from a checkpoint"
)


class StateWriteRefused(PermissionError):
    """A served client tried to write thread state, which only the graph's nodes write."""


def _target(graph: CompiledStateGraph, input: Any, config: RunnableConfig | None) -> dict[str, Any] | None:
    """The configurable of a resume addressed to a checkpoint, or ``None`` when nothing could fork."""
    conf = dict((config or {}).get("configurable") or {})
    conf.pop(FORK_KEY, None)  # only this module says a run is a fork, never a caller
    resumes = isinstance(input, Command) and input.resume is not None
    addressed = conf.get("checkpoint_id") and conf.get("thread_id") and not conf.get("checkpoint_ns")
    return conf if resumes and addressed and isinstance(graph.checkpointer, BaseCheckpointSaver) else None


def _at(conf: dict[str, Any], checkpoint_id: str | None = None) -> RunnableConfig:
    at = {"thread_id": conf["thread_id"], "checkpoint_ns": ""}
    return {"configurable": {**at, "checkpoint_id": checkpoint_id} if checkpoint_id else at}


def _head_id(head: RunnableConfig) -> str:
    """The checkpoint a saver's tuple is at: its config always says, so a missing id is an error here."""
    return (head.get("configurable") or {})["checkpoint_id"]


def _cleaned(config: RunnableConfig | None, fork: str | None = None) -> RunnableConfig | None:
    """The config without a caller's fork marker; on a fork, marked and pointed at the copy (the head)."""
    conf = (config or {}).get("configurable") or {}
    if FORK_KEY not in conf and fork is None:
        return config
    conf = {k: v for k, v in conf.items() if k != FORK_KEY and not (fork and k == "checkpoint_id")}
    return {**(config or {}), "configurable": {**conf, FORK_KEY: fork} if fork else conf}


def _refuse_served_writes(config: RunnableConfig | None, supersteps: Sequence[Sequence[Any]]) -> None:
    if SERVED_USER not in ((config or {}).get("configurable") or {}):
        return
    for step in supersteps:
        for update in step:
            values, as_node = [*update, None, None][:2]
            if values is not None or as_node != "__copy__":
                raise StateWriteRefused(STATE_WRITE_REFUSED)


class ForkingGraph(CompiledStateGraph):
    """The compiled agent graph, with three duties added to LangGraph's (see the module's notes).

    1. Forking: a resume that names a checkpoint the thread has moved past runs on a copy of it, so the
       answer given there before is not taken for the new one, and each branch keeps its own record (the
       original branch is not written to; the fork's run says which checkpoint it forked).
    2. One turn per thread: built with a saver of its own, it holds the thread's turn lock for the run;
       under a server (no lock) the server's multitask strategy decides instead.
    3. Refusing served state writes: ``update_state`` from a server's authenticated client is refused,
       except Studio's fork anchor, so no one can put calls in ``approved`` that no person approved.
    """

    def __init__(self, *args: Any, turn_lock: TurnLock | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn_lock = turn_lock

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Stream a run; a resume at a checkpoint the thread has moved past runs on a copy of it."""
        with self._turn(config):
            async for chunk in self._astream(input, config, **kwargs):
                yield chunk

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """The synchronous twin of ``astream``."""
        with self._turn(config):
            yield from self._stream(input, config, **kwargs)

    def _turn(self, config: RunnableConfig | None) -> AbstractContextManager[None]:
        """The thread's turn lock for this run, or nothing when a server's multitask strategy decides."""
        if self.turn_lock is None:
            return nullcontext()
        return self.turn_lock.held(merge_configs(self.config, config))

    async def _astream(self, input: Any, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[Any]:
        fork = None
        if (conf := _target(self, input, config)) is not None:
            head = await self.checkpointer.aget_tuple(_at(conf))  # type: ignore[union-attr]
            if head is not None and _head_id(head.config) != conf["checkpoint_id"]:
                fork = conf["checkpoint_id"]
                await self.aupdate_state(_at(conf, fork), None, as_node="__copy__")
        async for chunk in super().astream(input, _cleaned(config, fork), **kwargs):
            yield chunk

    def bulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate | tuple]]
    ) -> RunnableConfig:
        """``update_state`` and its bulk form; refused to a served client (see the module's note)."""
        _refuse_served_writes(config, supersteps)
        return super().bulk_update_state(config, supersteps)  # type: ignore[arg-type]

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate | tuple]]
    ) -> RunnableConfig:
        """The async twin of ``bulk_update_state``."""
        _refuse_served_writes(config, supersteps)
        return await super().abulk_update_state(config, supersteps)  # type: ignore[arg-type]

    def _stream(self, input: Any, config: RunnableConfig | None, **kwargs: Any) -> Iterator[Any]:
        fork = None
        if (conf := _target(self, input, config)) is not None:
            head = self.checkpointer.get_tuple(_at(conf))  # type: ignore[union-attr]
            if head is not None and _head_id(head.config) != conf["checkpoint_id"]:
                fork = conf["checkpoint_id"]
                self.update_state(_at(conf, fork), None, as_node="__copy__")
        yield from super().stream(input, _cleaned(config, fork), **kwargs)


def forking(graph: CompiledStateGraph) -> ForkingGraph:
    """The same compiled graph as a ``ForkingGraph``, with the turn lock of its saver when it has one."""
    attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
    return ForkingGraph(**attrs, turn_lock=turn_lock_for(graph.checkpointer))
