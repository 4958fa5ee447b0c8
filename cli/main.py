"""The ``workspace-agent`` command: chat in a terminal, ask once from a script, inspect MCP servers.

A thin shell over the agent graph: it picks the model endpoint, opens the PostgreSQL saver, streams tokens,
and turns the graph's approval interrupt into a question at the terminal with the card's content.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from contextlib import AsyncExitStack
from typing import Any

from langgraph.types import Command
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn
from rich.prompt import Prompt
from rich.table import Table

from workspace_agent.checkpoints.db import run
from workspace_agent.graphs.context import Context, parse_assignments

console = Console()
err = Console(stderr=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workspace-agent", description="A document-grounded chat agent.")
    parser.add_argument("--workspace", default="default", help="workspace slug (default: default)")
    parser.add_argument("--user", default="default", help="user id (default: default)")
    parser.add_argument("--thread", help="thread id to continue (default: a new thread)")
    parser.add_argument("--mode", choices=["automatic", "chat", "query"], help="chat mode of the workspace")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any other context field, e.g. --set history_limit=5 (JSON values allowed)",
    )
    parser.add_argument("--demo", action="store_true", help="use the scripted demo server instead of a model")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("chat", help="hold a conversation (the default)")
    ask = sub.add_parser("ask", help="ask one question, print the answer, exit")
    ask.add_argument("question")
    ask.add_argument("--yes", action="store_true", help="approve every tool call without asking")
    ask.add_argument("--json", action="store_true", help="print the whole turn as JSON")
    mcp = sub.add_parser("mcp", help="list MCP servers, their status and tools")
    mcp.add_argument("--config", help="servers file (default: $MCP_CONFIG, else mcp_servers.json)")
    db = sub.add_parser("db", help="the embedded PostgreSQL")
    db.add_argument("action", choices=["url", "stop"])
    ingest = sub.add_parser("ingest", help="add files or folders to the workspace (txt, md, html, pdf, docx)")
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument("--chunk-size", type=int, default=1000)
    ingest.add_argument("--chunk-overlap", type=int, default=20)
    docs = sub.add_parser("docs", help="the workspace's documents: list, remove, pin, unpin")
    docs.add_argument("action", choices=["list", "remove", "pin", "unpin"])
    docs.add_argument("names", nargs="*", help="document ids, paths or titles")
    memory = sub.add_parser("memory", help="long-term memories: extract, schedule, list, edit, delete")
    memory_sub = memory.add_subparsers(dest="memory_action", required=True)
    memory_sub.add_parser("run", help="extract memories from finished chats once")
    schedule = memory_sub.add_parser(
        "schedule", help="extract every MEMORY_EXTRACTION_INTERVAL (3h) until Ctrl-C"
    )
    schedule.add_argument("--interval", help="e.g. 3h, 30m, 90 (seconds)")
    memory_sub.add_parser("list", help="the memories of --user (all workspaces unless --workspace is given)")
    edit = memory_sub.add_parser("edit", help="replace a memory's text")
    edit.add_argument("memory_id", type=int)
    edit.add_argument("content")
    delete = memory_sub.add_parser("delete", help="forget a memory")
    delete.add_argument("memory_id", type=int)
    return parser


def _documents(args: argparse.Namespace) -> int:
    from workspace_agent.cli import documents

    if args.command == "ingest":
        return documents.ingest_command(
            args.paths, args.workspace, console, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap
        )
    if args.action == "list":
        return documents.list_command(args.workspace, console)
    if not args.names:
        err.print(f"[red]error:[/] docs {args.action} needs at least one document name")
        return 2
    if args.action == "remove":
        return documents.remove_command(args.names, args.workspace, console)
    return documents.pin_command(args.names, args.workspace, console, pinned=args.action == "pin")


def _memory(args: argparse.Namespace) -> int:
    from workspace_agent.cli import memories

    given = {"workspace": args.workspace, "user_id": args.user} if args.workspace != "default" else {}
    if args.memory_action == "run":
        return memories.run_command(console, **given)
    if args.memory_action == "schedule":
        return memories.schedule_command(console, args.interval, **given)
    if args.memory_action == "list":
        return memories.list_command(console, user_id=args.user, workspace=given.get("workspace"))
    if args.memory_action == "edit":
        return memories.edit_command(console, args.memory_id, args.content)
    return memories.delete_command(console, args.memory_id)


def _context(args: argparse.Namespace, native: bool, window: int | None = None) -> Context:
    values: dict[str, Any] = {
        "workspace": args.workspace,
        "user_id": args.user,
        "native_tool_calling": native,
    }
    if window:  # the server's real window, not the model family's nominal one
        values["context_window"] = window
    if args.mode:
        values["chat_mode"] = args.mode
    values.update(parse_assignments(args.set))  # types are Context's to check, naming the field
    return Context.from_mapping(values)


def _endpoint(args: argparse.Namespace):  # noqa: ANN202 - Endpoint, imported lazily to keep --help fast
    from workspace_agent.providers.endpoint import choose_endpoint

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task("preparing the local model", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description="assembling the local model (once)")

        with err.status("starting the model…"):
            return choose_endpoint(progress, demo=args.demo)


def _ask_person(request: dict[str, Any]) -> dict[str, Any]:
    """Show each approval card and collect the person's decision for it."""
    decisions = []
    for action in request["action_requests"]:
        where = f" on MCP server [bold]{action['server']}[/]" if action.get("server") else ""
        args = json.dumps(action["args"], indent=2, ensure_ascii=False)
        body = f"[dim]{action.get('description') or ''}[/]\n\n{args}"
        console.print(
            Panel(body, title=f"Model wants to call [bold]{action['name']}[/]{where}", border_style="yellow")
        )
        choice = Prompt.ask(
            "approve / edit / reject / always",
            choices=["a", "e", "r", "always"],
            default="a",
            console=console,
        )
        decision: dict[str, Any] = {"tool_call_id": action["tool_call_id"]}
        if choice == "r":
            decision |= {"type": "reject", "message": Prompt.ask("reason", default="no", console=console)}
        elif choice == "e":
            raw = Prompt.ask("arguments as JSON", default=json.dumps(action["args"]), console=console)
            decision |= {"type": "edit", "edited_action": {"name": action["name"], "args": json.loads(raw)}}
        else:
            decision |= {"type": "approve", "always_allow": choice == "always"}
        decisions.append(decision)
    return {"decisions": decisions}


