"""Shared workspaces: who besides its owner may use a workspace, and the settings they share.

A workspace is its owner's (``core.context.document_scope``). Its owner adds members, each a ``manager``
(changes settings, documents and members) or a ``member`` (chats and reads documents). A member names the
workspace as ``owner/slug``; the documents, pins and settings are the owner's workspace's own, while
threads, notes, approvals and memories stay keyed by the member's own user.

Every path that reaches a workspace by a name a client sent asks :func:`require` first: the agent's first
step and each tool call, the uploads and ingest graphs, the server's admission of a run or a job. A name
nobody shared with the caller is refused in the same words whether or not the workspace exists, so a
refusal never tells a stranger that it does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, LiteralString, get_args

from ..core.context import Context, workspace_owner
from .db import Tables, connection

__all__ = [
    "Access",
    "Member",
    "Members",
    "NotAllowed",
    "Role",
    "WorkspaceUnknown",
    "require",
    "unknown_message",
]

#: What a member may do: a ``manager`` also changes settings, documents and members.
Role = Literal["manager", "member"]
ROLES: tuple[str, ...] = get_args(Role)
#: What an action needs: ``read`` (chat, search, list), ``write`` (documents, pins, settings), ``manage``
#: (members).
Need = Literal["read", "write", "manage"]
#: The settings only a workspace's assistant sets (approval, the tools offered, the MCP servers used): a
#: member's run holds the published ones, or asks for more approval than they give, never less.
GOVERNED = ("auto_approved", "approval_required", "tools", "mcp_servers")

SCHEMA: list[LiteralString] = [
    """CREATE TABLE IF NOT EXISTS workspace_members (
        owner TEXT NOT NULL,
        workspace TEXT NOT NULL,
        member TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('manager', 'member')),
        added_by TEXT NOT NULL,
        added_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (owner, workspace, member)
    )""",
    "CREATE INDEX IF NOT EXISTS workspace_members_by_member ON workspace_members (member)",
    """CREATE TABLE IF NOT EXISTS workspace_settings (
        owner TEXT NOT NULL,
        workspace TEXT NOT NULL,
        settings JSONB NOT NULL,
        updated_by TEXT NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (owner, workspace)
    )""",
]


def unknown_message(workspace: str) -> str:
    """The one refusal for a workspace name the caller may not use, whether or not it exists."""
    return f"no workspace {workspace!r} is yours or shared with you"


class WorkspaceUnknown(ValueError):
    """The caller is neither the workspace's owner nor a member (or it does not exist: the same to them)."""

    def __init__(self, workspace: str) -> None:
        super().__init__(unknown_message(workspace))


class NotAllowed(ValueError):
    """A member asked for what only the owner and managers may do.

    Both refusals are ``ValueError``s: a served run's error then reaches its client in words (the servers
    show the text of a few exception kinds only), as the route node's ``InvalidMessage`` does.
    """


@dataclass(frozen=True)
class Member:
    """One member of a workspace."""

    owner: str
    workspace: str
    member: str
    role: str
    added_by: str
    added_at: datetime | None = None


@dataclass(frozen=True)
class Access:
    """What a user may do in a workspace they named: whose it is, and as what (``owner`` or a role)."""

    owner: str
    workspace: str
    role: str

    @property
    def ref(self) -> str:
        """How a member names it: ``owner/slug``."""
        return f"{self.owner}/{self.workspace}"

    def allows(self, need: Need) -> bool:
        """Owners do everything; managers all but give the workspace away; members read and chat."""
        return need == "read" or self.role in ("owner", "manager")


