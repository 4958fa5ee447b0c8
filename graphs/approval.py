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

from typing import Any, Literal, NotRequired

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


class ApprovalDecision(TypedDict):
    """A person's answer to one action request: ``edited_action`` with an edit, ``message`` with a reject."""

    type: DecisionType
    tool_call_id: NotRequired[str]
    edited_action: NotRequired[EditedAction]
    message: NotRequired[str]
    always_allow: NotRequired[bool]


class ApprovalResponse(TypedDict):
    """The resume value: ``Command(resume={"decisions": [...]})``, one decision per action request."""

    decisions: list[ApprovalDecision]
