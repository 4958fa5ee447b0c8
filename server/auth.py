"""Who is calling and what they may touch: LangGraph custom authentication with API keys.

``langgraph.json`` names ``auth`` (below) as its ``auth.path``; ``langgraph dev`` and Aegra both load it,
and it uses ``langgraph_sdk.Auth`` only. Keys are a deployment setting: ``WORKSPACE_AGENT_API_KEYS`` as
``key1:alice,key2:bob``, and/or a file named by ``WORKSPACE_AGENT_API_KEYS_FILE`` with one ``key:user`` a
line. A client sends its key as ``x-api-key`` (what ``langgraph_sdk.get_client(api_key=...)`` does) or as
``Authorization: Bearer <key>``.

Without keys authentication is off, as a local single-user install is: every caller is ``default`` and a
run's ``user_id`` stays the context's. With keys, the user is the key's: a run's ``user_id`` is set to it,
and threads and assistants carry an ``owner`` in their metadata that every read, search, run and resume is
filtered by. The approval rules of ``server/policy.py`` hold either way: a web page open in the user's
browser reaches a local server too.

One caller is no user: the deployment's own service identity, the holder of ``WORKSPACE_AGENT_SERVICE_KEY``
(``make serve`` makes one per launch and gives it to its instances, never to a client). The memory job must
read every user's chats, and a user's run or cron is scoped to that user, so the job is scheduled as the
service. The service may run and schedule the ``memory`` graph only (its nodes keep each chat's memories
under that chat's own user) and is refused everything else: no turn, assistant, thread write or store.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID, uuid5

from langgraph_sdk import Auth

from ..checkpoints.members import (
    GOVERNED,
    Members,
    WorkspaceUnknown,
    loosened,
    published_settings,
    require,
    stale_message,
)
from ..core.context import ContextError, workspace_owner
from ..graphs.forks import STATE_WRITE_REFUSED
from .policy import (
    PolicyError,
    TooLarge,
    check_assistant_context,
    check_command,
    check_input,
    check_run_settings,
    run_parts,
    run_settings,
    shared_settings,
)

LOCAL_USER = "default"
KEYS_ENV = "WORKSPACE_AGENT_API_KEYS"
KEYS_FILE_ENV = "WORKSPACE_AGENT_API_KEYS_FILE"
SERVICE_KEY_ENV = "WORKSPACE_AGENT_SERVICE_KEY"
SERVICE = "workspace-agent:service"
SERVICE_GRAPH = "memory"
#: The head of a user's store namespace as Aegra scopes it: ``("users", <identity>, ...)``.
USERS = "users"
#: The graph's own assistant, by name or by the id both servers derive from it (uuid5 of the graph name).
SERVICE_ASSISTANTS = {SERVICE_GRAPH, str(uuid5(UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), SERVICE_GRAPH))}

auth = Auth()
Ctx = Auth.types.AuthContext
#: What a handler returns: the SDK's filter, or an ``$or`` of them (which the SDK's type leaves out).
Filter = Auth.types.FilterType | dict[str, list[Auth.types.FilterType]] | None
H = TypeVar("H", bound=Callable[..., Awaitable[Filter]])


def _handles(*actions: Callable[[Any], object]) -> Callable[[H], H]:
    """Register a handler for each of ``actions`` (``auth.on.threads.read``, ...), and return it as it is.

    The SDK's decorators type ``value`` as their action's own TypedDict, so one handler cannot be stacked
    under several of them; these handlers take the plain dict both servers send (Aegra's shapes differ).
    """

    def register(handler: H) -> H:
        for action in actions:
            action(handler)
        return handler

    return register


@cache
def _parse_keys(text: str, file: str, mtime: float) -> dict[bytes, str]:
    lines = [*text.split(","), *(Path(file).read_text().splitlines() if file else [])]
    keys: dict[bytes, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, user = line.rpartition(":")
        if not sep or not key.strip() or not user.strip():
            raise ValueError(f"{KEYS_ENV}/{KEYS_FILE_ENV}: expected key:user, got an entry without both")
        if user.strip() == SERVICE:
            raise ValueError(f"{KEYS_ENV}/{KEYS_FILE_ENV}: {SERVICE!r} is the service identity, not a user")
        keys[hashlib.sha256(key.strip().encode()).digest()] = user.strip()
    return keys


def api_keys() -> dict[bytes, str]:
    """The configured keys, by the SHA-256 of each key; empty means authentication is off."""
    file = os.environ.get(KEYS_FILE_ENV, "")
    mtime = Path(file).stat().st_mtime if file else 0.0
    return _parse_keys(os.environ.get(KEYS_ENV, ""), file, mtime)


def _header(headers: dict[Any, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        key = key.decode() if isinstance(key, bytes) else key
        if key.lower() == name:
            return value.decode() if isinstance(value, bytes) else value
    return None


@auth.authenticate
async def authenticate(headers: dict[Any, Any] | None = None) -> Auth.types.MinimalUserDict:
    """The key's user; everyone is the local user while no keys are configured."""
    keys = api_keys()
    if not keys:
        return {"identity": LOCAL_USER}
    given = _header(headers, "x-api-key")
    bearer = _header(headers, "authorization") or ""
    if not given and bearer.lower().startswith("bearer "):
        given = bearer[7:].strip()
    if given:
        digest = hashlib.sha256(given.encode()).digest()
        for known, user in keys.items():
            if hmac.compare_digest(known, digest):
                return {"identity": user}
        service = os.environ.get(SERVICE_KEY_ENV, "")
        if service and hmac.compare_digest(hashlib.sha256(service.encode()).digest(), digest):
            return {"identity": SERVICE}
    raise Auth.exceptions.HTTPException(status_code=401, detail="a valid API key is required (x-api-key)")


def _owner(ctx: Ctx) -> str | None:
    """The authenticated user when authentication is on, else ``None`` (no ownership to enforce)."""
    return ctx.user.identity if api_keys() else None


def _only(owner: str | None, *others: Auth.types.FilterType) -> Filter:
    """The owner filter, for servers that filter by our metadata; ``None`` where the server scopes itself.

    Aegra keeps each thread's and assistant's creator in its own column and scopes every request by it, so
    there the filter is not needed; and a filter returned from ``threads.create_run`` would replace the
    handler's changes to the run's context (Aegra reads overrides from a returned dict first).
    """
    if owner is None or "aegra_api" in sys.modules:
        return None
    return {"$or": [{"owner": owner}, *others]} if others else {"owner": owner}


def _is_service(ctx: Ctx) -> bool:
    """Whether the caller is the deployment's service identity (a user of the keys can never be named so)."""
    return ctx.user.identity == SERVICE and bool(api_keys())


def _service_only(value: dict[str, Any] | None, what: str) -> None:
    """Refuse the service anything but the ``memory`` graph; ``value`` names the graph (``None``: nothing)."""
    value = value or {}
    given = value.get("payload")
    payload = given if isinstance(given, dict) else {}
    if str(value.get("assistant_id") or payload.get("assistant_id")) not in SERVICE_ASSISTANTS:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"the service identity runs the {SERVICE_GRAPH} graph only, not {what}"
        )