async def _turn(
    graph: Any, payload: Any, config: dict, context: Context, *, show: bool, approve: Any
) -> dict:
    """Run one turn to its end, streaming the answer and answering approval requests."""
    while True:
        interrupted = None
        async for mode, data in graph.astream(
            payload, config, context=context, stream_mode=["messages", "updates"]
        ):
            if mode == "messages" and show:
                chunk, meta = data
                if meta.get("langgraph_node") == "call_model" and isinstance(chunk.content, str):
                    console.print(chunk.content, end="", markup=False, highlight=False)
            elif mode == "updates" and "__interrupt__" in data:
                interrupted = data["__interrupt__"][0].value
        if show:
            console.print()
        if interrupted is None:
            return (await graph.aget_state(config)).values
        if interrupted.get("error"):
            err.print(f"[red]{interrupted['error']}[/]")
        payload = Command(resume=approve(interrupted))


def _show_sources(values: dict) -> None:
    for source in values.get("sources") or []:
        console.print(
            f"[dim]source: {source.get('title') or source.get('document')} "
            f"({source.get('score', 'pinned')})[/]",
            highlight=False,
        )


def _show_decisions(values: dict) -> None:
    table = Table("id", "by", "outcome", "why", title="decisions of the last turn")
    for d in values.get("decisions") or []:
        table.add_row(d["id"], d["decided_by"], json.dumps(d["outcome"], default=str)[:60], d["why"])
    console.print(table)