class Members(Tables):
    """The members of every shared workspace, and the settings their runs share."""

    part = "workspace_members"
    schema = SCHEMA

    async def role(self, owner: str, workspace: str, user: str) -> str | None:
        """``user``'s role as a member of ``owner``'s workspace: ``manager``, ``member`` or ``None``."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "SELECT role FROM workspace_members WHERE owner = %s AND workspace = %s AND member = %s",
                (owner, workspace, user),
            )
            row = await cur.fetchone()
        return str(row["role"]) if row else None

    async def put(self, owner: str, workspace: str, member: str, role: Role, by: str) -> bool:
        """Add a member or change their role; ``True`` if they were not a member before."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "INSERT INTO workspace_members (owner, workspace, member, role, added_by)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (owner, workspace, member)"
                " DO UPDATE SET role = EXCLUDED.role RETURNING (xmax = 0) AS added",
                (owner, workspace, member, role, by),
            )
            row = await cur.fetchone()
        return bool(row and row["added"])

    async def remove(self, owner: str, workspace: str, member: str) -> bool:
        """Take a member out: from their next step on they see nothing more of the workspace."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "DELETE FROM workspace_members WHERE owner = %s AND workspace = %s AND member = %s",
                (owner, workspace, member),
            )
            return cur.rowcount == 1

    async def listing(self, owner: str, workspace: str) -> list[Member]:
        """The workspace's members, by name."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "SELECT owner, workspace, member, role, added_by, added_at FROM workspace_members"
                " WHERE owner = %s AND workspace = %s ORDER BY member",
                (owner, workspace),
            )
            return [Member(**row) for row in await cur.fetchall()]

    async def shared_with(self, user: str) -> list[Member]:
        """The workspaces others shared with ``user``."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "SELECT owner, workspace, member, role, added_by, added_at FROM workspace_members"
                " WHERE member = %s ORDER BY owner, workspace",
                (user,),
            )
            return [Member(**row) for row in await cur.fetchall()]

    async def settings(self, owner: str, workspace: str) -> dict[str, Any] | None:
        """The settings the workspace's members' runs take, if its owner or a manager published any."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "SELECT settings FROM workspace_settings WHERE owner = %s AND workspace = %s",
                (owner, workspace),
            )
            row = await cur.fetchone()
        return dict(row["settings"]) if row else None

    async def publish(self, owner: str, workspace: str, settings: dict[str, Any], by: str) -> None:
        """Store the settings members' runs take (the owner's assistant's, or a manager's change)."""
        async with connection(await self._url()) as conn:
            await conn.execute(
                "INSERT INTO workspace_settings (owner, workspace, settings, updated_by)"
                " VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (owner, workspace) DO UPDATE SET settings = EXCLUDED.settings,"
                " updated_by = EXCLUDED.updated_by, updated_at = now()",
                (owner, workspace, json.dumps(settings), by),
            )

    async def is_shared(self, owner: str, workspace: str) -> bool:
        """Whether the workspace has members, or settings published for them."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "SELECT EXISTS (SELECT 1 FROM workspace_members WHERE owner = %(o)s AND workspace = %(w)s)"
                " OR EXISTS (SELECT 1 FROM workspace_settings WHERE owner = %(o)s AND workspace = %(w)s)"
                " AS shared",
                {"o": owner, "w": workspace},
            )
            row = await cur.fetchone()
        return bool(row and row["shared"])


async def require(user: str, workspace: str, need: Need = "read", members: Members | None = None) -> Access:
    """What ``user`` may do in the workspace they named, or the refusal.

    A bare slug is always the user's own (their namespace holds it, empty or not); ``owner/slug`` is the
    owner's, and the database is asked only then, so a single-user install never is.

    Raises:
        WorkspaceUnknown: Not the user's and not shared with them (or no such workspace).
        NotAllowed: A member asking for a manager's action.
    """
    owner, slug = workspace_owner(user, workspace)
    role = "owner" if owner == user else await (members or Members()).role(owner, slug, user)
    if role is None:
        raise WorkspaceUnknown(workspace)
    access = Access(owner, slug, role)
    if not access.allows(need):
        what = "its members" if need == "manage" else "its documents and settings"
        raise NotAllowed(
            f"you are a member of {access.ref}: you may chat and read its documents; {what} are changed by "
            "its owner and managers"
        )
    return access


def stale_message(ref: str, name: str) -> str:
    """Why a member's run is refused: it holds a workspace setting that is not the published one."""
    return (
        f"this run's {name} is not {ref}'s: its owner or a manager changed the shared settings since they "
        "were taken (a scheduled job keeps them from when it was saved). Save the job again "
        "(workspace-agent jobs edit NAME) to take the workspace's current settings."
    )


def loosened(values: dict[str, Any], published: dict[str, Any]) -> str | None:
    """The first governed setting in ``values`` that is neither the published one nor a tighter ask.

    Tighter is what any run may ask: no tool auto-approved (``auto_approved: []``), every tool asked
    (``approval_required`` holding ``*``). Settings absent from ``values`` are not compared.
    """
    for name in GOVERNED:
        if name not in values or values[name] == published.get(name):
            continue
        given = values[name]
        if name == "auto_approved" and given == []:
            continue
        if name == "approval_required" and isinstance(given, list) and "*" in given:
            continue
        return name
    return None


async def published_settings(access: Access, members: Members | None = None) -> dict[str, Any]:
    """The settings a member's runs in the workspace take: the published ones, else the defaults."""
    found = await (members or Members()).settings(access.owner, access.workspace)
    if found is not None:
        return found
    return Context(workspace=access.workspace).model_dump(mode="json", include=set(GOVERNED))


async def check_member_run(access: Access, values: dict[str, Any]) -> None:
    """Refuse a member's run whose governed settings are looser than the workspace's published ones.

    Checked where the run starts (the graph's first step), since an engine may fire a saved run (Aegra's
    crons) with the context it was given then, and no admission between.

    Raises:
        NotAllowed: Naming the setting, and how a saved job takes the current ones.
    """
    if access.role == "owner":
        return
    if name := loosened(values, await published_settings(access)):
        raise NotAllowed(stale_message(access.ref, name))
