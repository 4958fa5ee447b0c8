"""C0 — which tools does this turn offer? Those the message needs, not every tool the workspace has.

A small model offered every tool reaches for them: the 1.5B ran ``current_datetime`` and ``calculate`` for
"What is the capital of France?", and proposed notes nobody asked for. Its catalog was also most of its
prompt. So, once per turn (as AnythingLLM's reranker does), the tools are chosen against the person's
message, within what the workspace and run allow (``tools``, ``without_tools``):

- a tool that acts (saves, writes, fetches) is offered only when the message asks for it in words: an
  action is taken because it was asked for, never because a message resembles it;
- ``calculate`` is offered when the message asks for it in words: a number to compute with, an operation,
  a unit asked for (``calculate_by_words``). Its embedding alone offered it only to questions with nothing
  to compute ("What does the Team plan cost a year if paid yearly?", which the 1.5B then computed as
  ``12 * 12``; "Make a note of today's weekday"): 3 of the bench's 192 tasks, none needing it;
- another read-only tool is offered when the message asks for it in words, or its description or an example
  request is close to the message by embedding (``RELEVANT``); ``search_documents`` also when retrieval
  found passages of the workspace for the message, as a first step towards another tool the turn is
  offered. Offered alone for that reason, it would only find again the passages the prompt already
  holds: the 1.5B searched twice and read them three times over for "how many minutes is the reset link
  valid?" (``passages_only``), so the turn is then offered no tool and answers from the passages.

A model that calls tools natively is offered every tool: it reads their schemas, not a catalog in its
prompt, and chooses well among many (AnythingLLM ranks only beyond 15; cutting a list of MCP tools for a
message like "go" would hide the one meant). If the embedder fails, every tool is offered, as AnythingLLM
falls back. ``choose_tools: false`` in a run's context offers them all;
that only widens the offer to what the workspace allows, and approval still applies to each call. A run that
brings a client's own tools (``client_tools``, an OpenAI client's) is offered none of the workspace's.
"""

from __future__ import annotations

import math
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from ..core.context import Context
from ..core.conversation import turn_asked
from ..core.state import AgentState, decision
from ..providers.prompted.catalog import acts, builtin
from ..providers.prompted.cues import asked_for, tool_texts, unit_given
from ..providers.prompted.rules import on
from ..skills.documents import embedder
from .services import Services

#: Cosine (all-MiniLM-L6-v2) a read-only tool's description or an example request must reach against the
#: message. Chosen on the bench's older splits (a tool the task needed and not offered: 11 of 112 tasks at
#: 0.40, all unit conversions the cue words now name) and checked on the four untouched ones.
RELEVANT = 0.40


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


async def relevance(services: Services, message: str, tools: list[BaseTool]) -> dict[str, float]:
    """Each tool's closeness to the message: the best cosine of its description and its example requests.

    Tool texts are embedded once per process and vector space; a turn embeds only the message.
    """
    embeddings, space = await embedder()
    cache = services.tool_vectors
    missing = sorted({t for tool in tools for t in tool_texts(tool) if (space, t) not in cache})
    if missing:
        for text, vector in zip(missing, await embeddings.aembed_documents(missing), strict=True):
            cache[(space, text)] = vector
    asked = await embeddings.aembed_query(message)
    return {tool.name: max(_cosine(asked, cache[(space, t)]) for t in tool_texts(tool)) for tool in tools}


def _why(tool: BaseTool, named: bool, score: float, found: bool, by_words: bool) -> str:
    if by_words and not named:
        if acts(tool):
            return "acts, and the message does not ask for it"
        return f"no figure or operation to compute with in the message (close by embedding: {score:.2f})"
    if named:
        return "asked for in words"
    if score >= RELEVANT:
        return f"relevant ({score:.2f})"
    if found and tool.name == "search_documents":
        return "the workspace's documents match the message"
    return f"not relevant ({score:.2f})"


async def choose_tools(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict[str, Any]:
    """Choose the turn's tools once, before its first model call; every round of the turn keeps them."""
    if state.get("route") != "agent":
        return {}
    ctx = runtime.context
    if ctx.client_tools is not None:  # as OpenAI does: the model sees the tools of the request, and only them
        why = "the run brings the client's own tools: only they are offered, none of the workspace's"
        outcome = {"client": sorted(ctx.client_tools.names)}
        return {"offered": [], "decisions": [decision("C0", "code", outcome, why)]}
    tools = list((await services.toolset(ctx)).tools.values())
    message = turn_asked(state["messages"])
    if not ctx.choose_tools or not on("choose_tools") or not tools:
        why = "the run asked for every tool" if not ctx.choose_tools else "every tool the workspace allows"
        return {"offered": None, "decisions": [decision("C0", "code", "all", why)]}
    if ctx.native_tool_calling:
        why = "a native tool caller reads every tool's schema and is offered them all"
        return {"offered": None, "decisions": [decision("C0", "code", "all", why)]}
    try:
        scores = await relevance(services, message, tools)
    except Exception as exc:  # no embedder: every tool, as AnythingLLM falls back
        why = f"the tools could not be ranked ({type(exc).__name__}: {exc}): every tool is offered"
        return {"offered": None, "decisions": [decision("C0", "code", "all", why)]}
    found = any("chunk" in s for s in state.get("sources") or [])
    given = state.get("context") or []  # the passages and pinned documents the turn's prompt holds
    reasons: dict[str, str] = {}
    offered = []
    found_only = False  # search_documents offered only because retrieval found passages
    for tool in tools:
        own = builtin(tool)
        named = asked_for(tool, message, own)
        score = scores.get(tool.name, 0.0)
        calculate = own and tool.name == "calculate"
        unit = unit_given(message, given) if named and calculate and on("unit_given") else None
        named = named and not unit
        by_words = acts(tool) or (calculate and on("calculate_by_words"))  # offered only when asked for
        if by_words:
            chosen = named
        else:
            chosen = named or score >= RELEVANT or (found and tool.name == "search_documents")
        reasons[tool.name] = _why(tool, named, score, found, by_words)
        if unit:
            reasons[tool.name] += f"; asked in {unit}, which the given passages state"
        if chosen:
            offered.append(tool.name)
            if tool.name == "search_documents":
                found_only = not named and score < RELEVANT
    if found_only and offered == ["search_documents"] and on("passages_only"):
        offered = []
        reasons["search_documents"] += ", and the prompt holds those passages: nothing is left to search"
    left_out = {n: reasons[n] for n in reasons if n not in offered}
    why = (
        f"{len(offered)} of {len(tools)} tools offered: "
        + "; ".join(f"{n}: {reasons[n]}" for n in offered)
        + (f". Left out: {'; '.join(f'{n}: {r}' for n, r in left_out.items())}" if left_out else "")
    )
    outcome = {"offered": offered, "left_out": sorted(left_out)}
    return {"offered": offered, "decisions": [decision("C0", "code", outcome, why)]}
