"""D3 and D21 — may these tool actions run now? Policy first, then one question to a person per model turn.

Built-in skills, the program's tools and MCP tools all pass through here under the same fnmatch policy
(AnythingLLM lets every MCP call through unasked). The interrupt value is langchain's human-in-the-loop
request, so clients made for it work unchanged; decisions are matched by ``tool_call_id`` when given, so a
client that reorders its cards cannot approve the wrong call.
"""

from __future__ import annotations

import json
import os
from fnmatch import fnmatchcase
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ..graphs.context import Context
from ..graphs.forks import fork_of
from ..graphs.services import Services, Toolset
from ..graphs.state import AgentState, Decision, decision
from ..providers.prompted import WAITING
from ..providers.tokens import message_text
from .history import turn_start
from .route import EXECUTED_PREFIX

DECISION_TYPES = ("approve", "edit", "reject")


class ResumeError(ValueError):
    """A resume value that does not answer the pending approval request properly."""


def always_ask() -> list[str]:
    """The deployment's floor: tool-name patterns (``ALWAYS_ASK_TOOLS``, comma-separated) that always ask.

    It is read from the environment, which only whoever runs the server sets, so no context, assistant or
    remembered "always allow" can waive it.
    """
    return [p.strip() for p in os.environ.get("ALWAYS_ASK_TOOLS", "").split(",") if p.strip()]


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def needs_approval(ctx: Context, name: str) -> bool:
    """The policy: ``auto_approved`` wins over ``approval_required``; ``also_ask`` and the floor over both.

    ``also_ask`` is how a run's context adds approval: the server refuses a run's own ``auto_approved`` or
    ``approval_required`` unless they only tighten (``server/policy.py``), so every layer can only add asks.
    """
    if _matches(name, always_ask()) or _matches(name, ctx.also_ask):
        return True
    if _matches(name, ctx.auto_approved):
        return False
    return _matches(name, ctx.approval_required)


def _decision_id(toolset: Toolset, name: str) -> str:
    """D21 for an MCP tool, D3 for every other: the same policy, recorded under the map's own question."""
    return "D21" if (toolset.tools[name].metadata or {}).get("mcp") else "D3"


_NOT_CHOSEN = "this workspace does not offer the tool {!r} (its tools setting, or this run's without_tools)"
ALREADY_RUN = "\n(This call already ran in this turn with the same arguments: this is its result again.)"


def call_key(call: ToolCall) -> str:
    """What makes two calls the same request: the tool and its arguments."""
    return json.dumps([call["name"], call["args"]], sort_keys=True, default=str)


def earlier_results(messages: list[AnyMessage]) -> dict[str, str]:
    """The results of this turn's calls that ran and succeeded, by ``call_key``.

    A small model that does not see what to do next repeats its last call; AnythingLLM's Deduplicator
    answers such a repeat from the earlier result instead of running it, and so does ``approve``.
    """
    turn = messages[turn_start(messages) :]
    results = {
        m.tool_call_id: message_text(m)
        for m in turn
        if isinstance(m, ToolMessage) and (m.id or "").startswith(EXECUTED_PREFIX) and m.status != "error"
    }
    calls = [c for m in turn[:-1] if isinstance(m, AIMessage) for c in m.tool_calls]
    return {call_key(c): results[c["id"]] for c in calls if c["id"] in results}


def _not_run(error: str | None) -> str:
    """Why an invalid call did not run: a call waiting for a result, or arguments that are not JSON."""
    if error and WAITING in error:
        return f"Not run: {error}."
    why = error or "parse error"
    return f"Not run: the arguments are not valid JSON ({why}). Send the call again with JSON arguments."


def _answer(call_id: str, name: str, text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name=name, status="error")


def _request(calls: list[ToolCall], toolset: Toolset, error: str | None) -> dict[str, Any]:
    actions = []
    for c in calls:
        tool = toolset.tools[c["name"]]
        action = {
            "tool_call_id": c["id"],
            "name": c["name"],
            "args": c["args"],
            "description": tool.description,
        }
        action.update({k: v for k, v in (tool.metadata or {}).items() if k in ("server", "tool")})
        actions.append(action)
    request: dict[str, Any] = {
        "type": "tool_approval",
        "action_requests": actions,
        "review_configs": [
            {"action_name": c["name"], "allowed_decisions": list(DECISION_TYPES)} for c in calls
        ],
    }
    if error:
        request["error"] = error
    return request


def match_decisions(value: Any, calls: list[ToolCall]) -> dict[str, dict[str, Any]]:
    """Pair each pending call with its decision, by ``tool_call_id`` or else by position; raise if unsure."""
    if not isinstance(value, dict) or not isinstance(value.get("decisions"), list):
        raise ResumeError('resume with {"decisions": [...]}, one decision per pending tool call')
    by_id = {c["id"]: c for c in calls}
    matched: dict[str, dict[str, Any]] = {}
    for i, d in enumerate(value["decisions"]):
        if not isinstance(d, dict) or d.get("type") not in DECISION_TYPES:
            raise ResumeError(f"decision {i}: type must be one of {', '.join(DECISION_TYPES)}")
        call_id = d.get("tool_call_id") or (calls[i]["id"] if i < len(calls) else None)
        if call_id not in by_id:
            raise ResumeError(
                f"decision {i}: no pending tool call {d.get('tool_call_id') or f'at position {i}'!r}"
            )
        if call_id in matched:
            raise ResumeError(f"decision {i}: tool call {call_id!r} is answered twice")
        if d["type"] == "edit":
            action = d.get("edited_action")
            if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
                raise ResumeError(f'decision {i}: an edit needs "edited_action": {{"name", "args": {{...}}}}')
            if action.get("name", by_id[call_id]["name"]) != by_id[call_id]["name"]:
                raise ResumeError(f"decision {i}: an edit cannot change which tool is called")
        matched[call_id] = d
    missing = [c["id"] for c in calls if c["id"] not in matched]
    if missing:
        raise ResumeError(f"no decision for pending tool call(s): {', '.join(missing)}")
    return matched


