"""``sql_query`` reads and only reads: every hostile statement fails with the database's own error.

PostgreSQL: the session's embedded server, but a database of its own (``sqltest_<random>``) holding one
table owned by a login role of its own. The role owns the table, so it may write it: what stops the writes
is the read-only transaction, not a missing grant. Its rows are read back with the administrator's DSN after
every attempt. SQLite: a file in the test's folder, opened read-only.
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
from langchain_core.messages import ToolMessage
from langgraph.types import Command
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests.support.helpers import user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.sql import read_settings, sql_tools

ITEMS = [(1, "apple"), (2, "pear"), (3, "plum")]


@dataclass(frozen=True)
class SqlTestDatabase:
    admin: str  # the administrator's DSN on the test database: to set up and to read the rows back
    admin_url: str  # the same as a postgresql:// URL, for the superuser test
    reader: str  # the test role's postgresql:// URL: what SQL_CONNECTIONS names
    admin_user: str


def _url(parts: dict[str, Any], user: str, password: str, dbname: str) -> str:
    """A ``postgresql://`` URL to ``dbname`` as ``user`` on the server of ``parts`` (socket or host)."""
    query = {k: parts[k] for k in ("host", "port") if parts.get(k)}
    return f"postgresql://{quote(user)}:{quote(password)}@/{dbname}?{urlencode(query)}"


@pytest.fixture(scope="module")
def pg(database_url: str) -> Iterator[SqlTestDatabase]:
    """A database and a login role of their own, dropped at the end; the project's tables are elsewhere."""
    suffix = uuid.uuid4().hex[:10]
    dbname, role, password = f"sqltest_{suffix}", f"sqlreader_{suffix}", uuid.uuid4().hex
    parts = conninfo_to_dict(database_url)
    admin = psycopg.conninfo.make_conninfo(database_url, dbname=dbname)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password))
        )
        admin_user = conn.execute("SELECT current_user").fetchone()[0]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
        conn.cursor().executemany("INSERT INTO items VALUES (%s, %s)", ITEMS)
        conn.execute(sql.SQL("ALTER TABLE items OWNER TO {}").format(sql.Identifier(role)))
    yield SqlTestDatabase(
        admin=admin,
        admin_url=_url(parts, admin_user, parts.get("password") or "", dbname),
        reader=_url(parts, role, password, dbname),
        admin_user=admin_user,
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def rows_of(pg: SqlTestDatabase) -> list[tuple[Any, ...]]:
    """The test table as the administrator sees it."""
    with psycopg.connect(pg.admin) as conn:
        return conn.execute("SELECT * FROM items ORDER BY id").fetchall()


def tools_for(**environ: str) -> dict[str, Any]:
    """The SQL tools built from a deployment's settings, by name."""
    return {tool.name: tool for tool in sql_tools(read_settings(environ))}


async def call(tools: dict[str, Any], name: str, **args: str) -> ToolMessage:
    """Call a tool as the graph does, with a tool call, so errors come back as error tool messages."""
    return await tools[name].ainvoke({"name": name, "args": args, "id": "call-1", "type": "tool_call"})


HOSTILE = [
    ("INSERT INTO items VALUES (9, 'fig')", "[25006] cannot execute INSERT in a read-only transaction"),
    ("UPDATE items SET name = 'fig'", "[25006] cannot execute UPDATE in a read-only transaction"),
    ("DELETE FROM items", "[25006] cannot execute DELETE in a read-only transaction"),
    ("DROP TABLE items", "[25006] cannot execute DROP TABLE in a read-only transaction"),
    ("TRUNCATE items", "[25006] cannot execute TRUNCATE TABLE in a read-only transaction"),
    ("CREATE TABLE more (id int)", "[25006] cannot execute CREATE TABLE in a read-only transaction"),
    ("WITH gone AS (DELETE FROM items RETURNING *) SELECT * FROM gone", "[25006]"),
    ("SELECT 1; DROP TABLE items", "[42601] cannot insert multiple commands into a prepared statement"),
    ("BEGIN; INSERT INTO items VALUES (9, 'fig'); COMMIT", "[42601] cannot insert multiple commands"),
    ("COMMIT; DELETE FROM items", "[42601] cannot insert multiple commands"),
    (
        "SET default_transaction_read_only = off; INSERT INTO items VALUES (9, 'fig')",
        "[42601] cannot insert multiple commands",
    ),
    ("SELECT set_config('transaction_read_only', 'off', false)", "[25001] transaction read-write mode"),
    ("COPY items TO PROGRAM 'id'", "[42501] permission denied to COPY to or from an external program"),
    ("COPY items FROM PROGRAM 'id'", "[42501] permission denied to COPY to or from an external program"),
    ("COPY (SELECT 1) TO '/tmp/sql_query_copy'", "[42501] permission denied to COPY to a file"),
    ("SELECT pg_read_file('/etc/passwd')", "[42501] permission denied for function pg_read_file"),
    ("SELECT lo_import('/etc/passwd')", "[42501] permission denied for function lo_import"),
    ("SELECT lo_from_bytea(0, 'x')", "[25006] cannot execute lo_from_bytea() in a read-only transaction"),
]


@pytest.mark.parametrize(("query", "refusal"), HOSTILE, ids=[q for q, _ in HOSTILE])
async def test_a_hostile_statement_fails_with_the_database_error_and_changes_nothing(
    pg: SqlTestDatabase, query: str, refusal: str
) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}")
    result = await call(tools, "sql_query", connection="shop", query=query)
    assert result.status == "error"
    assert result.content.startswith("shop (postgresql) refused: ")
    assert refusal in result.content, result.content
    assert rows_of(pg) == ITEMS


