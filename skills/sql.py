"""``sql_query`` and its helpers: databases the agent can read, and truly only read.

AnythingLLM's SQL agent is read-only in its prompt alone; its query tool runs whatever the model writes.
Here the database itself refuses anything but reading, so no pattern match over the SQL is the defence:

- **PostgreSQL** (``postgresql://…``, psycopg 3): the first wall is the role. A connection is refused
  outright when its login role (``session_user``) is a superuser, or is a member, directly or through other
  roles and whatever the grants' ``INHERIT`` and ``SET`` options, of a superuser role or of
  ``pg_read_server_files``, ``pg_write_server_files`` or ``pg_execute_server_program``: those powers work
  inside a read-only transaction, a member takes them on with ``SET ROLE`` (in a ``DO`` body too), and a
  superuser login switched to a reader with ``options=-c role=reader`` switches back the same way.
  Every call opens its own connection with ``default_transaction_read_only=on`` and a
  ``statement_timeout`` in its startup options, runs in a ``BEGIN READ ONLY`` transaction that is never
  committed (closing the connection rolls it back), and sends the query through the extended protocol with
  no parameters, so the server refuses several statements in one call ("cannot insert multiple commands
  into a prepared statement"). A setting the query changes dies with its connection. Rows are streamed one
  at a time (libpq holds one row), every value is read as PostgreSQL's own text and cut as it is loaded,
  and reading stops at the row cap or the byte budget. A second wall, a scan of the query's text before it
  is sent, refuses statements that change the role (``SET ROLE``, ``SET SESSION AUTHORIZATION``,
  ``RESET ROLE``, ``set_config('role', …)``) or stop other sessions (``pg_terminate_backend``,
  ``pg_cancel_backend``: a reader may stop any session of its own role, another user's query), in ``DO``
  bodies and string literals too. It is only a second wall: SQL built at run time (``chr``, ``format``,
  ``EXECUTE``) gets past any scan of the text; the role check is what holds.
- **SQLite** (``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` as in SQLAlchemy): the file is
  opened with ``mode=ro`` (a missing file is an error, never created), ``PRAGMA query_only``, no attached
  databases allowed (``ATTACH`` and ``VACUUM INTO`` would otherwise write other files), one statement per
  call (the driver refuses more), and a progress handler that interrupts it at the time limit. Rows are
  fetched one at a time, their values cut and their bytes counted as they arrive.

Connections are a **deployment** setting, never a run's or a workspace's: a model or a client can only name
one of them. Settings (environment):

- ``SQL_CONNECTIONS``: ``name=DSN`` pairs separated by ``;`` (``sales=postgresql://reader:pw@db/sales;
  local=sqlite:///data/local.db``), or a JSON object ``{"name": "DSN", …}``.
- ``SQL_CONNECTIONS_FILE``: a JSON file holding such an object; names in ``SQL_CONNECTIONS`` win.
- ``SQL_MAX_ROWS`` (default 100): rows a result shows; the result says when more were cut.
- ``SQL_MAX_BYTES`` (default 1,000,000): the raw bytes of the rows a query may read; reading stops once
  they pass it and the result says so. The row cap alone counts rows, and 30 rows of 30 MB each once took
  the process from 78 MB to over 1 GB for an answer of a few kilobytes.
- ``SQL_TIMEOUT`` (default 10 seconds): the time one statement may take.

With none configured, :func:`sql_tools` returns no tools and nothing is offered. Defence in depth: connect as
a role granted ``SELECT`` on what the agent should read and nothing else (not a superuser, not a member of
one, not the owner of the project's tables): a read-only transaction stops writes, the role stops reading
what it should not (``pg_read_file``, other tables) and anything a read-only transaction does not cover
(extensions such as ``dblink`` open connections of their own).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import psycopg
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from psycopg import postgres
from psycopg.abc import Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.conninfo import conninfo_to_dict

__all__ = ["Connection", "SqlSettings", "read_settings", "sql_tools"]

log = logging.getLogger(__name__)

DEFAULT_MAX_ROWS = 100
DEFAULT_MAX_BYTES = 1_000_000
DEFAULT_TIMEOUT = 10.0
#: A cell is cut to this many characters, so one long value cannot crowd out the rest of the table.
CELL_CHARS = 200
#: A value is cut to this many characters as it is read, before any table is made: a bit more than a cell
#: shows, so a cell reads as it would from the whole value, and no value ever becomes a huge string.
LOAD_CHARS = 256
#: The raw bytes a value is decoded from at most: four per character, UTF-8's longest.
LOAD_BYTES = LOAD_CHARS * 4
#: A result is cut to about this many characters, whatever the row cap: it goes into the model's window.
RESULT_CHARS = 16_000
#: Beyond the statement's own limit, the time to connect and to give up a stuck call.
GRACE_SECONDS = 5.0

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SYSTEM_SCHEMAS = ["pg_catalog", "information_schema", "pg_toast"]
#: The roles besides superusers whose powers a read-only transaction does not hold back.
SERVER_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
#: The most telling powerful role the connection can become, if any: ``session_user``, ``current_user``,
#: the role, and ``superuser`` or ``role``. Every role the login role (and the current role) is a member of,
#: directly or through other roles, is walked in ``pg_auth_members`` whatever the grants' INHERIT and SET
#: options, with nothing left to ``pg_has_role``, whose answer depends on the privilege asked and the
#: options of each grant: a grant without SET today may be one with SET tomorrow. See :func:`_pg_check_role`.
POWERFUL_ROLE_CHECK = f"""
WITH RECURSIVE reached(oid) AS (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname IN (session_user, current_user)
  UNION
    SELECT m.roleid FROM pg_catalog.pg_auth_members m JOIN reached ON m.member = reached.oid
)
SELECT session_user, current_user, r.rolname, CASE WHEN r.rolsuper THEN 'superuser' ELSE 'role' END
FROM reached JOIN pg_catalog.pg_roles r ON r.oid = reached.oid
WHERE r.rolsuper OR r.rolname IN ({", ".join(f"'{role}'" for role in SERVER_ROLES)})
ORDER BY r.rolname = session_user DESC, r.rolsuper DESC, r.rolname
LIMIT 1
"""
#: What each powerful role could do on the database server, for the refusal a person reads.
_POWERS = {
    "superuser": "read the database server's files and run programs on it",
    "pg_read_server_files": "read any file on the database server",
    "pg_write_server_files": "write files on the database server",
    "pg_execute_server_program": "run programs on the database server",
}
#: Statements that change the role, stop other sessions or run SQL built at run time: the second wall, see
#: :func:`_role_change`.
#: ``set_config`` passes only when its first argument is a plain literal naming another setting. The
#: quantifiers are possessive, so the scan stays linear in the query's length, whatever the query.
_ROLE_CHANGE = re.compile(
    r"\b(?:set(?:\s++(?:local|session)\b)*\s++|reset\s++)(?:role|session\s++authorization)\b"
    r"|\bset_config\s*+\((?!\s*+'(?!role'|session_authorization')[\w.]++'\s*+,)"
    r"|\bpg_(?:terminate|cancel)_backend\b"
    r"|\A\s*+do\b|\bquery_to_xml\w*+\s*+\("
)
#: ``'a' || 'b'``: joined before the scan, so a statement split across literals reads whole.
_JOINED_LITERALS = re.compile(r"'\s*+\|\|\s*+'")
_LINE_COMMENT = re.compile(r"--[^\n]*+")


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
    max_bytes: int = DEFAULT_MAX_BYTES


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
        max_bytes=_number(environ, "SQL_MAX_BYTES", DEFAULT_MAX_BYTES, int),
    )


# --- results as text -------------------------------------------------------------------------------------


def cut_text(data: Buffer) -> str:
    """A raw UTF-8 value as text of at most :data:`LOAD_CHARS` characters and a "…" when it was cut.

    Only the first :data:`LOAD_BYTES` bytes are ever decoded, so a 30 MB value costs a 1 KB string. A
    character split by the cut is dropped rather than shown as a replacement mark.
    """
    whole = len(data) <= LOAD_BYTES
    text = bytes(data[:LOAD_BYTES]).decode("utf-8", "replace" if whole else "ignore")
    return text if whole and len(text) <= LOAD_CHARS else text[:LOAD_CHARS] + "…"


@dataclass
class _Reading:
    """The rows kept so far and, once reading must stop, why: the same rule for both kinds of database."""

    settings: SqlSettings
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    cut: str | None = None

    def take(self, row: tuple[Any, ...], bytes_read: int) -> bool:
        """Keep ``row`` unless the row cap is reached; False once reading should stop.

        Args:
            row: The row just read, its values already cut.
            bytes_read: The raw bytes of every value read so far, this row's included.
        """
        if len(self.rows) == self.settings.max_rows:
            cap = self.settings.max_rows
            self.cut = f"more were cut at the row cap of {cap}: narrow the query or add a LIMIT"
            return False
        self.rows.append(row)
        if bytes_read > self.settings.max_bytes:
            self.cut = (
                f"reading stopped at the byte budget of {self.settings.max_bytes} bytes: narrow the query"
                " (fewer rows, fewer or shorter columns such as left(column, 200)) or add a LIMIT"
            )
            return False
        return True


def _cell(value: Any) -> str:
    """One value on one line, cut to :data:`CELL_CHARS`."""
    text = "NULL" if value is None else str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def format_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], cut: str | None) -> str:
    """A compact ``a | b`` table that says how many rows it shows and, when reading stopped early, why.

    Args:
        columns: The column names.
        rows: The rows read.
        cut: Why reading stopped before the end of the result (see :class:`_Reading`), or None.
    """
    lines = [" | ".join(_cell(c) for c in columns)]
    size = len(lines[0])
    for row in rows:
        line = " | ".join(_cell(v) for v in row)
        if size + len(line) > RESULT_CHARS:
            cut = f"more were cut at {RESULT_CHARS} characters: narrow the query or add a LIMIT"
            break
        lines.append(line)
        size += len(line) + 1
    shown = len(lines) - 1
    if cut:
        lines.append(f"({shown} row{'' if shown == 1 else 's'} shown; {cut})")
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


class _ReadConnection(psycopg.AsyncConnection[Any]):
    """A connection that counts the raw bytes of the values its loaders read (see :class:`_CutLoader`)."""

    bytes_read = 0


class _CutLoader(Loader):
    """Every value, whatever its type, as PostgreSQL's own text cut by :func:`cut_text` as it is loaded.

    Typed loaders would build the whole value first (a 30 MB string, a list of a million numbers); this
    one decodes a few hundred bytes and counts the rest, from the ``memoryview`` libpq's row is read through.
    """

    def load(self, data: Buffer) -> str:
        """The value's text, cut; its raw size added to the connection's count."""
        if isinstance(self.connection, _ReadConnection):
            self.connection.bytes_read += len(data)
        return cut_text(data)


def _cutting_adapters() -> AdaptersMap:
    """The driver's adapters, :class:`_CutLoader` for every type it knows and those it does not (oid 0)."""
    adapters = AdaptersMap(psycopg.adapters)
    for oid in {0, *(info.oid for info in postgres.types), *(info.array_oid for info in postgres.types)}:
        adapters.register_loader(oid, _CutLoader)
    return adapters


