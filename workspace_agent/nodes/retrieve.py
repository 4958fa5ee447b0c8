"""B8 — which document chunks go into the prompt; and query mode's refusal without context."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from workspace_agent.graphs.context import Context
from workspace_agent.graphs.state import AgentState, decision


async def retrieve(state: AgentState, runtime: Runtime[Context]) -> dict:
    """Gather the workspace context for this turn; in query mode, refuse when there is none.

    Document search is not built yet (the workspace documents issue), so the context is always empty and
    query mode always refuses — said plainly in the decision record rather than pretended otherwise.
    """
    ctx = runtime.context
    context: list[str] = []
    out: dict = {"context": context, "sources": []}
    if state.get("query_only") and not context:
        out["messages"] = [AIMessage(content=ctx.query_refusal_response)]
        out["stop_reason"] = "refused"
        out["decisions"] = [decision("B8", "code", "refused", "query mode and no document context was found")]
    else:
        out["decisions"] = [decision("B8", "code", 0, "document retrieval is not available yet: no context")]
    return out
