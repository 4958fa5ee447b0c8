"""The ``workspace-agent`` command: chat in a terminal, ask once from a script, manage what it runs on.

This module is the command line itself — arguments, the workspace context they make, and which command
runs; the conversation is ``chat``, documents ``documents``, memories ``memories``. The model, local or
hosted, is chosen once per session (``endpoint``) from the settings every other entry point reads
(``providers.chat.endpoint``); ``--demo`` chooses the scripted demo server instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..checkpoints.db import run
from ..core.context import Context, context_for, document_scope, parse_assignments
from ..core.settings import ModelSettings
from . import assistants, jobs, members
from .chat import console, err, session
from .endpoint import prepare_endpoint


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
    model = sub.add_parser("model", help="the embedded local model's server, shared by every process")
    model.add_argument("action", choices=["status", "stop"])
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
    watched = sub.add_parser("watch", help="folders a workspace follows: add, list, remove, run the watcher")
    watch_sub = watched.add_subparsers(dest="watch_action", required=True)
    watch_add = watch_sub.add_parser("add", help="follow a folder under DOCUMENT_ROOTS, and sync it now")
    watch_add.add_argument("path")
    watch_remove = watch_sub.add_parser("remove", help="stop following a folder (its documents stay)")
    watch_remove.add_argument("path")
    watch_sub.add_parser("list", help="the folders --user's workspaces follow (all unless --workspace)")
    watch_run = watch_sub.add_parser("run", help="sync every watched folder now and every WATCH_INTERVAL")
    watch_run.add_argument("--once", action="store_true", help="one pass, then exit")
    watch_run.add_argument("--interval", type=float, help="seconds between passes (WATCH_INTERVAL, 15)")
    assistants.add_parser(sub)
    jobs.add_parser(sub)
    members.add_parser(sub)
    return parser


def _watch(args: argparse.Namespace) -> int:
    from . import watching

    if args.watch_action == "add":
        return watching.add_command(args.path, args.workspace, args.user, console)
    if args.watch_action == "remove":
        return watching.remove_command(args.path, args.workspace, args.user, console)
    if args.watch_action == "list":
        workspace = args.workspace if args.workspace != "default" else None
        return watching.list_command(workspace, args.user, console)
    return watching.run_command(console, once=args.once, interval=args.interval)


def _documents(args: argparse.Namespace) -> int:
    from . import documents

    if args.command == "ingest":
        return documents.ingest_command(
            args.paths,
            args.workspace,
            console,
            chunk_size=args.chunk_size,
            chunk_overlap=args.chunk_overlap,
            user_id=args.user,
        )
    workspace = document_scope(args.user, args.workspace)  # --user's own workspace of that name
    if args.action == "list":
        return documents.list_command(workspace, console)
    if not args.names:
        err.print(f"[red]error:[/] docs {args.action} needs at least one document name")
        return 2
    if args.action == "remove":
        return documents.remove_command(args.names, workspace, console)
    return documents.pin_command(args.names, workspace, console, pinned=args.action == "pin")


def _memory(args: argparse.Namespace) -> int:
    from . import memories

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


def _context(args: argparse.Namespace, settings: ModelSettings | None = None) -> Context:
    """The workspace context of the flags; model facts (tool calling, window) default to the model's.

    Args:
        args: The parsed command line.
        settings: The session's model (``Endpoint.settings``); the environment's when not chosen yet.
    """
    values: dict[str, Any] = {"workspace": args.workspace, "user_id": args.user}
    if args.mode:
        values["chat_mode"] = args.mode
    values.update(parse_assignments(args.set))  # types are Context's to check, naming the field
    schema = Context if settings is None else context_for(settings, Context)
    return schema.from_mapping(values)


def _db(action: str) -> int:
    from ..checkpoints.embedded import database_url, stop_embedded

    if action == "url":
        print(database_url())
    else:
        console.print("stopped" if stop_embedded() else "not running")
    return 0


def _model(action: str) -> int:
    from ..providers.local.model_server import find_shared_model, stop_shared_model

    if action == "stop":
        console.print("stopped" if stop_shared_model() else "not running")
        return 0
    found = find_shared_model()
    print(
        f"{found.model_name} at {found.base_url} (pid {found.pid}, {found.n_ctx} tokens)"
        if found
        else "not running"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``workspace-agent`` command."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("LANGSMITH_TRACING", "false")
    try:
        if args.command == "mcp":
            from .mcp_view import show_mcp

            return show_mcp(args.config, console)
        if args.command == "memory":
            return _memory(args)
        if args.command in ("ingest", "docs"):
            return _documents(args)
        if args.command == "watch":
            return _watch(args)
        if args.command == "db":
            return _db(args.action)
        if args.command == "model":
            return _model(args.action)
        if args.command == "assistant":
            return assistants.command(args, console)
        if args.command == "jobs":
            return jobs.command(args, console)
        if args.command == "members":
            return members.command(args, console)
        _context(args)  # a bad flag is reported before a model is started for nothing
        endpoint = prepare_endpoint(args.demo, err)
        return run(session(args, endpoint, _context(args, endpoint.settings)))
    except (ValueError, OSError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return 1
    except Exception as exc:
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
