"""The ingest graph: files and folders into a workspace's documents.

Reads top to bottom: discover (I1: which files; the workspace's embedding model is checked first) → one
index_file task per file, in parallel (I2: add, keep unchanged, or replace; a failure stays with its file)
→ report. The workspace and chunking come from the context (``IngestContext``), as the agent's workspace
does, so one assistant per workspace serves both graphs' clients.

Input ``{"paths": ["docs/", "notes.pdf"]}``; output ``added``, ``unchanged``, ``replaced`` (each
``{"path", "title", "document_id", "chunks"}``), ``failed`` (``{"path", "title", "reason"}``) and
``decisions``. Embedding progress is streamed in ``custom`` mode as ``{"path", "embedded", "chunks"}``.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from workspace_agent.graphs.runnables import node
from workspace_agent.nodes.ingest.discover import discover, route_files
from workspace_agent.nodes.ingest.index_file import index_file
from workspace_agent.nodes.ingest.report import report
from workspace_agent.nodes.ingest.state import IngestContext, IngestInput, IngestOutput, IngestState

__all__ = ["IngestContext", "build_graph", "graph"]

#: Files indexed at once: enough to keep a remote embedding server busy, few enough not to flood it.
MAX_CONCURRENCY = 4


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None, store: BaseStore | None = None
) -> CompiledStateGraph:
    """Compile the ingest graph.

    Args:
        checkpointer: Where runs persist (a long ingest then resumes without redoing finished files);
            ``None`` under ``langgraph dev``, which brings its own.
        store: LangGraph store; unused by ingestion, accepted for a uniform ``build_graph`` signature.
    """
    builder = StateGraph(
        IngestState, context_schema=IngestContext, input_schema=IngestInput, output_schema=IngestOutput
    )
    builder.add_node("discover", node(discover))
    builder.add_node("index_file", node(index_file))
    builder.add_node("report", node(report))

    builder.add_edge(START, "discover")
    builder.add_conditional_edges("discover", route_files, ["index_file", "report"])
    builder.add_edge("index_file", "report")
    builder.add_edge("report", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name="workspace-ingest")
    return compiled.with_config(max_concurrency=MAX_CONCURRENCY)


graph = build_graph()