async def test_set_role_to_the_administrator_is_refused(pg: SqlTestDatabase) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}")
    result = await call(tools, "sql_query", connection="shop", query=f'SET ROLE "{pg.admin_user}"')
    assert result.status == "error" and "refused before sending: the query holds 'set role'" in result.content
    # Built at run time no scan could read it, so what runs SQL built at run time is refused whole.
    built = f"DO $$BEGIN EXECUTE 'SET ' || chr(82) || 'OLE {pg.admin_user}'; END$$"
    result = await call(tools, "sql_query", connection="shop", query=built)
    assert result.status == "error" and "refused before sending: the query holds 'do'" in result.content


async def test_a_setting_one_call_changes_does_not_reach_the_next(pg: SqlTestDatabase) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}")
    for setting in (
        "SET default_transaction_read_only = off",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
    ):
        first = await call(tools, "sql_query", connection="shop", query=setting)
        assert first.status == "error" and "only a statement that returns rows is read" in first.content
        second = await call(
            tools, "sql_query", connection="shop", query="INSERT INTO items VALUES (9, 'fig')"
        )
        assert "[25006] cannot execute INSERT in a read-only transaction" in second.content
    assert rows_of(pg) == ITEMS


async def test_a_superuser_connection_is_not_used_at_all(pg: SqlTestDatabase, tmp_path: Path) -> None:
    # As a superuser, COPY ... TO PROGRAM runs a program inside a read-only transaction: refuse the role.
    marker = tmp_path / "ran"
    tools = tools_for(SQL_CONNECTIONS=json.dumps({"admin": pg.admin_url}))
    for query in (
        f"COPY items TO PROGRAM 'touch {marker}'",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT 1",
    ):
        result = await call(tools, "sql_query", connection="admin", query=query)
        assert result.status == "error"
        assert f'is not used: it logs in as "{pg.admin_user}", a superuser;' in result.content
    assert not marker.exists()
    assert rows_of(pg) == ITEMS


async def test_reads_tables_columns_and_rows_with_a_row_cap(pg: SqlTestDatabase) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}", SQL_MAX_ROWS="2")
    assert (await call(tools, "sql_list_connections")).content == "shop (postgresql)"
    tables = await call(tools, "sql_list_tables", connection="shop")
    assert tables.content.splitlines() == ["schema | name | type", "public | items | base table", "(1 row)"]
    described = await call(tools, "sql_describe_table", connection="shop", table="items")
    assert described.content.splitlines()[:4] == [
        "table public.items",
        "column | type | nullable | default",
        "id | integer | NO | NULL",
        "name | text | NO | NULL",
    ]
    missing = await call(tools, "sql_describe_table", connection="shop", table="public.nope")
    assert missing.status == "error" and "no table 'public.nope'" in missing.content
    rows = await call(tools, "sql_query", connection="shop", query="SELECT * FROM items ORDER BY id")
    assert rows.content.splitlines() == [
        "id | name",
        "1 | apple",
        "2 | pear",
        "(2 rows shown; more were cut at the row cap of 2: narrow the query or add a LIMIT)",
    ]


async def test_a_slow_statement_is_cancelled_by_the_server(pg: SqlTestDatabase) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}", SQL_TIMEOUT="0.3")
    result = await call(tools, "sql_query", connection="shop", query="SELECT pg_sleep(5)")
    assert result.status == "error"
    assert "[57014] canceling statement due to statement timeout" in result.content


async def test_an_unknown_connection_is_answered_with_the_names(pg: SqlTestDatabase) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}")
    result = await call(tools, "sql_query", connection="../../etc", query="SELECT 1")
    assert result.status == "error" and "the connections are: shop" in result.content


# --- SQLite ----------------------------------------------------------------------------------------------


@pytest.fixture
def lite(tmp_path: Path) -> Path:
    """A small SQLite file with the same three rows."""
    import sqlite3

    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", ITEMS)
    conn.close()
    return path


def lite_rows(path: Path) -> list[tuple[Any, ...]]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM items ORDER BY id").fetchall()
    finally:
        conn.close()


SQLITE_HOSTILE = [
    ("INSERT INTO items VALUES (9, 'fig')", "[SQLITE_READONLY] attempt to write a readonly database"),
    ("DELETE FROM items", "[SQLITE_READONLY] attempt to write a readonly database"),
    ("DROP TABLE items", "[SQLITE_READONLY] attempt to write a readonly database"),
    ("SELECT 1; DELETE FROM items", "You can only execute one statement at a time."),
    ("BEGIN; DELETE FROM items; COMMIT", "You can only execute one statement at a time."),
    ("PRAGMA journal_mode = WAL", None),
]


