"""The agent graph: one chat or agent turn, every decision a named node or conditional edge.

Reads top to bottom like DESIGN §1: route (A3) → [ingest_uploads (I2), only for a message carrying files]
→ load_history (B4) ∥ retrieve (B8) ∥ recall (M2) → choose_tools (C0) → trim (B11) → call_model (C1, G2)
→ approve (D3, D21) → execute_tool × n (C10) → trim → … → check_figures (G3) → finish (G1). History,
documents and memories are independent reads, so they run side by side; the turn's tools are chosen once
they are in, since passages found for the message are one reason to offer the document search.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from ..checkpoints.chatlog import PostgresRecords, Records
from ..checkpoints.chunks import DocumentStore
from ..core.context import Context, context_for
from ..core.settings import ModelSettings, model_settings
from ..core.state import AgentState, InputState, OutputState
from ..nodes.approve import approve
from ..nodes.call_model import call_model, route_after_model
from ..nodes.check_figures import check_figures
from ..nodes.choose_tools import choose_tools
from ..nodes.finish import finish
from ..nodes.history import load_history
from ..nodes.recall import recall
from ..nodes.retrieve import retrieve
from ..nodes.route import route
from ..nodes.services import Services
from ..nodes.tools import execute_tool, route_tool_calls
from ..nodes.trim import route_after_trim, trim
from ..nodes.uploads import AFTER_ROUTE, ingest_uploads, route_uploads
from .forks import forking
from .runnables import node, router


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    tools: Sequence[BaseTool] | None = None,
    *,
    records: Records | None = None,
    model: BaseChatModel | None = None,
    documents: DocumentStore | None = None,
    settings: ModelSettings | None = None,
) -> CompiledStateGraph:
    """Compile the agent graph.

    Args:
        checkpointer: Where threads persist; ``None`` under ``langgraph dev``, which brings its own.
        store: LangGraph store for long-term memories, when the caller has one.
        tools: Extra LangChain tools a program brings, offered beside the built-in and MCP tools and gated by
            the same approval policy.
        records: Chat log, approvals and notes; the project's PostgreSQL unless given (tests pass
            ``MemoryRecords`` to measure orchestration without I/O).
        model: A LangChain chat model to use instead of ``context.model`` at the OpenAI-compatible endpoint.
        documents: The workspaces' documents; the project's PostgreSQL unless given. Every part of a turn
            that reads or writes documents uses this store: retrieval, dropped files and the document tools.
        settings: The chat model's settings (where it is, what it can do); the environment's, resolved
            now, unless given. The graph keeps them: a change of the environment takes a new graph.
    """
    if settings is None:
        settings = model_settings()
    services = Services(
        records=records or PostgresRecords(),
        extra_tools=list(tools or []),
        model=model,
        documents=documents or DocumentStore(),
        settings=settings,
    )
    # a run's context is made with the settings' model defaults; the schema clients see is Context's
    builder = StateGraph(
        AgentState,
        context_schema=context_for(settings, Context),
        input_schema=InputState,
        output_schema=OutputState,
    )
    builder.add_node("route", node(partial(route, services=services)))
    builder.add_node("ingest_uploads", node(partial(ingest_uploads, services=services)))
    builder.add_node("load_history", node(load_history))
    builder.add_node("retrieve", node(partial(retrieve, services=services)))
    builder.add_node("recall", node(partial(recall, services=services)))
    builder.add_node("choose_tools", node(partial(choose_tools, services=services)))
    builder.add_node("trim", node(trim))
    builder.add_node("call_model", node(partial(call_model, services=services)))
    builder.add_node("check_figures", node(partial(check_figures, services=services)))
    builder.add_node("approve", node(partial(approve, services=services)))
    builder.add_node("execute_tool", node(partial(execute_tool, services=services)))
    builder.add_node("finish", node(partial(finish, services=services)))

    builder.add_edge(START, "route")
    builder.add_conditional_edges("route", router(route_uploads), ["ingest_uploads", *AFTER_ROUTE])
    for after in AFTER_ROUTE:
        builder.add_edge("ingest_uploads", after)
    builder.add_edge(["load_history", "retrieve", "recall"], "choose_tools")
    builder.add_edge("choose_tools", "trim")
    builder.add_conditional_edges("trim", router(route_after_trim), ["call_model", "finish"])
    builder.add_conditional_edges(
        "call_model", router(route_after_model), ["approve", "check_figures", "finish"]
    )
    builder.add_edge("check_figures", "finish")
    builder.add_conditional_edges("approve", router(route_tool_calls), ["execute_tool", "trim"])
    builder.add_edge("execute_tool", "trim")
    builder.add_edge("finish", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name="workspace-agent")
    return forking(compiled)  # one turn per thread; a resume at an older checkpoint forks


graph = build_graph()