def _refuse(exc: Exception) -> Auth.exceptions.HTTPException:
    status = 422 if isinstance(exc, ContextError) else 413 if isinstance(exc, TooLarge) else 403
    return Auth.exceptions.HTTPException(status_code=status, detail=str(exc))


def _stamp(value: dict[str, Any], owner: str) -> None:
    metadata = value.get("metadata")
    if not isinstance(metadata, dict):
        metadata = value["metadata"] = {}
    metadata["owner"] = owner


async def _shared_settings(parts: dict[str, Any], user: str | None) -> dict[str, Any] | None:
    """A run naming a workspace shared with its user: the member check, and the settings it will take.

    The settings are those its owner's assistant holds (or a manager set), as published for its members
    (``checkpoints/members.py``). A governed setting the run carries (approval, tools, MCP servers) must be
    the published one or a tighter ask: a saved job carries them, since Aegra fires a cron with the context
    it was sent; those equal to the published ones are taken out here, so the run rules (which let no run
    set them) judge only the run's own values. ``None`` when the run names no shared workspace.
    """
    context = parts.get("context")
    workspace = context.get("workspace") if isinstance(context, dict) else None
    if user is None or not isinstance(context, dict) or not isinstance(workspace, str):
        return None
    if "/" not in workspace:
        return None
    try:
        access = await require(user, workspace)
    except WorkspaceUnknown as exc:
        raise Auth.exceptions.HTTPException(status_code=404, detail=str(exc)) from None
    if access.role == "owner":
        return None
    published = await published_settings(access)
    if name := loosened(context, published):
        raise Auth.exceptions.HTTPException(status_code=403, detail=stale_message(access.ref, name))
    parts["context"] = _without_published(context, published)
    config = parts.get("config")
    if isinstance(config, dict) and isinstance(config.get("configurable"), dict):  # dev copies it there too
        parts["config"] = {**config, "configurable": _without_published(config["configurable"], published)}
    return published