_CUTTING_ADAPTERS = _cutting_adapters()


async def _pg_connect(connection: Connection, statement_seconds: float) -> _ReadConnection:
    """A new connection whose every transaction is read only and whose statements are time-limited.

    The startup options are appended to any the DSN sets, so they win over it. ``set_read_only`` makes
    psycopg open the transaction with ``BEGIN READ ONLY``: two layers, either one enough to refuse a write.
    The client encoding is UTF-8, the one :func:`cut_text` decodes.
    """
    ms = max(1, int(statement_seconds * 1000))
    given = conninfo_to_dict(connection.dsn).get("options") or ""
    options = (
        f"{given} -c default_transaction_read_only=on -c statement_timeout={ms}"
        f" -c idle_in_transaction_session_timeout={ms + int(GRACE_SECONDS * 1000)}"
    ).strip()
    conn = await _ReadConnection.connect(
        connection.dsn,
        context=_CUTTING_ADAPTERS,
        options=options,
        client_encoding="utf8",
        connect_timeout=max(2, int(GRACE_SECONDS)),
        application_name="workspace-agent sql_query",
    )
    await conn.set_read_only(True)
    return conn


def _powerful_role(connection: Connection, login: str, current: str, role: str, kind: str) -> ToolException:
    """Why a connection is not used, for the person who configured it, and what to connect as instead."""
    what = f'"{role}", a superuser' if kind == "superuser" else f'"{role}"'
    powers = _POWERS.get("superuser" if kind == "superuser" else role, _POWERS["superuser"])
    forbidden = f"{', '.join(SERVER_ROLES[:-1])} or {SERVER_ROLES[-1]}"
    if role == login:
        why = f"it logs in as {what}"
        if current != login:
            why += f', and switching to "{current}" after login does not hold it back: SET ROLE switches back'
    else:
        why = (
            f'its login role "{login}" is a member, directly or through other roles, of {what}, whose powers'
            " it holds or takes on with SET ROLE"
        )
    return ToolException(
        f"{connection.name} (postgresql) is not used: {why}; a query could then {powers}, even inside a"
        " read-only transaction. The deployment must connect as a role granted SELECT only: not a"
        f" superuser, and not a member of a superuser role, {forbidden}."
    )


