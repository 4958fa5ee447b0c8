"""``workspace-agent members …``: share a workspace on a server, and see what is shared with you.

Members are a server's record (``checkpoints/members.py``), changed through its ``/workspaces`` routes
(``server/members_api.py``) with the caller's own key, so the server decides who may: the owner and the
workspace's managers. A member then names the workspace as ``owner/slug`` wherever a workspace is named
(``--workspace alice/handbook``, a run's context, a job).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any
from urllib.parse import quote

import httpx
from langgraph_sdk import get_client
from rich.console import Console

from .assistants import server_options


class MembersError(ValueError):
    """The server refused, or could not be reached."""


def _path(workspace: str, *rest: str) -> str:
    return "/".join(["/workspaces", quote(workspace, safe="/"), *(quote(p, safe="") for p in rest)])


async def members_call(server: str, api_key: str | None, method: str, path: str, body: Any = None) -> Any:
    """One call of the ``/workspaces`` routes, as the key's user."""
    async with get_client(url=server, api_key=api_key) as client:
        if method == "GET":
            return await client.http.get(path)
        if method == "PUT":
            return await client.http.put(path, json=body or {})
        return await client.http.delete(path)


async def _work(args: argparse.Namespace, console: Console) -> int:
    action, key = args.members_action, args.api_key
    if action == "shared":
        found = await members_call(args.server, key, "GET", "/workspaces/shared")
        for item in found["workspaces"]:
            console.print(f"{item['workspace']}  ({item['role']})")
        if not found["workspaces"]:
            console.print("no workspace is shared with you")
        return 0
    if action == "list":
        found = await members_call(args.server, key, "GET", _path(args.workspace, "members"))
        console.print(f"{found['workspace']}: owner {found['owner']}")
        for m in found["members"]:
            console.print(f"  {m['user']}  {m['role']}  (added by {m['added_by']})")
        return 0
    if action == "add":
        done = await members_call(
            args.server, key, "PUT", _path(args.workspace, "members", args.user), {"role": args.role}
        )
        verb = "added to" if done["added"] else "is now"
        console.print(f"{done['user']} {verb} {done['workspace']} as {done['role']}")
        return 0
    await members_call(args.server, key, "DELETE", _path(args.workspace, "members", args.user))
    console.print(f"{args.user} removed from {args.workspace}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``members shared|list|add|remove``."""
    parser = sub.add_parser("members", help="share a workspace on a server: its members and their roles")
    server_options(parser)
    actions = parser.add_subparsers(dest="members_action", required=True)
    actions.add_parser("shared", help="the workspaces others shared with you (name them owner/slug)")
    actions.add_parser("list", help="a workspace's members (its owner and managers may look)").add_argument(
        "workspace", help="your workspace's slug, or owner/slug"
    )
    add = actions.add_parser("add", help="add a member, or change their role")
    remove = actions.add_parser("remove", help="take a member out: they see nothing more of it")
    for p in (add, remove):
        p.add_argument("workspace", help="your workspace's slug, or owner/slug (as its manager)")
        p.add_argument("user", help="the member, as their API key's user")
    add.add_argument(
        "--role", choices=["member", "manager"], default="member",
        help="member: chats and reads documents; manager: also changes settings, documents and members",
    )  # fmt: skip


def command(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run one ``members`` action against the server and print its outcome."""
    try:
        return asyncio.run(_work(args, console or Console()))
    except httpx.HTTPStatusError as exc:
        try:
            said = exc.response.json().get("error")
        except ValueError:
            said = None
        raise MembersError(said or f"{args.server} answered {exc.response.status_code}") from None
    except httpx.TransportError as exc:
        raise MembersError(f"no server at {args.server} ({exc}); start one with `make serve`") from None
