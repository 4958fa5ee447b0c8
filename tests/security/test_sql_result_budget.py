"""A query's result cannot fill the agent's memory: values are cut as they are read, bytes are budgeted.

Issue 40, finding 3: ``SQL_MAX_ROWS`` counted rows and values were cut only when formatted, so
``SELECT repeat('x', 30*1024*1024) FROM generate_series(1,30)`` took the process from 78 MB to 1,022 MB for
an answer of 6 KB. The tool runs once in a fresh process here, and that process's peak resident memory
(``VmHWM``) before and after the call is compared: ``ru_maxrss`` of the test process would carry every
earlier test's peak.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.security.test_sql_query import SqlTestDatabase, call, pg, tools_for  # noqa: F401 - the test database
from workspace_agent.skills.sql import read_settings

ROOT = Path(__file__).resolve().parents[2]
#: The issue's bound on the growth of the process for the 30 × 30 MB query.
GROWTH_MB = 100
BUDGET_NOTE = (
    "reading stopped at the byte budget of 1000000 bytes: narrow the query (fewer rows, fewer or shorter"
    " columns such as left(column, 200)) or add a LIMIT"
)

RUN_ONCE = """
import asyncio, json, sys
from workspace_agent.skills.sql import read_settings, sql_tools

def peak_mb():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024

settings = read_settings({"SQL_CONNECTIONS": json.dumps({"db": sys.argv[1]})})
tools = {t.name: t for t in sql_tools(settings)}
args = {"connection": "db", "query": sys.argv[2]}
call = {"name": "sql_query", "args": args, "id": "1", "type": "tool_call"}
before = peak_mb()
answer = asyncio.run(tools["sql_query"].ainvoke(call))
print(json.dumps({"before": before, "after": peak_mb(), "status": answer.status, "content": answer.content}))
"""


def run_once(dsn: str, query: str) -> dict[str, Any]:
    """``sql_query`` run once in a fresh Python process: its answer and its peak memory before and after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONCE, dsn, query], capture_output=True, text=True, timeout=100, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_thirty_rows_of_thirty_megabytes_do_not_fill_the_memory(pg: SqlTestDatabase) -> None:  # noqa: F811
    out = run_once(pg.reader, "SELECT repeat('x', 30*1024*1024) AS big FROM generate_series(1,30)")
    print(f"PostgreSQL 30 x 30 MB: peak {out['before']:.0f} MB -> {out['after']:.0f} MB")
    assert out["status"] == "success"
    assert out["after"] - out["before"] < GROWTH_MB, out
    assert out["content"].splitlines() == ["big", "x" * 199 + "…", f"(1 row shown; {BUDGET_NOTE})"]


def test_thirty_sqlite_rows_of_ten_megabytes_do_not_fill_the_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    sqlite3.connect(path).close()
    rows = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30)"
    for value in ("printf('%.*c', 10485760, 'x')", "zeroblob(10485760)"):
        out = run_once(f"sqlite:///{path}", f"{rows} SELECT i, {value} AS big FROM n")
        print(f"SQLite 30 x 10 MB of {value}: peak {out['before']:.0f} MB -> {out['after']:.0f} MB")
        assert out["status"] == "success"
        assert out["after"] - out["before"] < GROWTH_MB, out
        lines = out["content"].splitlines()
        assert lines[0] == "i | big" and lines[1].startswith("1 | ") and lines[1].endswith("…")
        assert lines[2:] == [f"(1 row shown; {BUDGET_NOTE})"]


async def test_the_byte_budget_counts_raw_bytes_and_is_a_setting(pg: SqlTestDatabase) -> None:  # noqa: F811
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}", SQL_MAX_BYTES="10")
    # "1" + "apple" is 6 bytes, "2" + "pear" 11: reading stops after the row that passes the budget.
    result = await call(tools, "sql_query", connection="shop", query="SELECT id, name FROM items ORDER BY id")
    assert result.content.splitlines() == [
        "id | name",
        "1 | apple",
        "2 | pear",
        f"(2 rows shown; {BUDGET_NOTE.replace('1000000', '10')})",
    ]
    assert read_settings({}).max_bytes == 1_000_000
    assert read_settings({"SQL_MAX_BYTES": "5000"}).max_bytes == 5000
    assert read_settings({"SQL_MAX_BYTES": "lots"}).max_bytes == 1_000_000


async def test_a_long_value_is_cut_as_read_and_shown_as_before(pg: SqlTestDatabase) -> None:  # noqa: F811
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}")
    query = (
        "SELECT repeat('é', 300) AS accents, repeat('ab', 150)::bytea AS raw,"
        " ARRAY(SELECT g FROM generate_series(1, 100000) g) AS numbers, (1, repeat('y', 5000)) AS pair,"
        " jsonb_build_object('k', repeat('z', 2000)) AS doc, true AS yes, 1.50::numeric AS price"
    )
    result = await call(tools, "sql_query", connection="shop", query=query)
    header, row, note = result.content.splitlines()
    assert header == "accents | raw | numbers | pair | doc | yes | price"
    accents, raw, numbers, pair, doc, yes, price = row.split(" | ")
    assert accents == "é" * 199 + "…"
    assert raw == "\\x" + "6162" * 49 + "6…"
    assert numbers.startswith("{1,2,3,") and numbers.endswith("…") and len(numbers) == 200
    assert pair == "(1," + "y" * 196 + "…"
    assert doc == '{"k": "' + "z" * 192 + "…"
    assert (yes, price, note) == ("t", "1.50", "(1 row)")


@pytest.mark.parametrize("query", ["SELECT repeat('ü', 100)", "SELECT convert_from('\\xe282ac', 'UTF8')"])
async def test_a_short_value_is_whole(pg: SqlTestDatabase, query: str) -> None:  # noqa: F811
    tools = tools_for(SQL_CONNECTIONS=f"shop={pg.reader}")
    result = await call(tools, "sql_query", connection="shop", query=query)
    value = result.content.splitlines()[1]
    assert "…" not in value and value in ("ü" * 100, "€")
