"""``sql_query`` never runs as a role that reaches the server's files or programs, whatever the set-up.

Issue 40: the role check read ``current_user`` alone, and two ordinary set-ups reached a shell on the database
host through ``DO $$BEGIN SET ROLE admin; COPY (SELECT 1) TO PROGRAM '…'; END$$``:

(a) a login role that is no superuser but a member of a NOLOGIN superuser group role;
(b) a superuser login "dropped" to a reader with ``options=-c role=reader`` (``session_user`` stays super).

Both, and their cousins (a chain of memberships without INHERIT or SET, a member of the roles that read
files or run programs), are refused at connect. The second wall, a scan of the query's text, refuses
statements that change the role and ``pg_terminate_backend`` / ``pg_cancel_backend``, with which a reader
could stop another user's query run as the same role.

The roles are the server's (roles are not per database), named with a random suffix and dropped at the end,
with the database of their own that holds the one table they read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests.security.test_sql_query import call, tools_for

SERVER_ROLES = "pg_read_server_files, pg_write_server_files or pg_execute_server_program"
WHAT_TO_DO = (
    "even inside a read-only transaction. The deployment must connect as a role granted SELECT only: not a"
    f" superuser, and not a member of a superuser role, {SERVER_ROLES}."
)
WALL = (
    "A statement that changes the role (SET ROLE, SET SESSION AUTHORIZATION, RESET ROLE,"
    " set_config('role', …)) or stops another session (pg_terminate_backend, pg_cancel_backend) is not run"
    " here, not even inside a DO body or a string; nor is SQL built at run time (a DO block, query_to_xml)"
)


@dataclass(frozen=True)
class Roles:
    """The login roles of the set-ups, by what they are, and a way to connect as each."""

    suffix: str
    server: dict[str, Any]
    dbname: str
    admin_user: str
    admin_password: str

    def name(self, role: str) -> str:
        return f"{role}_{self.suffix}"

    def url(self, role: str, **params: str) -> str:
        """A ``postgresql://`` URL to the test database as the login role ``role`` (password ``pw``)."""
        return f"postgresql://{quote(self.name(role))}:pw@/{self.dbname}?{self.query(params)}"

    def admin_url(self, **params: str) -> str:
        """The server's superuser on the test database."""
        login = f"{quote(self.admin_user)}:{quote(self.admin_password)}"
        return f"postgresql://{login}@/{self.dbname}?{self.query(params)}"

    def query(self, params: dict[str, str]) -> str:
        """The URL's query: the server's socket or host and port, and ``params`` (%20 for a space)."""
        server = {k: self.server[k] for k in ("host", "port") if self.server.get(k)}
        return urlencode({**server, **params}, quote_via=quote)


#: The set-ups, in order; every LOGIN role's password is "pw".
SETUP = [
    "CREATE ROLE {boss} NOLOGIN SUPERUSER",
    "CREATE ROLE {alice} LOGIN PASSWORD 'pw'",
    "GRANT {boss} TO {alice}",  # (a): a member of a superuser group role
    "CREATE ROLE {mid} NOLOGIN",
    "GRANT {boss} TO {mid}",
    "CREATE ROLE {carol} LOGIN PASSWORD 'pw'",
    "GRANT {mid} TO {carol} WITH INHERIT FALSE, SET FALSE",  # a chain, neither inherited nor settable
    "CREATE ROLE {filer} LOGIN PASSWORD 'pw'",
    "GRANT pg_read_server_files TO {filer} WITH INHERIT FALSE",
    "CREATE ROLE {ops} NOLOGIN",
    "GRANT pg_execute_server_program TO {ops}",
    "CREATE ROLE {runner} LOGIN PASSWORD 'pw'",
    "GRANT {ops} TO {runner}",
    "CREATE ROLE {team} NOLOGIN",  # a harmless group: its members are readers all the same
    "CREATE ROLE {reader} LOGIN PASSWORD 'pw'",
    "GRANT {team} TO {reader}",
]
ROLES = ["boss", "alice", "mid", "carol", "filer", "ops", "runner", "team", "reader"]


