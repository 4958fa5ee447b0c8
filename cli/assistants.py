"""``workspace-agent assistant create|list``: one LangGraph assistant per workspace, made once.

Web clients (Agent Chat UI and most front ends) send no context with a run: they pick an assistant, and the
assistant's context holds the workspace's settings. A workspace therefore needs exactly one assistant per
graph, and "create" must be safe to repeat. Servers disagree on repeats: Aegra answers a second identical
create with 409, ``langgraph dev`` makes a copy. So this module never relies on either: it looks the
workspace's assistant up by metadata first, creates it under an id derived from (graph, workspace) with
``if_exists="do_nothing"`` (so two creators racing get the same one), and updates the context only when it
changed. The same command then works against both servers, any number of times.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import uuid
from typing import Any, Literal, cast

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Assistant
from rich.console import Console

GRAPHS = ("agent", "ingest", "memory")
DEFAULT_SERVER = "http://127.0.0.1:2026"
"""Where ``make serve`` listens unless ``SERVE_PORT`` says otherwise (``langgraph dev``: 2024)."""
NAMESPACE = uuid.UUID("4f1d0c2e-7a3b-5e55-9a61-0b8c6d2e1f37")
"""Fixed: assistant ids derived from it are the same on every machine and every run."""
MANAGED = "workspace-agent"

Outcome = Literal["created", "updated", "unchanged"]


def assistant_id(graph_id: str, workspace: str, api_key: str | None = None) -> str:
    """The id of a workspace's assistant for a graph: the same for every creator with the same key.

    With authentication on, assistants are their owner's, and ids are global: the key (hashed) is part of
    the id so that two users' workspaces of the same name do not claim one id.
    """
    owner = f":{hashlib.sha256(api_key.encode()).hexdigest()[:16]}" if api_key else ""
    return str(uuid.uuid5(NAMESPACE, f"{graph_id}:{workspace}{owner}"))


def validated_context(graph_id: str, values: dict[str, Any]) -> dict[str, Any]:
    """The context as the graph will read it, checked here so a typo fails at the terminal, not per run.

    Only the fields given are kept: the rest stay unset so the server's deployment defaults (its model,
    what that model can do) apply, rather than whatever this machine's defaults happen to be.

    Raises:
        ValueError: An unknown graph, field, or a value of the wrong type or range.
    """
    if graph_id == "agent":
        from ..core.context import Context

        Context.from_mapping(values)
    elif graph_id == "memory":
        from ..graphs.memory import MemoryContext

        _construct(MemoryContext, values)
    elif graph_id == "ingest":
        from ..core.context import IngestContext

        _construct(IngestContext, values)
    else:
        raise ValueError(f"unknown graph {graph_id!r}: use one of {', '.join(GRAPHS)}")
    return values


def _construct(cls: type, values: dict[str, Any]) -> None:
    try:
        cls(**values)
    except TypeError as exc:
        raise ValueError(f"{cls.__name__}: {exc}") from None


def context_of(assistant: Assistant) -> dict[str, Any]:
    """An assistant's context (older servers keep it in ``config.configurable`` only)."""
    # The SDK types ``context`` as anything a run accepts; an assistant read back from a server is JSON.
    context = cast(dict[str, Any] | None, assistant.get("context"))
    return context or (assistant.get("config") or {}).get("configurable") or {}


def workspace_of(assistant: Assistant) -> str:
    """The workspace of an assistant this command made (found by its metadata, so it has some)."""
    metadata = assistant["metadata"]
    assert metadata is not None, "found by its metadata"
    return metadata["workspace"]


async def find(client: LangGraphClient, graph_id: str, workspace: str) -> Assistant | None:
    """The workspace's assistant for ``graph_id``, oldest first if copies were ever made by hand."""
    found = await client.assistants.search(
        graph_id=graph_id, metadata={"workspace": workspace, "managed_by": MANAGED}, limit=100
    )
    found = sorted(found, key=lambda a: str(a.get("created_at")))
    return found[0] if found else None


