"""The approval contract: what ``approve`` asks a person (the interrupt value) and what a client answers.

It is langchain's human-in-the-loop request and response (``HITLRequest`` with its action requests and
review configs, ``HITLResponse`` with its decisions), so clients made for it (Agent Chat UI, Studio,
``create_agent`` front ends) work unchanged. What this project adds, and why:

- ``type: "tool_approval"`` on the request, so a client can tell this interrupt from any other;
- ``tool_call_id`` on each action request and, optionally, on each decision: a decision that names its call
  is matched to it whatever its position, so a client that reorders its cards cannot approve the wrong call;
- ``server`` and ``tool`` on an MCP tool's action request, so a card can say whose tool it is;
- ``error`` on a request asked again because the previous resume value did not answer it properly;
- ``always_allow`` on a decision, which remembers the grant for the workspace and user.

Only ``approve``, ``edit`` and ``reject`` are offered (langchain's ``respond`` is not). These are types for
the shape only: ``nodes.approve`` checks a resume value against them before it trusts it.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, cast

from typing_extensions import TypedDict

DecisionType = Literal["approve", "edit", "reject"]
#: The decisions every review config allows, in the order clients show them.
DECISION_TYPES: tuple[DecisionType, ...] = ("approve", "edit", "reject")


class ActionRequest(TypedDict):
    """One pending tool call, as the person reviews it."""

    tool_call_id: str | None  # the model's call's id, as langchain types it (every provider here sets one)
    name: str
    args: dict[str, Any]
    description: str
    #: An MCP tool's server, and the tool's own name there (the call's name is ``<server>-<tool>``).
    server: NotRequired[str]
    tool: NotRequired[str]


class ReviewConfig(TypedDict):
    """What the person may decide about the action request of the same name."""

    action_name: str
    allowed_decisions: list[DecisionType]


class ApprovalRequest(TypedDict):
    """The interrupt value: every call of one model turn that needs a person, asked at once."""

    type: Literal["tool_approval"]
    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]
    #: Why the previous resume value was not taken; the request is the same one, asked again.
    error: NotRequired[str]


class EditedAction(TypedDict):
    """An edit's replacement call: new arguments for the same tool (``name``, if given, must not change)."""

    name: NotRequired[str]
    args: dict[str, Any]


class _DecisionFields(TypedDict):
    """What any decision may carry besides its type."""

    tool_call_id: NotRequired[str]
    message: NotRequired[str]
    always_allow: NotRequired[bool]


class ApproveDecision(_DecisionFields):
    """Run the call as the model wrote it."""

    type: Literal["approve"]


class EditDecision(_DecisionFields):
    """Run the call with the person's arguments: an edit always carries them (``checked_decisions``)."""

    type: Literal["edit"]
    edited_action: EditedAction


class RejectDecision(_DecisionFields):
    """Answer the call without running it, with the person's ``message`` when there is one."""

    type: Literal["reject"]


#: A person's answer to one action request: ``edited_action`` with an edit, ``message`` with a reject. A union
#: on ``type``, so code that has checked for an edit may read its action.
ApprovalDecision: TypeAlias = ApproveDecision | EditDecision | RejectDecision


class ApprovalResponse(TypedDict):
    """The resume value: ``Command(resume={"decisions": [...]})``, one decision per action request."""

    decisions: list[ApprovalDecision]


class ResumeError(ValueError):
    """A resume value that does not answer the pending approval request properly; the message says how."""


#: Each optional field of a decision and the type its value must have (an edit's action is checked apart).
_FIELD_TYPES: dict[str, type] = {"tool_call_id": str, "message": str, "always_allow": bool}


def _shape_problem(d: object) -> str | None:
    """What is wrong with one decision's shape, or ``None``: the words a client's author can act on."""
    if not isinstance(d, dict) or d.get("type") not in DECISION_TYPES:
        return f"type must be one of {', '.join(DECISION_TYPES)}"
    for name, kind in _FIELD_TYPES.items():
        value = d.get(name)
        if value is not None and not isinstance(value, kind):
            return f"{name} must be a {kind.__name__}, not {type(value).__name__}"
    if d.get("tool_call_id") == "":
        return "tool_call_id must not be empty (leave it out to answer by position)"
    if d["type"] == "edit":
        action = d.get("edited_action")
        if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
            return 'an edit needs "edited_action": {"name", "args": {...}} with args an object'
        if not isinstance(action.get("name", ""), str):
            return "edited_action.name must be a string"
    return None


def checked_decisions(value: object) -> list[ApprovalDecision]:
    """The decisions of a resume value, each checked by shape before anything is matched or run.

    Everything a client sends is checked here first, whichever way it came (the SDK's ``Command(resume=...)``,
    ``/api/v1``'s ``decisions``, the CLI): an id that is an object, a message that is a list or an edit whose
    arguments are no object is refused with a message naming the decision and the field, never met later as
    a ``TypeError`` that fails the run and loses the pending approval. Fields not in the contract are dropped.

    Args:
        value: ``{"decisions": [...]}`` as the client sent it, or the list alone.

    Raises:
        ResumeError: The value or one of its decisions has the wrong shape.
    """
    decisions = value.get("decisions") if isinstance(value, dict) else value
    if not isinstance(decisions, list):
        raise ResumeError('resume with {"decisions": [...]}, one decision per pending tool call')
    for i, d in enumerate(decisions):
        problem = _shape_problem(d)
        if problem:
            raise ResumeError(f"decision {i}: {problem}")
    return [_contract_fields(d) for d in decisions]


def _contract_fields(d: dict[str, Any]) -> ApprovalDecision:
    """A shape-checked decision with only the contract's fields, so nothing else travels with it."""
    kept = {k: d[k] for k in ("type", *_FIELD_TYPES) if d.get(k) is not None}
    if d["type"] == "edit":
        action = d["edited_action"]
        kept["edited_action"] = {k: action[k] for k in ("name", "args") if k in action}
    return cast(ApprovalDecision, kept)