@pytest.fixture(scope="module")
def roles(database_url: str) -> Iterator[Roles]:
    """The set-ups' roles and a database whose one table ``team`` may read; all dropped at the end."""
    suffix = uuid.uuid4().hex[:10]
    dbname = f"sqlroles_{suffix}"
    names = {role: sql.Identifier(f"{role}_{suffix}") for role in ROLES}
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        for statement in SETUP:
            conn.execute(sql.SQL(statement).format(**names))
        admin_user = conn.execute("SELECT current_user").fetchone()[0]
    parts = conninfo_to_dict(database_url)
    admin = psycopg.conninfo.make_conninfo(database_url, dbname=dbname)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO items VALUES (1, 'apple'), (2, 'pear')")
        conn.execute(sql.SQL("GRANT SELECT ON items TO {}").format(names["team"]))
    yield Roles(suffix, parts, dbname, admin_user, str(parts.get("password") or ""))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(dbname)))
        for role in reversed(ROLES):
            conn.execute(sql.SQL("DROP ROLE {}").format(names[role]))


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Where ``COPY … TO PROGRAM 'id > marker'`` would write, were it ever run (as the server's own user)."""
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    return folder / "ran"


def escape_attempts(become: str, marker: Path) -> list[str]:
    """What a connection that may become ``become`` would try; the first gets past the scan of the text."""
    return [
        f"DO $$BEGIN EXECUTE 'SET ' || chr(82) || 'OLE {become}'; COPY (SELECT 1) TO PROGRAM 'id > {marker}';"
        " END$$",
        f"DO $$BEGIN SET ROLE {become}; RAISE EXCEPTION '%', pg_read_file('/etc/hostname'); END$$",
        "SELECT name FROM items",
    ]


async def test_a_member_of_a_superuser_group_role_is_refused_at_connect(roles: Roles, marker: Path) -> None:
    # (a): alice is no superuser, but SET ROLE boss makes her one, in a DO body in a read-only transaction.
    tools = tools_for(SQL_CONNECTIONS=json.dumps({"shop": roles.url("alice")}))
    alice, boss = roles.name("alice"), roles.name("boss")
    for query in escape_attempts(boss, marker):
        result = await call(tools, "sql_query", connection="shop", query=query)
        assert result.status == "error"
        assert result.content == (
            f'shop (postgresql) is not used: its login role "{alice}" is a member, directly or through'
            f' other roles, of "{boss}", a superuser, whose powers it holds or takes on with SET ROLE;'
            f" a query could then read the database server's files and run programs on it, {WHAT_TO_DO}"
        )
    assert not marker.exists()


async def test_a_superuser_login_set_to_a_reader_role_is_refused_at_connect(
    roles: Roles, marker: Path
) -> None:
    # (b): options=-c role=reader makes current_user the reader; session_user stays the superuser.
    reader = roles.name("reader")
    tools = tools_for(SQL_CONNECTIONS=json.dumps({"shop": roles.admin_url(options=f"-c role={reader}")}))
    for query in escape_attempts(roles.admin_user, marker):
        result = await call(tools, "sql_query", connection="shop", query=query)
        assert result.status == "error"
        assert result.content == (
            f'shop (postgresql) is not used: it logs in as "{roles.admin_user}", a superuser, and switching'
            f' to "{reader}" after login does not hold it back: SET ROLE switches back; a query could then'
            f" read the database server's files and run programs on it, {WHAT_TO_DO}"
        )
    assert not marker.exists()


@pytest.mark.parametrize(
    ("login", "reached", "powers"),
    [
        ("carol", "boss", "read the database server's files and run programs on it"),
        ("filer", "pg_read_server_files", "read any file on the database server"),
        ("runner", "pg_execute_server_program", "run programs on the database server"),
    ],
    ids=["superuser-through-a-chain-without-inherit-or-set", "file-reader-without-inherit", "program-runner"],
)
async def test_any_membership_in_a_powerful_role_is_refused_at_connect(
    roles: Roles, login: str, reached: str, powers: str
) -> None:
    tools = tools_for(SQL_CONNECTIONS=json.dumps({"shop": roles.url(login)}))
    result = await call(tools, "sql_query", connection="shop", query="SELECT name FROM items")
    what = f'"{roles.name(reached)}", a superuser' if reached == "boss" else f'"{reached}"'
    assert result.status == "error"
    assert result.content.startswith(
        f'shop (postgresql) is not used: its login role "{roles.name(login)}" is a member, directly or'
        f" through other roles, of {what}, whose powers it holds or takes on with SET ROLE; a query could"
        f" then {powers}"
    )
    listed = await call(tools, "sql_list_tables", connection="shop")
    assert listed.status == "error" and "is not used" in listed.content


async def test_a_reader_in_a_harmless_group_role_still_reads(roles: Roles) -> None:
    tools = tools_for(SQL_CONNECTIONS=json.dumps({"shop": roles.url("reader")}))
    result = await call(tools, "sql_query", connection="shop", query="SELECT id, name FROM items ORDER BY id")
    assert result.content == "id | name\n1 | apple\n2 | pear\n(2 rows)"
    allowed = "SELECT set_config('statement_timeout', '1s', true) AS timeout"
    result = await call(tools, "sql_query", connection="shop", query=allowed)
    assert result.content == "timeout\n1s\n(1 row)"


ROLE_CHANGES = [
    ("SET ROLE {team}", "set role"),
    ("set local role {team}", "set local role"),
    ("SET SESSION ROLE {team}", "set session role"),
    ('SET "role" TO {team}', "set role"),
    ("SET /* a comment */ ROLE {team}", "set role"),
    ("SET -- a comment\n ROLE {team}", "set role"),
    ("SELECT '--', 1 FROM items, set_config('role', '{team}', true) AS s", "set_config("),
    ("SET SESSION AUTHORIZATION {team}", "set session authorization"),
    ("RESET ROLE", "reset role"),
    ("RESET SESSION AUTHORIZATION", "reset session authorization"),
    ("DO $$BEGIN SET ROLE {team}; END$$", "do"),
    ("DO $$BEGIN EXECUTE 'SET RO' || 'LE {team}'; END$$", "do"),
    ("SELECT set_config('role', '{team}', false)", "set_config("),
    ("SELECT pg_catalog.set_config('session_authorization', '{team}', false)", "set_config("),
    ("SELECT set_config('ro' || 'le', '{team}', true)", "set_config("),
    ("SELECT * FROM items, set_config(concat('ro', 'le'), '{team}', true) AS s", "set_config("),
    ("DO $$BEGIN PERFORM set_config('role', '{team}', true); END$$", "do"),
    ("/* first */ do LANGUAGE plpgsql $$BEGIN EXECUTE format('SET %s %s', 'ROLE', '{team}'); END$$", "do"),
]


@pytest.mark.parametrize(("query", "found"), ROLE_CHANGES, ids=[q for q, _ in ROLE_CHANGES])
async def test_a_statement_that_changes_the_role_is_refused_before_sending(
    roles: Roles, query: str, found: str
) -> None:
    tools = tools_for(SQL_CONNECTIONS=json.dumps({"shop": roles.url("reader")}))
    result = await call(tools, "sql_query", connection="shop", query=query.format(team=roles.name("team")))
    assert result.status == "error"
    assert result.content == f"shop (postgresql) refused before sending: the query holds {found!r}. {WALL}"


@pytest.mark.parametrize(
    "query",
    [
        "SELECT pg_terminate_backend({pid})",
        'SELECT pg_catalog."pg_terminate_backend"({pid})',
        "SELECT pg_cancel_backend({pid})",
        "DO $$BEGIN PERFORM pg_terminate_backend({pid}); END$$",
        "DO $$BEGIN EXECUTE 'SELECT pg_termin' || 'ate_backend({pid})'; END$$",
        "SELECT query_to_xml(concat('select pg_terminate', chr(95), 'backend({pid})'), true, true, '')",
    ],
)
async def test_a_reader_cannot_stop_another_session_of_its_role(roles: Roles, query: str) -> None:
    # Another user's session as the same reader role: pg_terminate_backend would end it, pg_cancel_backend
    # its query; the server allows both to a member of the session's role.
    with psycopg.connect(roles.url("reader"), autocommit=True) as other:
        pid = other.execute("SELECT pg_backend_pid()").fetchone()[0]
        tools = tools_for(SQL_CONNECTIONS=json.dumps({"shop": roles.url("reader")}))
        result = await call(tools, "sql_query", connection="shop", query=query.format(pid=pid))
        assert result.status == "error"
        assert result.content.startswith("shop (postgresql) refused before sending: the query holds '")
        assert other.execute("SELECT name FROM items ORDER BY id").fetchall() == [("apple",), ("pear",)]