def _without_published(values: dict[str, Any], published: dict[str, Any]) -> dict[str, Any]:
    """``values`` without the governed settings equal to the published ones: the workspace's own."""
    return {k: v for k, v in values.items() if k not in GOVERNED or v != published.get(k)}


def _join_shared(parts: dict[str, Any], shared: dict[str, Any] | None) -> None:
    """Write the shared workspace's settings into the run's context, under the run's own values.

    Every field is written, so nothing of the member's own assistant is merged under them.
    """
    if shared is not None:
        parts["context"] = {**shared, **(parts.get("context") or {})}


def _admit_run(parts: dict[str, Any], owner: str | None) -> None:
    """Apply the run rules to a run's (or a cron's) parts, then make the caller its user."""
    try:
        for settings in run_settings(parts):
            check_run_settings(settings, owner)
        check_command(parts.get("command"))
        check_input(parts.get("input"))
    except PolicyError as exc:
        raise _refuse(exc) from None
    if owner is not None:
        context = parts.get("context") or dict((parts.get("config") or {}).get("configurable") or {})
        parts["context"] = {**context, "user_id": owner}


@_handles(auth.on.threads.create_run)
async def on_run(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """A run or a resume: its settings may tighten approval only, and its user is the caller.

    The service's runs are of the memory graph only, and keep their context: all users, or the one named.
    """
    owner = _owner(ctx)
    if _is_service(ctx):
        _service_only(value, "this run")
    else:
        shared = await _shared_settings(run_parts(value), owner)
        _admit_run(run_parts(value), owner)
        _join_shared(run_parts(value), shared)
    if owner is None:
        return None
    _stamp(value, owner)  # a thread this run creates is the caller's
    return _only(owner)


@_handles(auth.on.threads.update)
async def on_thread_update(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """Metadata and cancelling are the owner's; a state write (only a thread id) is nobody's.

    A state written ``as_node="approve"`` would put calls in ``approved`` that no person approved.
    """
    if set(value) <= {"thread_id"}:
        raise Auth.exceptions.HTTPException(status_code=403, detail=STATE_WRITE_REFUSED)
    if _is_service(ctx):
        _service_only(None, "changing threads")
    owner = _owner(ctx)
    if owner is not None and isinstance(value.get("metadata"), dict):
        _stamp(value, owner)  # metadata may change, its owner not: no planting a thread in another's list
    return _only(owner)


@_handles(auth.on.threads.create)
async def on_thread_create(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """A new thread is its creator's."""
    owner = _owner(ctx)
    if owner is None:
        return None
    _stamp(value, owner)
    return _only(owner)


@_handles(auth.on.threads.search, auth.on.threads.delete, auth.on.threads.read)
async def on_thread_access(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """Reading (state, history, runs), deleting and searching: one's own threads only."""
    return _only(_owner(ctx))


@_handles(auth.on.assistants.update, auth.on.assistants.create)
async def on_assistant_write(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """A workspace's settings: well-typed, the owner's, and never a run's own ``also_ask``.

    Typed by the graph's own context schema on create and update alike; an update that names no graph is
    checked against every graph's (``policy.check_context_schema``). Handlers run with authentication off
    too (``langgraph.json`` always names this module), so a keyless local server checks the same.
    """
    if _is_service(ctx):
        _service_only(None, "writing assistants")
    owner = _owner(ctx)
    try:
        check_assistant_context(value.get("context"), value.get("graph_id"), owner)
        check_assistant_context((value.get("config") or {}).get("configurable"), value.get("graph_id"), owner)
    except (PolicyError, ContextError) as exc:
        raise _refuse(exc) from None
    if owner is None:
        return None
    await _publish_if_shared(value, owner)
    if ctx.action == "create" or isinstance(value.get("metadata"), dict):
        _stamp(value, owner)
    return _only(owner)


async def _publish_if_shared(value: dict[str, Any], owner: str) -> None:
    """An assistant serves its owner's own workspace; when that workspace is shared, its members follow it.

    A member names a shared workspace in a run's context, never in an assistant of theirs: an assistant's
    settings would otherwise stand in for the owner's.
    """
    context = value.get("context") or (value.get("config") or {}).get("configurable")
    if not isinstance(context, dict) or value.get("graph_id") not in (None, "agent"):
        return
    workspace = context.get("workspace")
    slug_owner, slug = workspace_owner(owner, workspace if isinstance(workspace, str) else "default")
    if slug_owner != owner:
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail="an assistant serves its owner's own workspace: a member names a shared one (owner/slug) "
            "in a run's context, and the run takes the workspace's own settings",
        )
    members = Members()
    if (settings := shared_settings(context)) is not None and await members.is_shared(owner, slug):
        await members.publish(owner, slug, settings, by=owner)


@_handles(auth.on.assistants.search, auth.on.assistants.read)
async def on_assistant_read(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """One's own assistants and the server's built-in one per graph."""
    return _only(_owner(ctx), {"created_by": "system"})


@_handles(auth.on.assistants.delete)
async def on_assistant_delete(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """An assistant is deleted by its owner only."""
    return _only(_owner(ctx))


@auth.on.store
async def on_store(ctx: Ctx, value: dict[str, Any]) -> None:
    """The server's store API: each user within their own namespace; the service has none.

    A user's namespace starts with their name, or with ``("users", name)``: Aegra buries every client's
    namespace under the latter, so what the graphs record for a user to read (a job's runs) is kept there.
    """
    if _is_service(ctx):
        _service_only(None, "the store")
    owner = _owner(ctx)
    if owner is None:
        return
    namespace = tuple(value.get("namespace") or ())
    if namespace[:1] != (owner,) and namespace[:2] != (USERS, owner):
        value["namespace"] = (owner, *namespace)


async def _admit_cron(ctx: Ctx, value: dict[str, Any], owner: str | None) -> None:
    """A user's cron runs under the run rules, as its creator.

    ``langgraph dev`` hands the handler the cron's ``payload`` and keeps its changes. Aegra hands it a copy
    of the request and stores the request's context as it came, so a cron naming no user would run as
    every user (the memory graph) or as the context's default one: there it must name its creator.
    """
    payload = value.get("payload")
    if isinstance(payload, dict):
        # an update that sends no context keeps the stored one: stamping a user here would replace it
        keeps = ctx.action != "create" and "context" not in payload and "config" not in payload
        shared = await _shared_settings(payload, owner)
        _admit_run(payload, None if keeps else owner)
        _join_shared(payload, shared)
        return
    if ctx.action != "create" and "context" not in value and "config" not in value:
        return
    checked = {**value}  # the checks only: Aegra stores the request as it came, not this copy
    await _shared_settings(checked, owner)
    _admit_run(checked, owner)
    if owner is not None and not any(s.get("user_id") == owner for s in run_settings(value)):
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=f"a scheduled run keeps the context it was created with: set its user_id to {owner!r}",
        )


@_handles(auth.on)
async def on_anything_else(ctx: Ctx, value: dict[str, Any]) -> Filter:
    """Crons and whatever else the server adds: the owner's only, and a cron runs under the run rules.

    The service may keep its own memory cron (create it, find, update and delete it), nothing else.
    """
    owner = _owner(ctx)
    if _is_service(ctx):
        if ctx.resource != "crons":
            _service_only(None, str(ctx.resource))
        if ctx.action == "create":
            _service_only(value, "this schedule")
    elif ctx.resource == "crons" and ctx.action in ("create", "update"):
        await _admit_cron(ctx, value, owner)
    elif isinstance(value.get("payload"), dict):
        _admit_run(value["payload"], owner)
    if owner is None:
        return None
    if ctx.action == "create":
        _stamp(value, owner)
    return _only(owner)
