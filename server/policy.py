"""What a client may ask of a served graph: the layers of DESIGN §2 "Who sets what", checked on arrival.

The server merges a run's context over its assistant's key by key, the run winning, and the graph only sees
the result. So a run that sent its own ``auto_approved`` would replace the workspace's, and nothing after the
merge could tell. The rules are therefore applied where the run's own values are still visible: in the auth
handler of ``threads.create_run`` (``server/auth.py``), the same under ``langgraph dev`` and Aegra.

- The approval policy (``auto_approved``, ``approval_required``) is the workspace's, set on its assistant.
  A run may only send values that tighten whatever the assistant says (``auto_approved: []``, or an
  ``approval_required`` holding ``"*"``); it adds approval with ``also_ask``, which an assistant may not set,
  so no run can clear it either.
- The tools a workspace offers (``tools``) are its assistant's too; a run narrows them with
  ``without_tools`` or ``only_tools`` (a scheduled job's tools) only, so a run can never offer a tool its
  workspace did not choose.
- A client's own tools and reply format (``client_tools``, ``response_format``: an OpenAI client's ``tools``
  and ``response_format``) are a run's only, checked by type here as in ``Context``. They loosen nothing:
  a run that brings tools is offered those alone, and their calls go back to the client, never to
  ``approve`` or ``execute_tool`` (``core/client_loop.py``).
- A run resumes an approval with ``Command(resume=...)`` only: ``goto`` and ``update`` would hand
  ``execute_tool`` a call no one approved. Thread state is written by the graph's nodes only, for the same
  reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.client_tools import ClientTools, ResponseFormat
from ..core.context import Context, ContextError, IngestContext, MemoryContext, Settings, check_value
from ..core.conversation import ATTACHMENT_TYPES
from ..nodes.uploads import FILES_ENV, TOTAL_ENV, files_cap, total_cap

#: A run's own narrowing, which an assistant may not set: a run wins the merge, so it could clear them.
NARROWING = ("also_ask", "without_tools", "only_tools")
#: A run's own marks, which an assistant may not set: the job a run is one of (a scheduled job's context).
RUN_MARKS = ("job",)
#: What one OpenAI client's request brings (its tools, its reply format): a run's, never a workspace's.
CLIENT_REQUEST = {"client_tools": ClientTools | None, "response_format": ResponseFormat | None}
RUN_ONLY = (*NARROWING, *CLIENT_REQUEST, *RUN_MARKS)
#: Each graph's context schema by graph id (``langgraph.json``): what the server makes a run's context into,
#: and so what an assistant's stored context must already be.
GRAPH_CONTEXTS: dict[str, type[Settings]] = {
    "agent": Context,
    "memory": MemoryContext,
    "ingest": IngestContext,
}


class PolicyError(PermissionError):
    """A request that would loosen approval, act for another user or write what only the graph writes."""


class TooLarge(PolicyError):
    """A run whose message carries more files, or more bytes of files, than a message may (HTTP 413)."""


def _attachment_bytes(block: dict[str, Any]) -> int:
    """About how many bytes a content block's file carries: its base64 text, wherever a client puts it."""
    size = 0
    for value in block.values():
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, dict):
            size += sum(len(v) for v in value.values() if isinstance(v, str))
    return size * 3 // 4


def check_input(value: Any) -> None:
    """Refuse at the door a message whose files exceed the per-message caps, before anything stores it.

    The server checkpoints a run's input before any node runs, so a file the ``ingest_uploads`` node refuses
    would still stay in the thread's first checkpoint. The caps are the node's own (``UPLOAD_MAX_FILES``,
    ``UPLOAD_MAX_TOTAL_BYTES``), so a message the node would take in full is never refused here.
    """
    messages = value.get("messages") if isinstance(value, Mapping) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        files = [b for b in blocks if b.get("type") in ATTACHMENT_TYPES]
        most, total = files_cap(), sum(map(_attachment_bytes, files))
        if len(files) > most:
            raise TooLarge(
                f"a message may carry at most {most} files ({FILES_ENV}); this one carries {len(files)}"
            )
        if total > (limit := total_cap()):
            raise TooLarge(
                f"a message's files may come to at most {limit} bytes ({TOTAL_ENV}); this one's come to "
                f"about {total}"
            )


def run_parts(value: dict[str, Any]) -> dict[str, Any]:
    """The dict holding a run's ``context``, ``config`` and ``command``.

    ``langgraph dev`` hands the handler ``{"kwargs": {...}}``; Aegra hands it the request's fields at the top
    level. Either way the returned dict is the one the server reads after the handler.
    """
    kwargs = value.get("kwargs")
    return kwargs if isinstance(kwargs, dict) else value