async def approve(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Decide which of the model's tool calls run: budget, validity, policy, remembered grants, a person."""
    ctx = runtime.context
    ai: AIMessage = state["messages"][-1]  # type: ignore[assignment]
    toolset = await services.toolset(ctx)
    answers: list[ToolMessage] = []
    notes: list[Decision] = []
    for bad in ai.invalid_tool_calls:
        answers.append(
            _answer(
                bad.get("id") or "",
                bad.get("name") or "",
                _not_run(bad.get("error")),
            )
        )
    budget = max(ctx.max_tool_calls - state.get("tool_calls_made", 0), 0)
    ran = earlier_results(state["messages"])
    runnable: list[ToolCall] = []
    for call in ai.tool_calls:
        if (earlier := ran.get(call_key(call))) is not None:
            again = ToolMessage(content=earlier + ALREADY_RUN, tool_call_id=call["id"], name=call["name"])
            answers.append(again)
            why = f"{call['name']} with these arguments already ran in this turn: its result was given again"
            notes.append(decision("C10", "code", {call["id"]: "repeat, not run"}, why))
        elif call["name"] in toolset.unchosen:
            answers.append(_answer(call["id"], call["name"], f"Not run: {_NOT_CHOSEN.format(call['name'])}"))
            why = f"{call['name']}: {_NOT_CHOSEN.format(call['name'])}"
            notes.append(decision("D3", "policy", {call["id"]: "not chosen"}, why))
        elif call["name"] not in toolset.tools:
            answers.append(
                _answer(
                    call["id"],
                    call["name"],
                    f"Not run: there is no tool named {call['name']!r}. "
                    f"Available tools: {', '.join(sorted(toolset.tools))}.",
                )
            )
        elif len(runnable) >= budget:
            answers.append(
                _answer(call["id"], call["name"], "Not run: the tool-call budget of this turn is spent.")
            )
        else:
            runnable.append(call)
    ask: list[ToolCall] = []
    for call in runnable:
        if not needs_approval(ctx, call["name"]):
            why = f"{call['name']} is auto-approved"
            notes.append(
                decision(_decision_id(toolset, call["name"]), "policy", {call["id"]: "approve"}, why)
            )
        elif _matches(call["name"], [*always_ask(), *ctx.also_ask]):
            ask.append(call)  # the floor and the run's own asks: a remembered grant waives neither
        elif await services.records.is_granted(ctx.workspace, ctx.user_id, call["name"]):
            why = f"always allow {call['name']} was chosen"
            notes.append(
                decision(_decision_id(toolset, call["name"]), "policy", {call["id"]: "approve"}, why)
            )
        else:
            ask.append(call)
    approved = {c["id"]: c for c in runnable if c not in ask}
    forked = fork_of()
    on_fork = f" (on a fork of checkpoint {forked})" if forked else ""
    if ask:
        error = None
        while True:  # a bad resume asks again with the error: nothing runs, the approval stays pending
            value = interrupt(_request(ask, toolset, error))
            try:
                matched = match_decisions(value, ask)
                break
            except ResumeError as exc:
                error = str(exc)
        for call in ask:
            d = matched[call["id"]]
            if d["type"] == "reject":
                answers.append(
                    _answer(
                        call["id"],
                        call["name"],
                        f"Rejected by the user: {d.get('message') or 'no reason given'}",
                    )
                )
            else:
                args = d["edited_action"]["args"] if d["type"] == "edit" else call["args"]
                approved[call["id"]] = {**call, "args": args}
                if d.get("always_allow"):
                    await services.records.grant(ctx.workspace, ctx.user_id, call["name"])
            notes.append(
                decision(
                    _decision_id(toolset, call["name"]),
                    "person",
                    {call["id"]: d["type"]},
                    (d.get("message") or f"{call['name']}: {d['type']}") + on_fork,
                )
            )
    calls = [approved.get(c["id"], c) for c in ai.tool_calls]
    unrun = len(ai.invalid_tool_calls) + sum(1 for c in ai.tool_calls if c["id"] not in approved)
    out: dict[str, Any] = {
        "messages": answers,
        "approved": list(approved.values()),
        "decisions": notes,
        "tool_calls_made": unrun,  # a call answered without running still counts: a model cannot loop on them
    }
    if calls != ai.tool_calls:  # the model sees what actually ran, edited arguments included
        out["messages"] = [ai.model_copy(update={"tool_calls": calls}), *answers]
    notes.append(
        decision(
            "C10",
            "code",
            len(approved),
            f"{len(approved)} call(s) run in parallel; {len(answers)} answered without running",
        )
    )
    return out