async def _pg_check_role(conn: psycopg.AsyncConnection[Any], connection: Connection) -> None:
    """Refuse a connection that can become a role a read-only transaction does not hold back.

    A superuser, or a member of the roles that read or write server files or run programs, can still
    ``COPY … TO PROGRAM`` or ``pg_read_file`` inside ``BEGIN READ ONLY`` (``COPY TO`` only reads a table).
    ``current_user`` alone is not the question: a login role that is a member of a superuser group role
    reaches it with ``SET ROLE`` (in a ``DO`` body too), and a superuser login set to a reader by
    ``options=-c role=reader`` is a ``SET ROLE`` away from itself. So every role the login role can become
    is checked (:data:`POWERFUL_ROLE_CHECK`). Pointing a connection at such a role by mistake, say the
    project's own database as ``postgres``, must not hand the model a shell.
    """
    cursor = await conn.execute(POWERFUL_ROLE_CHECK, prepare=False)
    row = await cursor.fetchone()
    if row:
        raise _powerful_role(connection, *row)


def _without_comments(text: str) -> str:
    """``text`` with its comments made spaces, in one pass: ``/* … */`` (to the first ``*/``), ``-- …``.

    Quotes are not looked at, so a ``'--'`` in a literal hides the rest of its line here: the text is
    scanned as it is too (:func:`_role_change`).
    """
    parts, pos = [], 0
    while (start := text.find("/*", pos)) >= 0 and (end := text.find("*/", start + 2)) >= 0:
        parts += [text[pos:start], " "]
        pos = end + 2
    return _LINE_COMMENT.sub(" ", "".join(parts) + text[pos:])


