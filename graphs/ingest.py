"""The ingest graph: files and folders into a workspace's documents.

Reads top to bottom: discover (I1: which files; the workspace's embedding model is checked first) → one
index_file task per file, in parallel (I2: add, keep unchanged, or replace; a failure stays with its file)
→ report. The workspace and chunking come from the context (``IngestContext``), as the agent's workspace
does, so one assistant per workspace serves both graphs' clients.

Input ``{"paths": ["docs/", "notes.pdf"]}``; output ``added``, ``unchanged``, ``replaced`` (each
``{"path", "title", "document_id", "chunks"}``), ``failed`` (``{"path", "title", "reason"}``) and
``decisions``. Only files under the documents roots are read (``skills.loaders``). Embedding progress is
streamed in ``custom`` mode as ``{"path", "embedded", "chunks"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from ..core.context import IngestContext
from ..core.state import IngestInput, IngestOutput, IngestState
from ..nodes.ingest.discover import discover, route_files
from ..nodes.ingest.index_file import index_file
from ..nodes.ingest.report import report
from .runnables import node

__all__ = ["IngestContext", "build_graph", "graph"]

#: Files indexed at once: enough to keep a remote embedding server busy, few enough not to flood it.
MAX_CONCURRENCY = 4


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    *,
    document_roots: Sequence[str | Path] = (),
) -> CompiledStateGraph[IngestState, IngestContext, IngestInput, IngestOutput]:
    """Compile the ingest graph.

    Which server files a run may read is the deployment's choice, never the run's: the documents roots are
    ``DOCUMENT_ROOTS`` (default: the project's data folder and ``samples/``), plus ``document_roots``.

    Args:
        checkpointer: Where runs persist (a long ingest then resumes without redoing finished files);
            ``None`` under ``langgraph dev``, which brings its own.
        store: LangGraph store; unused by ingestion, accepted for a uniform ``build_graph`` signature.
        document_roots: More folders (or single files) this program lets its runs read, e.g. the paths the
            CLI's user typed. Symlinks are resolved before the check, so a link cannot lead out of them.
    """
    extra = tuple(Path(p).expanduser().resolve() for p in document_roots)
    builder = StateGraph(
        IngestState, context_schema=IngestContext, input_schema=IngestInput, output_schema=IngestOutput
    )
    builder.add_node("discover", node(partial(discover, extra_roots=extra)))
    builder.add_node("index_file", node(partial(index_file, extra_roots=extra)))
    builder.add_node("report", node(report))

    builder.add_edge(START, "discover")
    builder.add_conditional_edges("discover", route_files, ["index_file", "report"])
    builder.add_edge("index_file", "report")
    builder.add_edge("report", END)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name="workspace-ingest")
    return compiled.with_config(max_concurrency=MAX_CONCURRENCY)


graph = build_graph()
