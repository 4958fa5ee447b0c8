"""D3 and D21 — may these tool actions run now? Policy first, then one question to a person per model turn.

Built-in skills, the program's tools and MCP tools all pass through here under the same fnmatch policy
(AnythingLLM lets every MCP call through unasked). The interrupt value is langchain's human-in-the-loop
request (``core.approval``), so clients made for it work unchanged; decisions are matched by
``tool_call_id`` when given, so a client that reorders its cards cannot approve the wrong call.

The node is five steps, each a function below: validity, budget, policy, remembered grants, a person. Each
step is given the calls the steps before it left open and returns a ``Step``: the calls it answered without
running them, the calls it approved, the calls it leaves to the next step, and its trace notes. ``approve``
calls them in order and builds its update from their results at the end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import NamedTuple, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ..checkpoints.chatlog import Records
from ..core.approval import (
    DECISION_TYPES,
    ActionRequest,
    ApprovalDecision,
    ApprovalRequest,
    ResumeError,
    checked_decisions,
)
from ..core.context import Context
from ..core.conversation import (
    EXECUTED_PREFIX,
    call_key,
    message_text,
    results_in_words,
    turn_question,
    turn_start,
)
from ..core.figures import LOOP_TEXT, figures, shown, turn_sources, unsourced_operands, unsupported
from ..core.jobs import deadline
from ..core.prompts import (
    ALREADY_RUN,
    LOOP_WRITE,
    RESULTS_IN_WORDS,
    STRAY_WRITE,
    UNSOURCED_CALCULATION,
    WAITING,
    WRITE_AGAIN,
)
from ..core.question import ASK_TOOL, checked_answer, question_request
from ..core.state import AgentState, Decision, decision, fork_of
from ..providers.prompted.catalog import acts, builtin, strings
from .services import Services, Toolset

T = TypeVar("T")


class Step(NamedTuple):
    """What one step of ``approve`` settled about the calls it was given.

    Every note is about one call: its ``outcome`` is ``{call id: what was decided}``.
    """

    answered: list[ToolMessage]  # calls answered without running: what the model reads instead of a result
    run: list[ToolCall]  # calls approved to run (with a person's edited arguments)
    rest: list[ToolCall]  # calls left to the next step
    notes: list[Decision]


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
    return "D3" if builtin(toolset.tools[name]) else "D21"


_NOT_CHOSEN = (
    "this workspace does not offer the tool {!r} (its tools, or the run's only_tools or without_tools)"
)


def earlier_results(messages: list[AnyMessage]) -> dict[str, ToolMessage]:
    """The results of this turn's calls that ran, by ``call_key``: an error is a result too.

    A small model that does not see what to do next repeats its last call; AnythingLLM's Deduplicator
    answers such a repeat from the earlier result instead of running it, and so does ``approve``. It runs a
    call that failed again; here the failure is given again: the 1.5B wrote one runaway expression
    (``12 * 12 * 12 …`` to the grammar's longest string) six rounds running, each refused by ``calculate``
    the same way, for seven minutes. Given its error again, the round is one of repeats, and the model is
    asked for its answer (``answer_after_repeats``). A person who wants a failed call tried again asks in
    the next turn, where it runs.
    """
    turn = messages[turn_start(messages) :]
    results = {
        m.tool_call_id: m
        for m in turn
        if isinstance(m, ToolMessage) and (m.id or "").startswith(EXECUTED_PREFIX)
    }
    calls = [c for m in turn[:-1] if isinstance(m, AIMessage) for c in m.tool_calls]
    return {call_key(c): results[c["id"]] for c in calls if c["id"] in results}


def _not_run(error: str | None) -> str:
    """Why an invalid call did not run: a call waiting for a result, or arguments that are not JSON."""
    if error and WAITING in error:
        return f"Not run: {error}."
    why = error or "parse error"
    return f"Not run: the arguments are not valid JSON ({why}). Send the call again with JSON arguments."


def _answer(call_id: str | None, name: str, text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name=name, status="error")


# The steps, in the order ``approve`` takes them.


def check_validity(ai: AIMessage, messages: list[AnyMessage], toolset: Toolset) -> Step:
    """Answer the calls that cannot or need not run: unparsable, repeated, not offered, or no such tool.

    A repeat of a call that already ran in this turn gets its earlier result again (C10); a tool the
    workspace or run did not choose is refused under D3, since choosing tools is policy.
    """
    answered = [
        _answer(b.get("id") or "", b.get("name") or "", _not_run(b.get("error")))
        for b in ai.invalid_tool_calls
    ]
    notes: list[Decision] = []
    rest: list[ToolCall] = []
    ran = earlier_results(messages)
    for call in ai.tool_calls:
        name = call["name"]
        if (earlier := ran.get(call_key(call))) is not None:
            again = message_text(earlier) + ALREADY_RUN
            answered.append(ToolMessage(again, tool_call_id=call["id"], name=name, status=earlier.status))
            why = f"{name} with these arguments already ran in this turn: its result was given again"
            notes.append(decision("C10", "code", {call["id"]: "repeat, not run"}, why))
        elif name in toolset.unchosen:
            answered.append(_answer(call["id"], name, f"Not run: {_NOT_CHOSEN.format(name)}"))
            notes.append(
                decision("D3", "policy", {call["id"]: "not chosen"}, f"{name}: {_NOT_CHOSEN.format(name)}")
            )
        elif name not in toolset.tools:
            available = ", ".join(sorted(toolset.tools))
            text = f"Not run: there is no tool named {name!r}. Available tools: {available}."
            answered.append(_answer(call["id"], name, text))
        else:
            rest.append(call)
    return Step(answered, [], rest, notes)


def check_written_figures(calls: list[ToolCall], state: AgentState, toolset: Toolset) -> Step:
    """G3 for a write: a call that changes something states only figures the turn's sources hold.

    After results are in, the 1.5B proposed the note "5 installations cost 60 EUR per year" where its
    ``calculate`` had returned 720: a card a person might approve without reading the sum again. It also
    saved a note that copied the next-step ask ("The question also names save_note, ... Check every part of
    the question."), words of the loop a person must never read (``LOOP_TEXT``). Such a call is answered,
    not run and not shown, with the difference and the results, so the model writes it again; a call of the
    same tool refused once already this turn goes on to the policy and the person as written.
    """
    messages = state["messages"]
    ran, sources = turn_sources(state.get("plan", {}), messages)
    turn = messages[turn_start(messages) :]
    refused = {
        m.name
        for m in turn
        if isinstance(m, ToolMessage) and message_text(m).startswith((STRAY_WRITE, LOOP_WRITE))
    }
    answered: list[ToolMessage] = []
    rest: list[ToolCall] = []
    notes: list[Decision] = []
    asked = turn_question(messages)
    computed, inputs = calculations(turn, figures(message_text(asked)) if asked else set())
    for call in calls:
        tool = toolset.tools.get(call["name"])
        checked = bool(tool and acts(tool)) and call["name"] not in refused
        written = " ".join(strings(call["args"]))
        copied = LOOP_TEXT.search(written) if checked else None
        stray = unsupported(written, sources) if checked and ran else []
        operand = operands_only(written, computed, inputs) if checked and ran else []
        if not (copied or stray or operand):
            rest.append(call)
            continue
        results = "\n".join(results_in_words(turn))
        if copied:
            said = " ".join(copied.group(0).split())
            text = f"{LOOP_WRITE}: its arguments copy {said!r} from the instructions, not for the person."
            why = f"{call['name']} would write the loop's own words ({said!r}): sent back to the model"
            outcome: dict[str, object] = {"copied": said}
        elif stray:
            named = ", ".join(shown(n) for n in stray)
            text = f"{STRAY_WRITE}: its arguments state {named}, which no result, document or question holds."
            why = f"{call['name']} would write {named}, which no source holds: sent back to the model"
            outcome = {"stray": stray}
        else:
            named = ", ".join(shown(n) for n in operand)
            result = ", ".join(shown(n) for n in sorted(computed))
            text = f"{STRAY_WRITE}: it states {named}, an input of calculate, not its result {result}."
            why = f"{call['name']} would write {named}, an input of calculate, not its result: sent back"
            outcome = {"operand": operand}
        answered.append(
            _answer(call["id"], call["name"], f"{text}\n{RESULTS_IN_WORDS}{results}\n{WRITE_AGAIN}")
        )
        notes.append(decision("G3", "code", {call["id"]: outcome}, why))
    return Step(answered, [], rest, notes)


def check_operands(calls: list[ToolCall], state: AgentState, toolset: Toolset) -> Step:
    """G3 for a calculation: ``calculate`` starts only from figures the turn's sources hold.

    A result is a source every later check trusts, so a made-up operand would pass through it as fact: with
    no document to read, the 1.5B priced three installations with ``calculate("3 * 100")`` and answered "300
    dollars", which the answer's check then found in a result. Such a call is answered, not run, with the
    figure named, so the model looks it up or says it is not known. A repeat is refused again: unlike a write,
    no person reads a calculation before its result is used.
    """
    _, sources = turn_sources(state.get("plan", {}), state["messages"])
    answered: list[ToolMessage] = []
    rest: list[ToolCall] = []
    notes: list[Decision] = []
    for call in calls:
        tool = toolset.tools.get(call["name"])
        calculate = tool is not None and builtin(tool) and tool.name == "calculate"
        made_up = unsourced_operands(" ".join(strings(call["args"])), sources) if calculate else []
        if not made_up:
            rest.append(call)
            continue
        named = ", ".join(shown(n) for n in made_up)
        answered.append(_answer(call["id"], call["name"], UNSOURCED_CALCULATION.format(figures=named)))
        why = f"calculate would start from {named}, which no result, document or question holds: not run"
        notes.append(decision("G3", "code", {call["id"]: {"unsourced": made_up}}, why))
    return Step(answered, [], rest, notes)


def calculations(turn: list[AnyMessage], given: set[float]) -> tuple[set[float], set[float]]:
    """The turn's ``calculate`` results, and the figures its expressions took that the question did not give.

    A figure the person gave is theirs to repeat; one the model took from a document or an earlier result and
    fed to ``calculate`` is a step on the way to the result.
    """
    results = {
        n
        for m in turn
        if isinstance(m, ToolMessage) and m.name == "calculate" and m.status != "error"
        for n in figures(message_text(m))
    }
    inputs = {
        n
        for m in turn
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["name"] == "calculate"
        for n in figures(" ".join(strings(c["args"])))
    }
    return results, inputs - given - results


def operands_only(written: str, computed: set[float], inputs: set[float]) -> list[float]:
    """A write's figures that are ``calculate``'s inputs, when it states none of its results; else none.

    The 1.5B, asked to save what 5 installations cost a year, proposed "… cost 120 EUR per year" where
    ``calculate("5 * 120")`` had returned 600: a step of the sum written as its answer, which every source
    holds, so the check of unsupported figures lets it through.
    """
    stated = figures(written, clock=False)
    if not computed or stated & computed:
        return []
    return sorted(stated & inputs)


def check_budget(calls: list[ToolCall], left: int) -> Step:
    """Keep the first ``left`` calls (the turn's remaining tool calls); answer the ones past the budget."""
    keep = max(left, 0)
    over = [
        _answer(c["id"], c["name"], "Not run: the tool-call budget of this turn is spent.")
        for c in calls[keep:]
    ]
    return Step(over, [], calls[:keep], [])


def check_policy(calls: list[ToolCall], ctx: Context, toolset: Toolset) -> Step:
    """Approve the calls the policy lets through unasked (``needs_approval``); the others need more."""
    run: list[ToolCall] = []
    rest: list[ToolCall] = []
    notes: list[Decision] = []
    for call in calls:
        if needs_approval(ctx, call["name"]):
            rest.append(call)
        else:
            run.append(call)
            why = f"{call['name']} is auto-approved"
            notes.append(
                decision(_decision_id(toolset, call["name"]), "policy", {call["id"]: "approve"}, why)
            )
    return Step([], run, rest, notes)


async def check_grants(calls: list[ToolCall], ctx: Context, toolset: Toolset, records: Records) -> Step:
    """Approve the calls the person chose "always allow" for; the floor and the run's ``also_ask`` still ask.

    A remembered grant is per workspace and user, and waives neither the deployment's floor nor what the
    run itself asked to be asked about.
    """
    run: list[ToolCall] = []
    rest: list[ToolCall] = []
    notes: list[Decision] = []
    for call in calls:
        if _matches(call["name"], [*always_ask(), *ctx.also_ask]):
            rest.append(call)
        elif await records.is_granted(ctx.workspace, ctx.user_id, call["name"]):
            run.append(call)
            why = f"always allow {call['name']} was chosen"
            notes.append(
                decision(_decision_id(toolset, call["name"]), "policy", {call["id"]: "approve"}, why)
            )
        else:
            rest.append(call)
    return Step([], run, rest, notes)


def ask_questions(calls: list[ToolCall]) -> Step:
    """Q1: an ``ask_person`` call is answered by the person, one question interrupt per call, in call order.

    The question interrupt is its own kind (``core.question``), asked before any approval card of the same
    reply. A resume value that does not answer it (no text, not one of the choices) asks the same question
    again with the error. The answer is the call's result, a source the figure check (G3) accepts; it is
    marked as run, so the same question repeated in the turn gets the same answer without asking again.
    """
    answered: list[ToolMessage] = []
    rest: list[ToolCall] = []
    notes: list[Decision] = []
    for call in calls:
        if call["name"] != ASK_TOOL:
            rest.append(call)
            continue
        error = None
        while True:
            request = question_request(call["id"] or "", call["args"], error)
            try:
                answer = checked_answer(interrupt(request), request)
                break
            except ResumeError as exc:
                error = str(exc)
        message = ToolMessage(
            answer, tool_call_id=call["id"], name=ASK_TOOL, id=f"{EXECUTED_PREFIX}{call['id']}"
        )
        answered.append(message)
        why = f"asked {request['question']!r}; the person answered"
        notes.append(decision("Q1", "person", {call["id"]: "answered"}, why))
    return Step(answered, [], rest, notes)


async def ask_person(calls: list[ToolCall], ctx: Context, toolset: Toolset, records: Records) -> Step:
    """Ask a person about every call still open, in one interrupt; approve, edit or reject each as answered.

    A resume value that does not answer the request properly asks again with the error: nothing runs and
    the approval stays pending. An "always allow" is remembered here, once the person has answered.
    """
    if not calls:
        return Step([], [], [], [])
    error = None
    while True:
        value = interrupt(approval_request(calls, toolset, error))
        try:
            matched = match_decisions(value, calls)
            break
        except ResumeError as exc:
            error = str(exc)
    forked = fork_of()
    on_fork = f" (on a fork of checkpoint {forked})" if forked else ""
    answered: list[ToolMessage] = []
    run: list[ToolCall] = []
    notes: list[Decision] = []
    for call in calls:
        d = matched[call["id"]]
        if d["type"] == "reject":
            why = d.get("message") or "no reason given"
            answered.append(_answer(call["id"], call["name"], f"Rejected by the user: {why}"))
        else:
            args = d["edited_action"]["args"] if d["type"] == "edit" else call["args"]
            run.append({**call, "args": args})
            if d.get("always_allow"):
                await records.grant(ctx.workspace, ctx.user_id, call["name"])
        why = (d.get("message") or f"{call['name']}: {d['type']}") + on_fork
        notes.append(decision(_decision_id(toolset, call["name"]), "person", {call["id"]: d["type"]}, why))
    return Step(answered, run, [], notes)


# The approval request and the reading of its answer.


def _action_request(call: ToolCall, tool: BaseTool) -> ActionRequest:
    """One call as the person reviews it; an MCP tool's card also names its server and its own name."""
    action: ActionRequest = {
        "tool_call_id": call["id"],
        "name": call["name"],
        "args": call["args"],
        "description": tool.description,
    }
    for key, value in (tool.metadata or {}).items():  # in the metadata's order, as clients have seen it
        if key == "server":
            action["server"] = value
        elif key == "tool":
            action["tool"] = value
    return action


def approval_request(calls: list[ToolCall], toolset: Toolset, error: str | None) -> ApprovalRequest:
    """The interrupt value for ``calls``; ``error`` says why the previous resume value was not taken."""
    request: ApprovalRequest = {
        "type": "tool_approval",
        "action_requests": [_action_request(c, toolset.tools[c["name"]]) for c in calls],
        "review_configs": [
            {"action_name": c["name"], "allowed_decisions": list(DECISION_TYPES)} for c in calls
        ],
    }
    if error:
        request["error"] = error
    return request


def match_decisions(value: object, calls: list[ToolCall]) -> dict[str | None, ApprovalDecision]:
    """Pair each pending call with its decision, by ``tool_call_id`` or else by position; raise if unsure.

    Each decision is first checked by shape (``checked_decisions``), then for the call it answers (named, or
    at its position; unknown or answered twice is an error), and for an edit, for the same tool.
    """
    decisions = checked_decisions(value if isinstance(value, dict) else None)
    by_id = {c["id"]: c for c in calls}
    matched: dict[str | None, ApprovalDecision] = {}
    for i, answer in enumerate(decisions):
        call_id = answer.get("tool_call_id") or (calls[i]["id"] if i < len(calls) else None)
        if call_id not in by_id:
            named = answer.get("tool_call_id") or f"at position {i}"
            raise ResumeError(f"decision {i}: no pending tool call {named!r}")
        if call_id in matched:
            raise ResumeError(f"decision {i}: tool call {call_id!r} is answered twice")
        if answer["type"] == "edit":
            if answer["edited_action"].get("name", by_id[call_id]["name"]) != by_id[call_id]["name"]:
                raise ResumeError(f"decision {i}: an edit cannot change which tool is called")
        matched[call_id] = answer
    missing = [str(c["id"]) for c in calls if c["id"] not in matched]
    if missing:
        raise ResumeError(f"no decision for pending tool call(s): {', '.join(missing)}")
    return matched


def _in_order(items: Iterable[T], of: Callable[[T], str | None], calls: list[ToolCall]) -> list[T]:
    """``items`` sorted by the position of their call in ``calls``; items of no call there come first."""
    position: dict[str | None, int] = {}
    for i, call in enumerate(calls):
        position.setdefault(call["id"], i)
    return sorted(items, key=lambda item: position.get(of(item), -1))


def in_call_order(calls: list[ToolCall], *steps: Step) -> Step:
    """Steps taken one after the other over ``calls``, merged as if taken call by call.

    Validity then budget, and policy then grants, each settle a call in one of two rounds; the model, the
    trace and the order the approved calls run in see what was settled in the order of the model's calls.
    """
    return Step(
        _in_order([m for s in steps for m in s.answered], lambda m: m.tool_call_id, calls),
        _in_order([c for s in steps for c in s.run], lambda c: c["id"], calls),
        steps[-1].rest,
        _in_order([n for s in steps for n in s.notes], lambda n: next(iter(n["outcome"])), calls),
    )


async def approve(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """Decide which of the model's tool calls run: validity, budget, policy, remembered grants, a person.

    A call answered without running is answered with a message the model reads in place of a result; it
    still counts toward the turn's ``max_tool_calls``, so a model cannot loop on refused calls.
    """
    ctx = runtime.context
    ai: AIMessage = state["messages"][-1]  # type: ignore[assignment]
    toolset = await services.toolset(ctx)
    # 1. Validity: unparsable calls, repeats of calls that already ran, tools not offered or not there
    valid = check_validity(ai, state["messages"], toolset)
    # 2. Figures: a write states only what the turn's sources hold, and a calculation starts from them (G3)
    written = check_written_figures(valid.rest, state, toolset)
    operands = check_operands(written.rest, state, toolset)
    # 3. Budget: only as many valid calls as the turn may still make
    budget = check_budget(operands.rest, ctx.max_tool_calls - state.get("tool_calls_made", 0))
    # 4. Questions: the person answers the model's ask_person calls (Q1), before any approval card
    asked = ask_questions(budget.rest)
    # 5. Policy: auto-approved calls run unasked
    policy = check_policy(asked.rest, ctx, toolset)
    # 6. Remembered grants: "always allow" waives the question, but not the floor or the run's also_ask
    grants = await check_grants(policy.rest, ctx, toolset, services.records)
    # 7. A person: one approval card for all the calls still open
    person = await ask_person(grants.rest, ctx, toolset, services.records)
    # 8. The update, from the steps' results, each round in the order of the model's calls
    screened = in_call_order(ai.tool_calls, valid, written, operands, budget, asked)
    allowed = in_call_order(asked.rest, policy, grants)
    answers = [*screened.answered, *person.answered]
    approved = {c["id"]: c for c in [*allowed.run, *person.run]}
    calls = [approved.get(c["id"], c) for c in ai.tool_calls]
    unrun = len(ai.invalid_tool_calls) + sum(1 for c in ai.tool_calls if c["id"] not in approved)
    ran = f"{len(approved)} call(s) run in parallel; {len(answers)} answered without running"
    waited = [n for n in [*asked.notes, *person.notes] if n["decided_by"] == "person"]
    restart = {"deadline": deadline(ctx.time_limit)} if waited and ctx.time_limit else {}
    return {
        **restart,  # a person's wait is no work: the run's time limit counts again from the answer
        # the model sees what actually ran, edited arguments included
        "messages": answers
        if calls == ai.tool_calls
        else [ai.model_copy(update={"tool_calls": calls}), *answers],
        "approved": list(approved.values()),
        "decisions": [
            *screened.notes,
            *allowed.notes,
            *person.notes,
            decision("C10", "code", len(approved), ran),
        ],
        "tool_calls_made": unrun,  # a call answered without running still counts: a model cannot loop on them
    }
