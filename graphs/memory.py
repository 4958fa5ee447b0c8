"""The memory graph: which chats become memories (decision M1), run on demand or on a schedule.

Reads top to bottom like the decision: select_chats (unprocessed, included chats by user and workspace) →
gate_groups (enough chats, user idle, memories enabled) → one process_group task per group, side by side.
A group walks its chats oldest first: read_batch → observe (model) → reflect (model) → store, and again
until none is left. ``store`` marks exactly the chats of its batch, in the transaction that stores their
memories; a failure anywhere before it leaves the batch unmarked for the next run, and says so in the report.
"""

from __future__ import annotations

from functools import partial

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from ..checkpoints.memories import PostgresMemories
from ..core.context import MemoryContext, context_for
from ..core.settings import ModelSettings, model_settings
from ..core.state import GroupInput, GroupState, MemoryInput, MemoryOutput, MemoryState
from ..nodes.memory.gate import gate_groups, route_groups
from ..nodes.memory.observe import observe, route_after_observe
from ..nodes.memory.read import read_batch, route_after_read
from ..nodes.memory.reflect import reflect, route_after_reflect
from ..nodes.memory.select import select_chats
from ..nodes.memory.store import route_after_store, store
from ..nodes.services import MemoryServices
from .runnables import node

__all__ = ["MAX_PARALLEL_GROUPS", "MemoryContext", "build_graph", "graph"]

MAX_PARALLEL_GROUPS = 4
"""Groups processed at once: enough to overlap model calls, few enough for a local model's queue."""


def build_group_graph(
    services: MemoryServices,
) -> CompiledStateGraph[GroupState, MemoryContext, GroupInput, MemoryOutput]:
    """One group's walk through its batches, oldest first, until none is left or one fails."""
    builder = StateGraph(
        GroupState, context_schema=MemoryContext, input_schema=GroupInput, output_schema=MemoryOutput
    )
    builder.add_node("read_batch", node(partial(read_batch, services=services)))
    builder.add_node("observe", node(partial(observe, services=services)))
    builder.add_node("reflect", node(partial(reflect, services=services)))
    builder.add_node("store", node(partial(store, services=services)))

    builder.add_edge(START, "read_batch")
    builder.add_conditional_edges("read_batch", route_after_read, ["observe", END])
    builder.add_conditional_edges("observe", route_after_observe, ["reflect", "store", END])
    builder.add_conditional_edges("reflect", route_after_reflect, ["store", END])
    builder.add_conditional_edges("store", route_after_store, ["read_batch", END])
    return builder.compile(name="memory-group")


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    *,
    memories: PostgresMemories | None = None,
    model: BaseChatModel | None = None,
    settings: ModelSettings | None = None,
) -> CompiledStateGraph[MemoryState, MemoryContext, MemoryInput, MemoryOutput]:
    """Compile the memory graph.

    Args:
        checkpointer: Where runs persist; ``None`` under ``langgraph dev``, which brings its own. Not needed
            for correctness: what is durable is the chat log's marks and the memories, written together.
        store: Accepted for the common ``build_graph`` signature; memories live in their own table, because
            they must be stored in the same transaction that marks the chats.
        memories: The memories table; the project's PostgreSQL unless given.
        model: A LangChain chat model to use instead of the context's model at the OpenAI-compatible endpoint.
        settings: The chat model's settings; the environment's, resolved once here, unless given.
    """
    settings = settings or model_settings()
    services = MemoryServices(memories=memories or PostgresMemories(), model=model, settings=settings)
    builder = StateGraph(
        MemoryState,
        context_schema=context_for(settings, MemoryContext),
        input_schema=MemoryInput,
        output_schema=MemoryOutput,
    )
    builder.add_node("select_chats", node(partial(select_chats, services=services)))
    builder.add_node("gate_groups", node(gate_groups))
    builder.add_node("process_group", build_group_graph(services))

    builder.add_edge(START, "select_chats")
    builder.add_edge("select_chats", "gate_groups")
    builder.add_conditional_edges("gate_groups", route_groups, ["process_group", END])
    builder.add_edge("process_group", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name="memory")
    return compiled.with_config(max_concurrency=MAX_PARALLEL_GROUPS)


graph = build_graph()