def _role_change(query: str) -> str | None:
    """The words of ``query`` that change the role or stop other sessions, if any: the second wall.

    The whole text is scanned, ``DO`` bodies and string literals included, lower-cased, with double quotes
    around identifiers dropped (``SET "role"``) and literals joined (``'SET RO' || 'LE x'``), as it is and
    without its comments (``SET/**/ROLE``). The role check (:func:`_pg_check_role`) is the first wall: a
    reader that is not a member of a powerful role gains nothing by changing role. SQL built at run time
    (``chr``, ``format``) cannot be seen by a scan, so what runs such SQL is refused whole: a ``DO`` block
    and ``query_to_xml`` and its kin (a reading agent needs neither). Nested comments may still get past.
    """
    text = query.lower().replace('"', "")
    for variant in (text, _without_comments(text)):
        found = _ROLE_CHANGE.search(_JOINED_LITERALS.sub("", variant))
        if found:
            return " ".join(found.group().split())
    return None


def _refuse_role_change(connection: Connection, query: str) -> None:
    """Refuse, before it is sent, a query that would change the role or stop another session."""
    found = _role_change(query)
    if found:
        raise ToolException(
            f"{connection.name} (postgresql) refused before sending: the query holds {found!r}. A statement"
            " that changes the role (SET ROLE, SET SESSION AUTHORIZATION, RESET ROLE, set_config('role', …))"
            " or stops another session (pg_terminate_backend, pg_cancel_backend) is not run here, not even"
            " inside a DO body or a string; nor is SQL built at run time (a DO block, query_to_xml)"
        )