async def ensure(
    client: LangGraphClient, graph_id: str, workspace: str, context: dict[str, Any]
) -> tuple[Assistant, Outcome]:
    """Make the workspace's assistant exist with ``context``; safe to repeat and to race.

    Returns:
        The assistant, and whether it was created, updated (its context had changed) or left unchanged.
    """
    context = {**validated_context(graph_id, context), "workspace": workspace}
    existing = await find(client, graph_id, workspace)
    if existing is None:
        try:
            created = await client.assistants.create(
                graph_id,
                context=context,
                assistant_id=assistant_id(graph_id, workspace, client.http.client.headers.get("x-api-key")),
                if_exists="do_nothing",
                name=f"{workspace} ({graph_id})",
                metadata={"workspace": workspace, "managed_by": MANAGED},
            )
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 409:
                raise
            existing = await find(client, graph_id, workspace)
            if existing is None:  # the id is taken by an assistant this caller may not see
                raise ValueError(
                    f"the assistant id of workspace {workspace!r} is taken by another owner on this server"
                ) from None
        else:
            if context_of(created) == context:
                return created, "created"
            existing = created  # a racing creator won with other settings: converge on ours below
    for attempt in range(3):
        if context_of(existing) == context:
            return existing, "unchanged"
        try:
            return await client.assistants.update(existing["assistant_id"], context=context), "updated"
        except httpx.HTTPError:  # Aegra: two updates at once collide on the next version number (500)
            if attempt == 2:
                raise
            existing = await _reread(client, existing["assistant_id"])
    raise AssertionError("unreachable")


async def _reread(client: LangGraphClient, assistant: str) -> Assistant:
    """The assistant as stored now; after a 500, Aegra may close the pooled connection a retry would use."""
    for attempt in range(3):
        await asyncio.sleep(0.2 * (attempt + 1))
        try:
            return await client.assistants.get(assistant)
        except httpx.TransportError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def listing(client: LangGraphClient, workspace: str | None) -> list[Assistant]:
    """The assistants this command made, of one workspace or of all."""
    metadata = {"managed_by": MANAGED} | ({"workspace": workspace} if workspace else {})
    found: list[Assistant] = []
    while True:
        page = await client.assistants.search(metadata=metadata, limit=100, offset=len(found))
        found += page
        if len(page) < 100:
            return sorted(found, key=lambda a: (workspace_of(a), a["graph_id"]))


def server_options(parser: argparse.ArgumentParser) -> None:
    """``--server`` and the (unlisted) ``--api-key`` of the commands that speak to a server as a user."""
    parser.add_argument(
        "--server",
        default=os.environ.get("WORKSPACE_AGENT_SERVER", DEFAULT_SERVER),
        help=f"server URL (default: $WORKSPACE_AGENT_SERVER, else {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--api-key", default=os.environ.get("WORKSPACE_AGENT_API_KEY"), help=argparse.SUPPRESS
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``assistant create|list`` on the CLI's subcommands."""
    parser = sub.add_parser(
        "assistant", help="the workspace's assistant on a server (make serve, langgraph dev): create, list"
    )
    parser.add_argument("action", choices=["create", "list"])
    parser.add_argument("--graph", choices=GRAPHS, default="agent", help="graph of the assistant (agent)")
    parser.add_argument(
        "--server",
        default=os.environ.get("WORKSPACE_AGENT_SERVER", DEFAULT_SERVER),
        help=f"server URL (default: $WORKSPACE_AGENT_SERVER, else {DEFAULT_SERVER})",
    )
    parser.add_argument("--all", action="store_true", help="list: every workspace, not only --workspace")
    parser.set_defaults(handler=command)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The workspace settings given on the command line: ``--mode`` and ``--set FIELD=VALUE``."""
    from ..core.context import Context, IngestContext, Settings, parse_assignments
    from ..graphs.memory import MemoryContext

    schemas: dict[str, type[Settings]] = {"agent": Context, "memory": MemoryContext, "ingest": IngestContext}
    schema = schemas[args.graph]
    return ({"chat_mode": args.mode} if args.mode else {}) | parse_assignments(args.set, schema)


def command(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run ``assistant create`` or ``assistant list`` and print the outcome."""
    console = console or Console()
    client = get_client(url=args.server)

    async def work() -> int:
        if args.action == "create":
            assistant, outcome = await ensure(client, args.graph, args.workspace, _settings(args))
            console.print(
                f"{outcome}: assistant [bold]{assistant['assistant_id']}[/] for workspace "
                f"[bold]{args.workspace}[/] ({args.graph}) on {args.server}",
                highlight=False,
            )
            return 0
        for a in await listing(client, None if args.all else args.workspace):  # one line each, for scripts
            fields = [workspace_of(a), a["graph_id"], a["assistant_id"], json.dumps(context_of(a))]
            console.print("\t".join(fields), highlight=False, markup=False, soft_wrap=True)
        return 0

    try:
        return asyncio.run(work())
    except httpx.HTTPStatusError as exc:
        raise ValueError(f"{args.server} answered {exc.response.status_code}: {exc.response.text}") from None
    except httpx.TransportError as exc:
        raise ValueError(f"no server at {args.server} ({exc}); start one with `make serve`") from None
