"""C10 — every approved tool call runs, each in its own task, and every result goes back to the model.

One ``Send`` per call (rather than one node running them all) gives each call its own checkpointed task: on
resume after a crash, finished calls are not run again; the unfinished one runs again and is recorded as
"interrupted, may have run" first. A tool that raises, hangs or gets bad arguments
becomes an error tool message; the turn goes on. A tool that cites what it found returns
``{"sources": [...]}`` as its artifact, and those citations join the turn's ``sources``.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_RESUMING  # no public name; pinned by a test
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import ValidationError

from ..checkpoints.members import require
from ..core.context import Context
from ..core.conversation import EXECUTED_PREFIX
from ..core.jobs import time_left
from ..core.state import AgentState, Decision, ToolCallState, decision
from ..providers.prompted.streaming import progress
from ..skills.document_tools import DOCUMENT_WRITERS
from .services import Services


def route_tool_calls(state: AgentState) -> list[Send] | Literal["trim"]:
    """One ``execute_tool`` task per approved call, all in parallel; none approved → back to the model."""
    calls = state.get("approved") or []
    until = state.get("deadline")
    return [Send("execute_tool", {"call": call, "deadline": until}) for call in calls] if calls else "trim"


def resumed_after_a_stop(config: RunnableConfig) -> bool:
    """Whether this task was already scheduled in the checkpoint the run resumed from.

    LangGraph marks the first step of a resumed run (``invoke(None)``, a ``Command``) as resuming, and only
    that step. An approval resume starts with ``approve``, so ``execute_tool`` is in that step only when a
    run stopped (killed, crashed, cancelled) after handing it the call: it may have run already.
    """
    return bool((config.get("configurable") or {}).get(CONFIG_KEY_RESUMING))


async def execute_tool(
    state: ToolCallState, runtime: Runtime[Context], config: RunnableConfig, *, services: Services
) -> dict:
    """Run one call within ``tool_timeout``; whatever happens, answer it with a tool message.

    A call taken up again after its run stopped is recorded as interrupted before it runs again: its first
    attempt may have done its work, and only a tool keyed by ``tool_call_id`` knows to do it once.
    """
    ctx = runtime.context
    call = state["call"]
    notes: list[Decision] = []
    if resumed_after_a_stop(config):
        why = (
            f"{call['name']} was handed to a run that stopped before its result was saved: it may have "
            "run already, and is run again now (tools that key their effect by tool_call_id act once)"
        )
        notes.append(decision("C10", "code", {call["id"]: "interrupted, may have run"}, why))
    tool = (await services.toolset(ctx)).tools.get(call["name"])
    progress("tool", name=call["name"])
    status, cut = "ok", False
    try:
        if tool is None:
            raise LookupError(f"there is no tool named {call['name']!r}")
        # a member removed while the call waited for approval reaches the workspace no more
        await require(ctx.user_id, ctx.workspace, "write" if call["name"] in DOCUMENT_WRITERS else "read")
        # A tool that paces itself (one model call per section) applies tool_timeout to each of its steps.
        timeout = None if (tool.metadata or {}).get("paced") else ctx.tool_timeout
        left = time_left(state.get("deadline"))
        cut = left is not None and (timeout is None or left < timeout)  # the run's limit comes first
        timeout = left if cut else timeout
        result = await asyncio.wait_for(tool.ainvoke({**call, "type": "tool_call"}), timeout=timeout)
        message = (
            result
            if isinstance(result, ToolMessage)
            else ToolMessage(content=str(result), tool_call_id=call["id"])
        )
        if message.status == "error":
            status = "error"
    except TimeoutError:
        status = "time limit" if cut else "timeout"
        given = f"the run's time limit ({ctx.time_limit:g} s)" if cut else f"{ctx.tool_timeout:g} s"
        message = ToolMessage(
            content=f"Error: {call['name']} did not finish within {given} and was given up.",
            tool_call_id=call["id"],
            status="error",
        )
    except ValidationError as exc:
        status = "invalid arguments"
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        message = ToolMessage(
            content=f"Error: invalid arguments for {call['name']}: {problems}",
            tool_call_id=call["id"],
            status="error",
        )
    except GraphBubbleUp:
        raise  # a tool that asks the person (an interrupt) waits for them; that is no failure
    except Exception as exc:  # a tool's failure is the model's information, never the turn's end
        status = "error"
        message = ToolMessage(
            content=f"Error: {call['name']} failed: {type(exc).__name__}: {exc}",
            tool_call_id=call["id"],
            status="error",
        )
    message.id = f"{EXECUTED_PREFIX}{call['id']}"
    message.name = call["name"]
    artifact = message.artifact if isinstance(message.artifact, dict) else {}
    return {
        "messages": [message],
        "sources": list(artifact.get("sources") or []),
        "tool_calls_made": 1,
        "decisions": [*notes, decision("C10", "code", {call["id"]: status}, f"{call['name']} ran: {status}")],
    }
