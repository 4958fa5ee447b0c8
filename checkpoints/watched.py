"""Watched folders: which folder each user's workspace follows, kept in the project's PostgreSQL.

A row is the deployment's record, not a client's: the command line writes it (``workspace-agent watch
add``), after checking the folder lies under ``DOCUMENT_ROOTS``, and every watcher of the database (``make
serve``'s, or one started by hand) reads it. Following a folder adds nothing to what a client may do: the
files are read by the ingest graph under the same roots, by whoever runs the watcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import LiteralString

from .db import Tables, connection

__all__ = ["WatchedFolder", "WatchedFolders"]

SCHEMA: list[LiteralString] = [
    """CREATE TABLE IF NOT EXISTS watched_folders (
        user_id TEXT NOT NULL,
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        added_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        synced_at TIMESTAMPTZ,
        PRIMARY KEY (user_id, workspace, path)
    )""",
]


@dataclass(frozen=True)
class WatchedFolder:
    """A folder a user's workspace follows; ``synced_at`` is the end of its last sync, if any."""

    user_id: str
    workspace: str
    path: str
    added_at: datetime | None = None
    synced_at: datetime | None = None


class WatchedFolders(Tables):
    """The watched folders of every user's workspaces."""

    part = "watched_folders"
    schema = SCHEMA

    async def add(self, user_id: str, workspace: str, path: str) -> bool:
        """Follow a folder; ``False`` if the workspace already follows it."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "INSERT INTO watched_folders (user_id, workspace, path) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (user_id, workspace, path),
            )
            return cur.rowcount == 1

    async def remove(self, user_id: str, workspace: str, path: str) -> bool:
        """Stop following a folder (its documents stay); ``False`` if it was not followed."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "DELETE FROM watched_folders WHERE user_id = %s AND workspace = %s AND path = %s",
                (user_id, workspace, path),
            )
            return cur.rowcount == 1

    async def list(self, user_id: str | None = None, workspace: str | None = None) -> list[WatchedFolder]:
        """The folders followed, all or one user's (and workspace's), in a stable order."""
        async with connection(await self._url()) as conn:
            cur = await conn.execute(
                "SELECT user_id, workspace, path, added_at, synced_at FROM watched_folders"
                " WHERE (%(user)s::text IS NULL OR user_id = %(user)s)"
                " AND (%(workspace)s::text IS NULL OR workspace = %(workspace)s)"
                " ORDER BY user_id, workspace, path",
                {"user": user_id, "workspace": workspace},
            )
            return [WatchedFolder(**row) for row in await cur.fetchall()]

    async def synced(self, folder: WatchedFolder) -> None:
        """Record that a folder was just brought up to date."""
        async with connection(await self._url()) as conn:
            await conn.execute(
                "UPDATE watched_folders SET synced_at = now()"
                " WHERE user_id = %s AND workspace = %s AND path = %s",
                (folder.user_id, folder.workspace, folder.path),
            )
