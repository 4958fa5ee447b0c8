"""``sql_query`` and its helpers: databases the agent can read, and truly only read.

AnythingLLM's SQL agent is read-only in its prompt alone; its query tool runs whatever the model writes.
Here the database itself refuses anything but reading, so no pattern match over the SQL is the defence:

- **PostgreSQL** (``postgresql://…``, psycopg 3): a connection whose role is a superuser or may read
  server files or run programs is refused outright (those powers work inside a read-only transaction).
  Every call opens its own connection with
  ``default_transaction_read_only=on`` and a ``statement_timeout`` in its startup options, runs in a
  ``BEGIN READ ONLY`` transaction that is never committed (closing the connection rolls it back), and sends
  the query through the extended protocol with no parameters, so the server refuses several statements in
  one call ("cannot insert multiple commands into a prepared statement"). A setting the query changes dies
  with its connection. Rows are streamed and reading stops at the row cap.
- **SQLite** (``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` as in SQLAlchemy): the file is
  opened with ``mode=ro`` (a missing file is an error, never created), ``PRAGMA query_only``, no attached
  databases allowed (``ATTACH`` and ``VACUUM INTO`` would otherwise write other files), one statement per
  call (the driver refuses more), and a progress handler that interrupts it at the time limit.

Connections are a **deployment** setting, never a run's or a workspace's: a model or a client can only name
one of them. Settings (environment):

- ``SQL_CONNECTIONS``: ``name=DSN`` pairs separated by ``;`` (``sales=postgresql://reader:pw@db/sales;
  local=sqlite:///data/local.db``), or a JSON object ``{"name": "DSN", …}``.
- ``SQL_CONNECTIONS_FILE``: a JSON file holding such an object; names in ``SQL_CONNECTIONS`` win.
- ``SQL_MAX_ROWS`` (default 100): rows a result shows; the result says when more were cut.
- ``SQL_TIMEOUT`` (default 10 seconds): the time one statement may take.

With none configured, :func:`sql_tools` returns no tools and nothing is offered. Defence in depth: connect as
a role granted ``SELECT`` on what the agent should read and nothing else (not a superuser, not the owner of
the project's tables): a read-only transaction stops writes, the role stops reading what it should not
(``pg_read_file``, other tables) and anything a read-only transaction does not cover (extensions such as
``dblink`` open connections of their own).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import psycopg
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from psycopg.conninfo import conninfo_to_dict

__all__ = ["Connection", "SqlSettings", "read_settings", "sql_tools"]

log = logging.getLogger(__name__)

DEFAULT_MAX_ROWS = 100
DEFAULT_TIMEOUT = 10.0
#: A cell is cut to this many characters, so one long value cannot crowd out the rest of the table.
CELL_CHARS = 200
#: A result is cut to about this many characters, whatever the row cap: it goes into the model's window.
RESULT_CHARS = 16_000
#: Beyond the statement's own limit, the time to connect and to give up a stuck call.
GRACE_SECONDS = 5.0

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SYSTEM_SCHEMAS = ["pg_catalog", "information_schema", "pg_toast"]
#: True for a role that can reach the server's files or programs: see :func:`_pg_check_role`.
POWERFUL_ROLE_CHECK = (
    "SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), true)"
    " OR pg_has_role('pg_read_server_files', 'MEMBER') OR pg_has_role('pg_write_server_files', 'MEMBER')"
    " OR pg_has_role('pg_execute_server_program', 'MEMBER')"
)


@dataclass(frozen=True)
class Connection:
    """One deployment-named database: its name, its kind and its DSN (never shown to the model)."""

    name: str
    kind: Literal["postgresql", "sqlite"]
    dsn: str


@dataclass(frozen=True)
class SqlSettings:
    """The deployment's SQL settings, read once when the tools are built."""

    connections: dict[str, Connection]
    max_rows: int = DEFAULT_MAX_ROWS
    timeout: float = DEFAULT_TIMEOUT