def run_settings(parts: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every place a run's settings can come from: its context and, when that is empty, its configurable."""
    context = parts.get("context") or {}
    configurable = (parts.get("config") or {}).get("configurable") or {}
    return [m for m in (context, configurable) if isinstance(m, Mapping)]


def check_run_settings(values: Mapping[str, Any], user: str | None) -> None:
    """Refuse a run's settings that would loosen approval or name another user.

    Args:
        values: The run's own context (or configurable), before the server merges the assistant's.
        user: The authenticated user, or ``None`` when authentication is off.
    """
    hints: dict[str, Any] = {n: list[str] for n in ("auto_approved", "approval_required", *NARROWING)}
    hints["only_tools"] = list[str] | None
    for name, hint in {**hints, **CLIENT_REQUEST}.items():
        if name in values:
            try:
                check_value(name, hint, values[name])
            except ContextError as exc:
                raise PolicyError(str(exc)) from None
    if values.get("auto_approved", []) != []:
        raise PolicyError(
            "a run cannot set auto_approved: it is the workspace's setting, made on its assistant by its "
            "owner. A run asks for more approval with also_ask (tool-name patterns) or auto_approved: []."
        )
    if "tools" in values:
        raise PolicyError(
            "a run cannot set tools: which tools a workspace offers is set on its assistant. A run offers "
            "fewer with without_tools (tool-name patterns)."
        )
    if "mcp_servers" in values:
        raise PolicyError(
            "a run cannot set mcp_servers: which of the deployment's MCP servers a workspace uses is set on "
            "its assistant (a run's list would replace it, and could name a server the workspace left out). "
            'A run offers fewer with without_tools (e.g. ["github-*"]).'
        )
    if "approval_required" in values and "*" not in values["approval_required"]:
        raise PolicyError(
            "a run cannot narrow approval_required: it is the workspace's setting, made on its assistant. "
            'A run asks for more approval with also_ask, or approval_required: ["*"].'
        )
    claimed = values.get("user_id")
    if user is not None and claimed is not None and claimed != user:
        raise PolicyError(f"user_id is the authenticated user ({user!r}); a run cannot act as {claimed!r}")


def check_command(command: Any) -> None:
    """A run may resume a pending approval, never steer the graph past it."""
    if isinstance(command, Mapping) and (command.get("goto") or command.get("update") is not None):
        raise PolicyError(
            "a run's command may only resume (Command(resume=...)): goto and update would run tool calls "
            "that no one approved"
        )


def check_context_schema(values: Mapping[str, Any], graph_id: str | None) -> None:
    """Refuse a context its graph would refuse at every run: by the graph's own schema, as a run's is.

    An update names no graph unless it moves the assistant to another (both servers hand the handler only
    what the request holds), so with ``graph_id`` unknown the context must suit one of the graphs' schemas.
    A wrongly typed value suits none; the reason given is that of the first graph (the agent's, which every
    workspace is) whose fields the context names, so a memory assistant's wrong ``min_chats`` is named as
    such rather than as unknown.

    Raises:
        ContextError: A setting of the wrong type, out of range or unknown, naming the field.
    """
    if graph_id is not None and graph_id not in GRAPH_CONTEXTS:
        return  # no graph of ours: the server refuses an unknown graph itself
    schemas = [GRAPH_CONTEXTS[graph_id]] if graph_id is not None else list(GRAPH_CONTEXTS.values())
    wrong: ContextError | None = None
    unknown: ContextError | None = None
    for schema in schemas:
        if names := sorted(set(values) - set(schema.model_fields)):
            unknown = unknown or ContextError(f"unknown context field(s): {', '.join(names)}")
            continue
        try:
            schema(**values)
        except ContextError as exc:
            wrong = wrong or exc
        else:
            return
    if problem := wrong or unknown:
        raise problem


def check_assistant_context(values: Mapping[str, Any] | None, graph_id: str | None, user: str | None) -> None:
    """Refuse an assistant's context that is ill-typed, claims another user or sets a run's field.

    Checked when the context is stored (create and update), so a wrong value is refused where it was
    written rather than at every later run of the assistant.

    Raises:
        ContextError: A setting of the wrong type, out of range or unknown to the assistant's graph.
        PolicyError: ``also_ask`` (a run could clear it) or a ``user_id`` other than the owner's.
    """
    values = values or {}
    for name in RUN_ONLY:
        if name in values:
            raise PolicyError(
                f"{name} is a run's setting; an assistant sets its approval with approval_required and "
                "auto_approved, and its tools with tools"
            )
    claimed = values.get("user_id")
    if user is not None and claimed is not None and claimed != user:
        raise PolicyError(
            f"user_id is the authenticated user ({user!r}); an assistant cannot name {claimed!r}"
        )
    check_context_schema(values, graph_id)


def shared_settings(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """A workspace's settings as its members' runs take them: every workspace field, defaults included.

    Every field is written out, so none of a member's own assistant's values is merged in under them.
    ``None`` for a context that is not an agent workspace's (a memory or ingest assistant's).
    """
    try:
        context = Context(**values)
    except (ContextError, TypeError, ValueError):
        return None
    return context.model_dump(mode="json", exclude={"user_id", "workspace", *RUN_ONLY})
