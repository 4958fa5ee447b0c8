"""A client's own tool loop in a turn (``Context.client_tools``): offered to the model, never run here.

An OpenAI client that sends ``tools`` runs them itself: the server hands the model's calls back and the
client sends their results in its next request (LangChain's ``bind_tools`` loop). The rule for such a run
is OpenAI's: the model sees the tools in the request, so the turn offers **only the client's tools**, none
of the workspace's (built-in, MCP or a program's); retrieval of the workspace's documents still happens.
So no call of the turn can reach ``approve`` or ``execute_tool``, and the approval policy is untouched: a
client's tools are not the server's to approve, and the server's are not offered.

- ``route`` checks the running turn (``exchange_problem``, ``clashes``): a client's calls and their results
  after the user's message continue the client's loop, and a client's tool may not share a name with one
  of the workspace's.
- ``call_model`` binds the client's schemas (native tool calling) or, for a prompted model, describes them
  in its catalog (``stub_tools``), then keeps only calls of client tools (``hand_back``).
- ``route_after_model`` ends a client run's turn at ``finish`` whatever the reply holds.

These readings live on the floor because three nodes share them (``route``, ``choose_tools`` and
``call_model``), and a node module imports no other.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from .client_tools import ClientTools
from .conversation import EXECUTED_PREFIX
from .state import Decision, decision

#: What a client's stub tool says if anything ever tried to run it on the server (nothing routes there).
NEVER_RUN = "a client's tool is run by the client, never on the server"


def exchange_problem(exchange: Sequence[BaseMessage], client: ClientTools | None) -> str | None:
    """Why messages after the turn's user message cannot continue a client's tool loop, or ``None``.

    They must be the client's own: assistant messages calling the client's tools, each followed by a
    result for every one of its calls, ending with a result. A call of any other tool, an orphan result, or
    a result dressed as one the server ran would have the model read as done what nobody did here.
    """
    if not exchange:
        return None
    if client is None:
        return (
            "tool calls and tool results after the user's message continue a client's own tool loop: send "
            "the tools (OpenAI tools) with them, or end the messages with the user's"
        )
    waiting: set[str] = set()
    for message in exchange:
        if isinstance(message, AIMessage):
            if waiting or message.invalid_tool_calls or not message.tool_calls:
                return (
                    "an assistant message after the user's must call tools, once earlier calls have results"
                )
            if unknown := sorted({c["name"] for c in message.tool_calls} - client.names):
                return f"the assistant's tool calls name {', '.join(unknown)}, not among the tools sent"
            waiting = {str(c["id"]) for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in waiting or (message.id or "").startswith(EXECUTED_PREFIX):
                return f"the tool message for {message.tool_call_id!r} answers no call of the message before"
            waiting.discard(message.tool_call_id)
        else:
            return f"a {message.type} message cannot follow the user's message in a client's tool loop"
    if waiting:
        return f"tool call(s) {', '.join(sorted(waiting))} have no tool message with their result"
    return None


def clashes(client: ClientTools | None, server_tools: set[str]) -> str | None:
    """Why the client's tool names cannot be used with this workspace, or ``None``.

    A client's tool named like one of the workspace's would make every record of the turn (its decisions,
    the chat log) ambiguous about which one the model meant; it is refused rather than guessed.
    """
    if client is None:
        return None
    if same := sorted(client.names & server_tools):
        return (
            f"client tool name(s) {', '.join(same)} are names of this workspace's own tools; rename them "
            "(a client's tools are offered alone, but a name must say whose tool it is)"
        )
    return None


def _never(**_: object) -> str:
    raise RuntimeError(NEVER_RUN)


def stub_tools(client: ClientTools) -> list[BaseTool]:
    """The client's functions as tools a prompted model's catalog can describe; none of them can run here."""
    return [
        StructuredTool(
            name=f.name,
            description=f.description or f.name.replace("_", " "),
            args_schema=f.parameters,
            func=_never,
            metadata={"client": True, "readOnlyHint": True},
        )
        for f in client.functions
    ]


def hand_back(response: AIMessage, client: ClientTools) -> tuple[AIMessage, list[Decision]]:
    """The reply with only calls of the client's tools, and the C10 decision to hand them to the client.

    A call naming any other tool (the model wrote a name it was never offered) is dropped: nothing in a
    client's run is executed on the server, and the client could not run it either.
    """
    notes: list[Decision] = []
    kept = [c for c in response.tool_calls if c["name"] in client.names]
    dropped = [c["name"] for c in response.tool_calls if c["name"] not in client.names]
    if dropped or response.invalid_tool_calls:
        names = dropped + [str(c.get("name")) for c in response.invalid_tool_calls]
        why = f"the reply called {', '.join(names)}, not among the client's tools: dropped, nothing was run"
        notes.append(decision("C10", "code", {"dropped": names}, why))
        extra = {k: v for k, v in response.additional_kwargs.items() if k != "tool_calls"}
        update = {"tool_calls": kept, "invalid_tool_calls": [], "additional_kwargs": extra}
        response = response.model_copy(update=update)
    if kept:
        why = (
            f"the reply calls the client's own tool(s) {', '.join(c['name'] for c in kept)}: handed back to "
            "the client, which runs them and sends the results; the server runs none"
        )
        notes.append(decision("C10", "code", {"to_client": [c["id"] for c in kept]}, why))
    return response, notes