def _connection(name: str, dsn: Any) -> Connection | None:
    """Check one configured pair; a bad one is logged and left out rather than failing every turn."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        log.warning("SQL connection name %r skipped: use 1-64 letters, digits, '_', '-' or '.'", name)
        return None
    if not isinstance(dsn, str):
        log.warning("SQL connection %r skipped: its DSN must be a string", name)
        return None
    dsn = dsn.strip()
    if dsn.startswith(("postgresql://", "postgres://")):
        return Connection(name, "postgresql", dsn)
    if dsn.startswith("sqlite:///") and len(dsn) > len("sqlite:///"):
        return Connection(name, "sqlite", dsn)
    log.warning("SQL connection %r skipped: expected a postgresql:// or sqlite:/// DSN", name)
    return None


def _pairs(text: str) -> Iterable[tuple[str, Any]]:
    """The ``name=DSN`` pairs of a setting: a JSON object, or pairs separated by ``;``."""
    text = text.strip()
    if not text:
        return []
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            log.warning("SQL connections skipped: not valid JSON (%s)", exc)
            return []
        if not isinstance(value, dict):
            log.warning("SQL connections skipped: the JSON must be an object of name: DSN")
            return []
        return value.items()
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        name, sep, dsn = item.partition("=")
        if not sep:
            log.warning("SQL connection %r skipped: expected name=DSN", item[:40])
            continue
        pairs.append((name.strip(), dsn))
    return pairs


def _file_pairs(path: str) -> Iterable[tuple[str, Any]]:
    """The pairs of ``SQL_CONNECTIONS_FILE``; an unreadable file is logged and counts as empty."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        log.warning("SQL connections file %s not read: %s", path, exc)
        return []
    if not text.lstrip().startswith("{"):
        log.warning("SQL connections file %s skipped: it must hold a JSON object of name: DSN", path)
        return []
    return _pairs(text)


def _number(environ: Mapping[str, str], key: str, default: float, kind: type[int] | type[float]) -> Any:
    """A positive number setting; a bad value is logged and the default used."""
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if value <= 0:
        log.warning("%s=%r ignored: expected a positive number; using %s", key, raw, default)
        return default
    return value


def read_settings(environ: Mapping[str, str] | None = None) -> SqlSettings:
    """Read the deployment's connections and limits from the environment (see the module docstring)."""
    environ = os.environ if environ is None else environ
    found: dict[str, Connection] = {}
    file = environ.get("SQL_CONNECTIONS_FILE", "").strip()
    pairs = [*(_file_pairs(file) if file else []), *_pairs(environ.get("SQL_CONNECTIONS", ""))]
    for name, dsn in pairs:
        connection = _connection(name, dsn)
        if connection:
            found[connection.name] = connection
    return SqlSettings(
        connections=found,
        max_rows=_number(environ, "SQL_MAX_ROWS", DEFAULT_MAX_ROWS, int),
        timeout=_number(environ, "SQL_TIMEOUT", DEFAULT_TIMEOUT, float),
    )


# --- results as text -------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    """One value on one line, cut to :data:`CELL_CHARS`."""
    text = "NULL" if value is None else str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def format_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], more: bool, max_rows: int) -> str:
    """A compact ``a | b`` table that says how many rows it shows and whether more were cut.

    Args:
        columns: The column names.
        rows: At most ``max_rows`` rows.
        more: Whether the result had rows beyond these.
        max_rows: The row cap, named in the note so the model knows to narrow its query.
    """
    lines = [" | ".join(_cell(c) for c in columns)]
    size = len(lines[0])
    shown = 0
    for row in rows:
        line = " | ".join(_cell(v) for v in row)
        if size + len(line) > RESULT_CHARS:
            more = True
            break
        lines.append(line)
        size += len(line) + 1
        shown += 1
    if more:
        limit = f"the row cap of {max_rows}" if shown == max_rows else f"{RESULT_CHARS} characters"
        lines.append(f"({shown} rows shown; more were cut at {limit}: narrow the query or add a LIMIT)")
    else:
        lines.append(f"({shown} row{'' if shown == 1 else 's'})")
    return "\n".join(lines)


def _refused(connection: Connection, exc: BaseException) -> ToolException:
    """The database's own message, as the tool's error, so the model (and a person) sees why."""
    code = getattr(exc, "sqlstate", None) or getattr(exc, "sqlite_errorname", None)
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, psycopg.ProgrammingError) and not code:
        # The driver's word, not the server's (e.g. a SET, which returns no rows): say what runs here.
        message += "; only a statement that returns rows is read, each in its own rolled-back transaction"
    return ToolException(
        f"{connection.name} ({connection.kind}) refused: {f'[{code}] ' if code else ''}{message}"
    )


# --- PostgreSQL ------------------------------------------------------------------------------------------