@pytest.mark.parametrize(("query", "refusal"), SQLITE_HOSTILE, ids=[q for q, _ in SQLITE_HOSTILE])
async def test_sqlite_writes_and_several_statements_are_refused(
    lite: Path, query: str, refusal: str | None
) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"lite=sqlite:///{lite}")
    result = await call(tools, "sql_query", connection="lite", query=query)
    if refusal:
        assert result.status == "error" and refusal in result.content, result.content
    assert lite_rows(lite) == ITEMS
    assert sorted(p.name for p in lite.parent.iterdir()) == ["shop.db"]


async def test_sqlite_cannot_write_another_file(lite: Path) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"lite=sqlite:///{lite}")
    other = lite.parent / "other.db"
    for query in (f"ATTACH DATABASE 'file:{other}?mode=rwc' AS o", f"VACUUM INTO '{other}'"):
        result = await call(tools, "sql_query", connection="lite", query=query)
        assert result.status == "error" and "too many attached databases - max 0" in result.content
    assert not other.exists()
    missing = tools_for(SQL_CONNECTIONS=f"gone=sqlite:///{lite.parent / 'gone.db'}")
    result = await call(missing, "sql_query", connection="gone", query="SELECT 1")
    assert result.status == "error" and "unable to open database file" in result.content
    assert not (lite.parent / "gone.db").exists()


async def test_sqlite_reads_with_a_row_cap_and_a_time_limit(lite: Path) -> None:
    tools = tools_for(SQL_CONNECTIONS=f"lite=sqlite:///{lite}", SQL_MAX_ROWS="1", SQL_TIMEOUT="0.3")
    tables = await call(tools, "sql_list_tables", connection="lite")
    assert tables.content.splitlines() == ["name | type", "items | table", "(1 row)"]
    described = await call(tools, "sql_describe_table", connection="lite", table="items")
    assert described.content.splitlines()[2] == "id | INTEGER | YES | NULL | 1"
    rows = await call(tools, "sql_query", connection="lite", query="SELECT name FROM items ORDER BY id")
    assert rows.content.splitlines()[:2] == ["name", "apple"] and "cut at the row cap of 1" in rows.content
    endless = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
    result = await call(tools, "sql_query", connection="lite", query=endless)
    assert result.status == "error" and "interrupted" in result.content


# --- settings --------------------------------------------------------------------------------------------


def test_not_offered_when_no_connection_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("SQL_CONNECTIONS", "SQL_CONNECTIONS_FILE"):
        monkeypatch.delenv(key, raising=False)
    assert sql_tools() == []
    monkeypatch.setenv("SQL_CONNECTIONS", "broken; also=mysql://x/y; =sqlite:///a.db")
    assert sql_tools() == []


def test_connections_come_from_the_setting_and_its_file(tmp_path: Path) -> None:
    file = tmp_path / "sql.json"
    file.write_text(json.dumps({"a": "sqlite:///a.db", "b": "postgresql://r@h/b"}))
    settings = read_settings(
        {"SQL_CONNECTIONS_FILE": str(file), "SQL_CONNECTIONS": '{"b": "sqlite:///b.db"}'}
    )
    assert {n: (c.kind, c.dsn) for n, c in settings.connections.items()} == {
        "a": ("sqlite", "sqlite:///a.db"),
        "b": ("sqlite", "sqlite:///b.db"),
    }
    assert (settings.max_rows, settings.timeout) == (100, 10.0)
    odd = read_settings({"SQL_CONNECTIONS": "x=sqlite:///x.db", "SQL_MAX_ROWS": "-1", "SQL_TIMEOUT": "soon"})
    assert (odd.max_rows, odd.timeout) == (100, 10.0)


# --- through the agent graph -----------------------------------------------------------------------------


async def test_the_agent_asks_before_a_query_and_the_rows_reach_the_model(
    pg: SqlTestDatabase, llm, saver, workspace, thread
) -> None:
    tools = sql_tools(read_settings({"SQL_CONNECTIONS": f"shop={pg.reader}"}))
    graph = build_graph(checkpointer=saver, tools=tools)
    ask = tool_reply(("sql_query", {"connection": "shop", "query": "SELECT name FROM items ORDER BY id"}))
    llm.push(ask, text_reply("apple, pear and plum"))
    context = Context(workspace=workspace)
    out = await graph.ainvoke(user_message("which items are there?"), thread, context=context)
    offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert {"sql_list_connections", "sql_list_tables", "sql_describe_table", "sql_query"} <= offered
    request = out["__interrupt__"][0].value
    assert [a["name"] for a in request["action_requests"]] == ["sql_query"]
    out = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), thread, context=context)
    assert out["stop_reason"] == "answered"
    answer = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    assert answer["tool_call_id"] == ask["tool_calls"][0]["id"]
    assert answer["content"] == "name\napple\npear\nplum\n(3 rows)"