async def _pg_collect(
    conn: _ReadConnection, query: str, params: Sequence[Any] | None, settings: SqlSettings
) -> tuple[list[str], _Reading]:
    """Stream the rows of one statement until its end, the row cap or the byte budget.

    ``stream`` is libpq's single-row mode, so a row is in memory only while it is read, and it always uses
    the extended protocol, so a query holding several statements is refused by the server. When reading
    stops early the connection (this call's alone) is closed at once: left to itself, psycopg would cancel
    the query and read the rows already on their way, each as large as the one that stopped it.
    """
    cursor = conn.cursor()
    reading = _Reading(settings)
    conn.bytes_read = 0
    # psycopg takes text only as a literal (against values pasted into SQL), bytes as they are. Here the whole
    # statement is the model's by design, held by the role and the read-only transaction, so it goes as the
    # bytes psycopg would send: the connection's client encoding is UTF-8 (``_pg_connect``).
    statement = query.encode()
    # psycopg annotates ``stream`` as an AsyncIterator; it is an async generator, with ``aclose``
    stream_rows = cast(AsyncGenerator[tuple[Any, ...], None], cursor.stream(statement, params))
    async with aclosing(stream_rows) as stream:
        async for row in stream:
            if not reading.take(row, conn.bytes_read):
                await conn.close()
                break
    return [d.name for d in cursor.description or []], reading


async def _pg_read(
    connection: Connection, query: str, params: Sequence[Any] | None, settings: SqlSettings
) -> tuple[list[str], _Reading]:
    """Run one statement in a read-only transaction that is rolled back, on a connection checked first.

    The role is checked before the text, so a connection that must not be used says so whatever the query.
    Nothing is ever committed: closing the connection ends the transaction.
    """
    async with asyncio.timeout(settings.timeout + GRACE_SECONDS):
        try:
            conn = await _pg_connect(connection, settings.timeout)
        except psycopg.Error as exc:
            raise _refused(connection, exc) from None
        try:
            await _pg_check_role(conn, connection)
            _refuse_role_change(connection, query)
            return await _pg_collect(conn, query, params, settings)
        except psycopg.Error as exc:
            raise _refused(connection, exc) from None
        finally:
            await conn.close()


async def _pg_tables(connection: Connection, settings: SqlSettings) -> str:
    query = (
        "SELECT table_schema AS schema, table_name AS name, lower(table_type) AS type"
        " FROM information_schema.tables WHERE table_schema <> ALL(%s) ORDER BY 1, 2"
    )
    columns, reading = await _pg_read(connection, query, (_SYSTEM_SCHEMAS,), settings)
    return format_rows(columns, reading.rows, reading.cut)


async def _pg_describe(connection: Connection, table: str, settings: SqlSettings) -> str:
    schema, _, name = table.rpartition(".")
    query = (
        "SELECT table_schema AS schema, column_name AS column, data_type AS type, is_nullable AS nullable,"
        " column_default AS default FROM information_schema.columns"
        " WHERE table_name = %s AND (table_schema = %s OR (%s = '' AND table_schema <> ALL(%s)))"
        " ORDER BY table_schema, ordinal_position"
    )
    params = (name, schema, schema, _SYSTEM_SCHEMAS)
    columns, reading = await _pg_read(connection, query, params, settings)
    rows = reading.rows
    if not rows:
        raise ToolException(f"{connection.name} has no table {table!r} this connection can read")
    if len({row[0] for row in rows}) > 1:
        found = sorted({f"{row[0]}.{name}" for row in rows})
        raise ToolException(f"{table!r} is in several schemas: name one of {', '.join(found)}")
    return f"table {rows[0][0]}.{name}\n" + format_rows(columns[1:], [r[1:] for r in rows], reading.cut)