async def _pg_connect(connection: Connection, statement_seconds: float) -> psycopg.AsyncConnection[Any]:
    """A new connection whose every transaction is read only and whose statements are time-limited.

    The startup options are appended to any the DSN sets, so they win over it. ``set_read_only`` makes
    psycopg open the transaction with ``BEGIN READ ONLY``: two layers, either one enough to refuse a write.
    """
    ms = max(1, int(statement_seconds * 1000))
    given = conninfo_to_dict(connection.dsn).get("options") or ""
    options = (
        f"{given} -c default_transaction_read_only=on -c statement_timeout={ms}"
        f" -c idle_in_transaction_session_timeout={ms + int(GRACE_SECONDS * 1000)}"
    ).strip()
    conn = await psycopg.AsyncConnection.connect(
        connection.dsn,
        options=options,
        connect_timeout=max(2, int(GRACE_SECONDS)),
        application_name="workspace-agent sql_query",
    )
    await conn.set_read_only(True)
    return conn


async def _pg_check_role(conn: psycopg.AsyncConnection[Any], connection: Connection) -> None:
    """Refuse a role that a read-only transaction does not hold back.

    A superuser, or a member of the roles that read or write server files or run programs, can still
    ``COPY … TO PROGRAM`` or ``pg_read_file`` inside ``BEGIN READ ONLY`` (``COPY TO`` only reads a table).
    Pointing a connection at such a role by mistake, say the project's own database as ``postgres``, must
    not hand the model a shell.
    """
    cursor = await conn.execute(POWERFUL_ROLE_CHECK, prepare=False)
    row = await cursor.fetchone()
    if row and row[0]:
        raise ToolException(
            f"{connection.name} (postgresql) is not used: it logs in as a superuser or a member of "
            "pg_read_server_files, pg_write_server_files or pg_execute_server_program, which a read-only "
            "transaction does not hold back; the deployment must connect as a role granted SELECT only"
        )