async def _seed(workspace: str) -> None:
    """A first chat in an empty workspace gets the sample documents, so retrieval has something to show."""
    from workspace_agent.cli.documents import seed_samples
    from workspace_agent.providers.embeddings import EmbeddingUnavailable

    try:
        await seed_samples(workspace, err)
    except EmbeddingUnavailable as exc:
        err.print(f"[dim]no sample documents: {exc}[/]")


async def _run(args: argparse.Namespace) -> int:
    from workspace_agent.checkpoints.savers import postgres_saver
    from workspace_agent.graphs.agent import build_graph

    endpoint = _endpoint(args)
    context = _context(args, endpoint.native_tool_calling, endpoint.context_window)
    config = {"configurable": {"thread_id": args.thread or uuid.uuid4().hex}}
    async with AsyncExitStack() as stack:
        with err.status("starting the database…"):
            saver = await stack.enter_async_context(postgres_saver())
        graph = build_graph(checkpointer=saver)
        if args.command == "ask":

            def approve(request: dict) -> dict:
                if args.yes:
                    return {"decisions": [{"type": "approve"} for _ in request["action_requests"]]}
                if sys.stdin.isatty():
                    return _ask_person(request)
                return {
                    "decisions": [
                        {"type": "reject", "message": "not approved: non-interactive (use --yes)"}
                        for _ in request["action_requests"]
                    ]
                }

            payload = {"messages": [{"role": "user", "content": args.question}]}
            values = await _turn(graph, payload, config, context, show=False, approve=approve)
            if args.json:
                print(
                    json.dumps(
                        {k: values.get(k) for k in ("route", "stop_reason", "sources", "decisions")}
                        | {"answer": values["messages"][-1].content},
                        default=str,
                    )
                )
            else:
                print(values["messages"][-1].content)
            return 0
        await _seed(context.workspace)
        console.print(
            Panel(
                f"model: {endpoint.label}\nworkspace: {context.workspace}  thread: "
                f"{config['configurable']['thread_id']}  mode: {context.chat_mode}\n"
                + (
                    "start a message with @agent to let the model use tools\n"
                    if not context.native_tool_calling
                    else ""
                )
                + "commands: /decisions  /exit",
                title="workspace-agent",
                border_style="cyan",
            )
        )
        values: dict = {}
        while True:
            try:
                text = Prompt.ask("[bold green]you[/]", console=console)
            except (EOFError, KeyboardInterrupt):
                return 0
            if text.strip() in ("/exit", "/quit", "exit"):
                return 0
            if text.strip() == "/decisions":
                _show_decisions(values)
                continue
            if not text.strip():
                continue
            console.print("[bold cyan]agent[/] ", end="")
            try:
                values = await _turn(
                    graph,
                    {"messages": [{"role": "user", "content": text}]},
                    config,
                    context,
                    show=True,
                    approve=_ask_person,
                )
            except Exception as exc:  # a failed turn is reported and the conversation goes on
                err.print(f"[red]error:[/] {exc}")
                continue
            _show_sources(values)
            if values.get("stop_reason") not in (None, "answered"):
                console.print(f"[dim]({values['stop_reason']})[/]")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``workspace-agent`` command."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("LANGSMITH_TRACING", "false")
    try:
        if args.command == "mcp":
            from workspace_agent.cli.mcp_view import show_mcp

            return show_mcp(args.config, console)
        if args.command == "memory":
            return _memory(args)
        if args.command in ("ingest", "docs"):
            return _documents(args)
        if args.command == "db":
            from workspace_agent.checkpoints.embedded import database_url, stop_embedded

            if args.action == "url":
                print(database_url())
            else:
                console.print("stopped" if stop_embedded() else "not running")
            return 0
        return run(_run(args))
    except (ValueError, OSError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return 1
    except Exception as exc:
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