# --- SQLite ----------------------------------------------------------------------------------------------


def _sqlite_uri(connection: Connection) -> str:
    """``file:…?mode=ro`` for ``sqlite:///path`` (SQLAlchemy's form: four slashes for an absolute path)."""
    path = Path(connection.dsn.removeprefix("sqlite:///")).expanduser().resolve()
    return f"{path.as_uri()}?mode=ro"


class _SqliteCutter:
    """Cuts each value as SQLite hands it over and counts the raw bytes it held.

    Text comes through the connection's ``text_factory`` as bytes, so it is cut before any string is made;
    a blob is cut once its row is fetched (the module makes it whole first, one row at a time).
    """

    def __init__(self) -> None:
        self.bytes_read = 0

    def text(self, data: bytes) -> str:
        """A text value, cut by :func:`cut_text`."""
        self.bytes_read += len(data)
        return cut_text(data)

    def row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """The row with its blobs cut to :data:`LOAD_CHARS` bytes; their sizes, and 8 a number, counted."""
        for value in row:
            if not isinstance(value, str) and value is not None:
                self.bytes_read += len(value) if isinstance(value, bytes) else 8
        return tuple(value[:LOAD_CHARS] if isinstance(value, bytes) else value for value in row)


def _sqlite_collect(cursor: sqlite3.Cursor, cutter: _SqliteCutter, settings: SqlSettings) -> _Reading:
    """Fetch rows one at a time until the end of the result, the row cap or the byte budget."""
    reading = _Reading(settings)
    for row in cursor:
        if not reading.take(cutter.row(row), cutter.bytes_read):
            break
    return reading


def _sqlite_read_sync(
    connection: Connection, query: str, params: Sequence[Any], settings: SqlSettings
) -> tuple[list[str], _Reading]:
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
        cutter = _SqliteCutter()
        conn.text_factory = cutter.text
        cursor = conn.execute(query, params)
        reading = _sqlite_collect(cursor, cutter, settings)
        columns = [d[0] for d in cursor.description or []]
    except sqlite3.Error as exc:
        raise _refused(connection, exc) from None
    finally:
        conn.close()
    return columns, reading


async def _sqlite_read(
    connection: Connection, query: str, params: Sequence[Any], settings: SqlSettings
) -> tuple[list[str], _Reading]:
    """:func:`_sqlite_read_sync` in a thread, so a slow query never blocks the event loop."""
    return await asyncio.to_thread(_sqlite_read_sync, connection, query, params, settings)


async def _sqlite_tables(connection: Connection, settings: SqlSettings) -> str:
    query = (
        "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view')"
        " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    )
    columns, reading = await _sqlite_read(connection, query, (), settings)
    return format_rows(columns, reading.rows, reading.cut)


async def _sqlite_describe(connection: Connection, table: str, settings: SqlSettings) -> str:
    query = (
        "SELECT name AS \"column\", type, CASE \"notnull\" WHEN 1 THEN 'NO' ELSE 'YES' END AS nullable,"
        ' dflt_value AS "default", pk FROM pragma_table_info(?)'
    )
    columns, reading = await _sqlite_read(connection, query, (table,), settings)
    if not reading.rows:
        raise ToolException(f"{connection.name} has no table {table!r}")
    return f"table {table}\n" + format_rows(columns, reading.rows, reading.cut)


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
            columns, reading = await _pg_read(chosen, query, None, settings)
        else:
            columns, reading = await _sqlite_read(chosen, query, (), settings)
        return format_rows(columns, reading.rows, reading.cut)

    return [
        StructuredTool.from_function(
            coroutine=tool,
            name=tool.__name__,
            handle_tool_error=True,
            metadata={"readOnlyHint": True},  # reads only (a read-only role); approval still asks
        )
        for tool in (sql_list_connections, sql_list_tables, sql_describe_table, sql_query)
    ]