async def _pg_read(
    connection: Connection, query: str, params: Sequence[Any] | None, settings: SqlSettings
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """Run one statement in a read-only transaction that is rolled back; at most ``max_rows`` rows kept.

    ``stream`` always uses the extended protocol, so a query holding several statements is refused by the
    server, and reading stops at the cap instead of fetching the whole result. Nothing is ever committed:
    closing the connection ends the transaction.
    """
    async with asyncio.timeout(settings.timeout + GRACE_SECONDS):
        try:
            conn = await _pg_connect(connection, settings.timeout)
        except psycopg.Error as exc:
            raise _refused(connection, exc) from None
        try:
            await _pg_check_role(conn, connection)
            cursor = conn.cursor()
            rows: list[tuple[Any, ...]] = []
            more = False
            # psycopg annotates ``stream`` as an AsyncIterator; it is an async generator, with ``aclose``
            stream_rows = cast(AsyncGenerator[tuple[Any, ...], None], cursor.stream(query, params))
            async with aclosing(stream_rows) as stream:
                async for row in stream:
                    if len(rows) == settings.max_rows:
                        more = True
                        break
                    rows.append(row)
            columns = [d.name for d in cursor.description or []]
        except psycopg.Error as exc:
            raise _refused(connection, exc) from None
        finally:
            await conn.close()
    return columns, rows, more


async def _pg_tables(connection: Connection, settings: SqlSettings) -> str:
    query = (
        "SELECT table_schema AS schema, table_name AS name, lower(table_type) AS type"
        " FROM information_schema.tables WHERE table_schema <> ALL(%s) ORDER BY 1, 2"
    )
    columns, rows, more = await _pg_read(connection, query, (_SYSTEM_SCHEMAS,), settings)
    return format_rows(columns, rows, more, settings.max_rows)


async def _pg_describe(connection: Connection, table: str, settings: SqlSettings) -> str:
    schema, _, name = table.rpartition(".")
    query = (
        "SELECT table_schema AS schema, column_name AS column, data_type AS type, is_nullable AS nullable,"
        " column_default AS default FROM information_schema.columns"
        " WHERE table_name = %s AND (table_schema = %s OR (%s = '' AND table_schema <> ALL(%s)))"
        " ORDER BY table_schema, ordinal_position"
    )
    params = (name, schema, schema, _SYSTEM_SCHEMAS)
    columns, rows, more = await _pg_read(connection, query, params, settings)
    if not rows:
        raise ToolException(f"{connection.name} has no table {table!r} this connection can read")
    if len({row[0] for row in rows}) > 1:
        found = sorted({f"{row[0]}.{name}" for row in rows})
        raise ToolException(f"{table!r} is in several schemas: name one of {', '.join(found)}")
    return f"table {rows[0][0]}.{name}\n" + format_rows(
        columns[1:], [r[1:] for r in rows], more, settings.max_rows
    )


# --- SQLite ----------------------------------------------------------------------------------------------


def _sqlite_uri(connection: Connection) -> str:
    """``file:…?mode=ro`` for ``sqlite:///path`` (SQLAlchemy's form: four slashes for an absolute path)."""
    path = Path(connection.dsn.removeprefix("sqlite:///")).expanduser().resolve()
    return f"{path.as_uri()}?mode=ro"


def _sqlite_read_sync(
    connection: Connection, query: str, params: Sequence[Any], settings: SqlSettings
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """Run one statement on a read-only connection, interrupted at the time limit (runs in a thread)."""
    deadline = time.monotonic() + settings.timeout
    try:
        conn = sqlite3.connect(_sqlite_uri(connection), uri=True, timeout=settings.timeout)
    except sqlite3.Error as exc:
        raise _refused(connection, exc) from None
    try:
        # No other database may be attached: ATTACH 'file:x?mode=rwc' and VACUUM INTO would write files.
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.execute("PRAGMA query_only = ON")
        conn.set_progress_handler(lambda: time.monotonic() > deadline, 1000)
        cursor = conn.execute(query, params)
        fetched = cursor.fetchmany(settings.max_rows + 1)
        columns = [d[0] for d in cursor.description or []]
    except sqlite3.Error as exc:
        raise _refused(connection, exc) from None
    finally:
        conn.close()
    return columns, [tuple(r) for r in fetched[: settings.max_rows]], len(fetched) > settings.max_rows


async def _sqlite_read(
    connection: Connection, query: str, params: Sequence[Any], settings: SqlSettings
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """:func:`_sqlite_read_sync` in a thread, so a slow query never blocks the event loop."""
    return await asyncio.to_thread(_sqlite_read_sync, connection, query, params, settings)


async def _sqlite_tables(connection: Connection, settings: SqlSettings) -> str:
    query = (
        "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view')"
        " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    )
    columns, rows, more = await _sqlite_read(connection, query, (), settings)
    return format_rows(columns, rows, more, settings.max_rows)


async def _sqlite_describe(connection: Connection, table: str, settings: SqlSettings) -> str:
    query = (
        "SELECT name AS \"column\", type, CASE \"notnull\" WHEN 1 THEN 'NO' ELSE 'YES' END AS nullable,"
        ' dflt_value AS "default", pk FROM pragma_table_info(?)'
    )
    columns, rows, more = await _sqlite_read(connection, query, (table,), settings)
    if not rows:
        raise ToolException(f"{connection.name} has no table {table!r}")
    return f"table {table}\n" + format_rows(columns, rows, more, settings.max_rows)


# --- the tools -------------------------------------------------------------------------------------------


def _pick(settings: SqlSettings, name: str) -> Connection:
    """The named connection; an unknown name is answered with the names there are."""
    connection = settings.connections.get(name)
    if connection is None:
        raise ToolException(
            f"no connection named {name!r}; the connections are: {', '.join(settings.connections)}"
        )
    return connection


def sql_tools(settings: SqlSettings | None = None) -> list[BaseTool]:
    """The four SQL tools over the deployment's connections, or none when no connection is configured.

    Args:
        settings: The connections and limits; read from the environment (:func:`read_settings`) unless given.
    """
    settings = read_settings() if settings is None else settings
    if not settings.connections:
        return []

    async def sql_list_connections() -> str:
        """List the databases you can query (name and kind)."""
        return "\n".join(f"{c.name} ({c.kind})" for c in settings.connections.values())

    async def sql_list_tables(connection: str) -> str:
        """List the tables and views of a database connection."""
        chosen = _pick(settings, connection)
        if chosen.kind == "postgresql":
            return await _pg_tables(chosen, settings)
        return await _sqlite_tables(chosen, settings)

    async def sql_describe_table(connection: str, table: str) -> str:
        """Show a table's columns (name, type, nullable, default); table may be schema.table."""
        chosen = _pick(settings, connection)
        if chosen.kind == "postgresql":
            return await _pg_describe(chosen, table, settings)
        return await _sqlite_describe(chosen, table, settings)

    async def sql_query(connection: str, query: str) -> str:
        """Run one read-only SQL statement (e.g. SELECT) on a database connection; returns the rows."""
        chosen = _pick(settings, connection)
        if not query.strip():
            raise ToolException("the query is empty")
        if chosen.kind == "postgresql":
            columns, rows, more = await _pg_read(chosen, query, None, settings)
        else:
            columns, rows, more = await _sqlite_read(chosen, query, (), settings)
        return format_rows(columns, rows, more, settings.max_rows)

    return [
        StructuredTool.from_function(coroutine=tool, name=tool.__name__, handle_tool_error=True)
        for tool in (sql_list_connections, sql_list_tables, sql_describe_table, sql_query)
    ]
