"""``/workspaces/…``: who shares a workspace, as what, and the settings its members' runs take.

- ``GET /workspaces/shared``: the workspaces others shared with the caller, and the caller's role in each.
- ``GET /workspaces/{ref}/members``: the members (owner and managers only).
- ``PUT /workspaces/{ref}/members/{user}`` with ``{"role": "manager" | "member"}``: add or change one.
- ``DELETE /workspaces/{ref}/members/{user}``: take one out; from their next step on they see nothing more.
- ``GET|PUT /workspaces/{ref}/settings``: the settings members' runs take; a manager changes them here
  (the owner's own assistant is the owner's to change, and publishes them as it changes).

``ref`` is the caller's own workspace's slug or, for a workspace shared with them, ``owner/slug``. A caller
who may not use the workspace gets the same 404 whether or not it exists. Sharing needs API keys: with
authentication off there is one user and no one to share with.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..checkpoints.members import ROLES, Access, Members, Need, NotAllowed, Role, WorkspaceUnknown, require
from ..core.context import WORKSPACE_REF, ContextError
from .auth import api_keys
from .http_common import RouteError, assistant_for, caller, read_json, server_client
from .policy import PolicyError, check_assistant_context, shared_settings

NO_KEYS = "sharing a workspace needs API keys (WORKSPACE_AGENT_API_KEYS): without them there is one user"
#: A user name as the keys file gives it: no spaces, no ``/`` (which would read as owner/slug).
USER = r"^[A-Za-z0-9][^/\s]{0,127}$"


def _error(exc: RouteError) -> Response:
    return JSONResponse({"error": exc.message}, status_code=exc.status)


async def _access(request: Request, need: Need) -> tuple[str, Access]:
    """The caller and what they may do in the workspace the path names, or the route's refusal."""
    user = await caller(request)
    if not api_keys():
        raise RouteError(400, NO_KEYS)
    ref = str(request.path_params["ref"])
    if not WORKSPACE_REF.match(ref):
        raise RouteError(404, str(WorkspaceUnknown(ref)))
    try:
        return user, await require(user, ref, need)
    except WorkspaceUnknown as exc:
        raise RouteError(404, str(exc)) from None
    except NotAllowed as exc:
        raise RouteError(403, str(exc)) from None


def _handled(
    work: Callable[[Request], Awaitable[dict[str, Any]]],
) -> Callable[[Request], Awaitable[Response]]:
    async def route(request: Request) -> Response:
        try:
            return JSONResponse(await work(request))
        except RouteError as exc:
            return _error(exc)

    route.__doc__ = work.__doc__
    return route


async def _shared(request: Request) -> dict[str, Any]:
    """The workspaces shared with the caller."""
    user = await caller(request)
    found = await Members().shared_with(user) if api_keys() else []
    return {"workspaces": [{"workspace": f"{m.owner}/{m.workspace}", "role": m.role} for m in found]}


async def _members(request: Request) -> dict[str, Any]:
    """The workspace's owner and members."""
    _, access = await _access(request, "manage")
    listed = await Members().listing(access.owner, access.workspace)
    return {
        "workspace": access.ref,
        "owner": access.owner,
        "members": [{"user": m.member, "role": m.role, "added_by": m.added_by} for m in listed],
    }


async def _owners_settings(request: Request, slug: str) -> dict[str, Any]:
    """The owner's workspace settings, from their own assistant for it (the built-in one's: the defaults)."""
    async with server_client(request) as client:
        assistant = await assistant_for(client, slug)
    given: Any = assistant.get("context") if assistant is not None else None
    context: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    settings = shared_settings({k: v for k, v in context.items() if k != "user_id"})
    if settings is None:
        raise RouteError(422, f"the assistant of {slug!r} holds settings that are not a workspace's")
    return settings


async def _put_member(request: Request) -> dict[str, Any]:
    """Add a member, or change their role; the first one publishes the owner's settings to them."""
    user, access = await _access(request, "manage")
    member = str(request.path_params["user"])
    body = await read_json(request)
    role = body.get("role", "member")
    if role not in ROLES:
        raise RouteError(422, f"role must be one of {', '.join(ROLES)}")
    if member == access.owner:
        raise RouteError(422, f"{member} owns {access.ref}")
    if not re.match(USER, member):
        raise RouteError(422, "a member is named as their API key's user: no spaces, no '/'")
    members = Members()
    if access.role == "owner" and not await members.is_shared(access.owner, access.workspace):
        settings = await _owners_settings(request, access.workspace)
        await members.publish(access.owner, access.workspace, settings, user)
    added = await members.put(access.owner, access.workspace, member, cast(Role, role), by=user)
    return {"workspace": access.ref, "user": member, "role": role, "added": added}


async def _delete_member(request: Request) -> dict[str, Any]:
    """Take a member out of the workspace."""
    _, access = await _access(request, "manage")
    member = str(request.path_params["user"])
    if not await Members().remove(access.owner, access.workspace, member):
        raise RouteError(404, f"{member} is not a member of {access.ref}")
    return {"workspace": access.ref, "user": member, "removed": True}


async def _settings(request: Request) -> dict[str, Any]:
    """The settings the workspace's members' runs take."""
    _, access = await _access(request, "read")
    settings = await Members().settings(access.owner, access.workspace)
    return {"workspace": access.ref, "settings": settings}


async def publish_change(user: str, access: Access, given: dict[str, Any]) -> dict[str, Any]:
    """Publish a manager's (or the owner's) change of a shared workspace's settings; what is now published.

    The change is checked as an assistant's context is, since members' runs take it as their assistant's.

    Raises:
        RouteError: 422 naming what is wrong.
    """
    given = {k: v for k, v in given.items() if k not in ("user_id", "workspace")}
    try:
        check_assistant_context(given, "agent", user)
    except (PolicyError, ContextError) as exc:
        raise RouteError(422, str(exc)) from None
    members = Members()
    current = await members.settings(access.owner, access.workspace) or {}
    settings = shared_settings({**current, **given})
    if settings is None:
        raise RouteError(422, "these are not a workspace's settings")
    await members.publish(access.owner, access.workspace, settings, by=user)
    return settings


async def _put_settings(request: Request) -> dict[str, Any]:
    """A manager's (or the owner's) change of the shared settings."""
    user, access = await _access(request, "write")
    settings = await publish_change(user, access, await read_json(request))
    return {"workspace": access.ref, "settings": settings}


routes = [
    Route("/workspaces/shared", _handled(_shared), methods=["GET"]),
    Route("/workspaces/{ref:path}/members", _handled(_members), methods=["GET"]),
    Route("/workspaces/{ref:path}/members/{user}", _handled(_put_member), methods=["PUT"]),
    Route("/workspaces/{ref:path}/members/{user}", _handled(_delete_member), methods=["DELETE"]),
    Route("/workspaces/{ref:path}/settings", _handled(_settings), methods=["GET"]),
    Route("/workspaces/{ref:path}/settings", _handled(_put_settings), methods=["PUT"]),
]
