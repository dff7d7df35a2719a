"""Read-only queries while the warehouse is written (fault tolerance 4).

``dora query`` refuses every statement that could write (insert, drop, attach, copy, ...,
and ``explain analyze`` of anything but a select, which would execute it) with a clear
message; while a writer holds DuckDB's lock a query either answers or says the warehouse is
busy, and never makes the writer fail (dbt waits for a reader: ``retries`` in
``dbt_project/profiles.yml``). Real DuckDB files and locks held by real processes. The
crash / concurrency / secrets tests are in ``tests/test_fault_tolerance.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict:
    env = dict(os.environ)
    env.update(DORA_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), PYTHONPATH=str(REPO), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    return env


def _warehouse(home: Path, sql: str, params=None):
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


@pytest.fixture
def small_warehouse(dora_home):
    dora_home.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(dora_home / "warehouse.duckdb")) as con:
        con.execute("create table fct_associations as select 'child' as descriptor, 'brave' as word, 3 as tf")
    return dora_home


REFUSED = [
    ("insert into fct_associations values ('x', 'y', 1)", "INSERT"),
    ("drop table fct_associations", "DROP"),
    ("attach '{home}/other.duckdb' as other", "ATTACH"),
    ("copy fct_associations to '{home}/out.csv'", "COPY"),
    ("update fct_associations set tf = 0", "UPDATE"),
    ("delete from fct_associations", "DELETE"),
    ("create table t as select 1", "CREATE"),
    ("select 1; drop table fct_associations", "DROP"),
    ("explain analyze copy fct_associations to '{home}/out2.csv'", "EXPLAIN of a COPY"),
    ("set threads = 1", "SET"),
    ("install httpfs", "LOAD"),
    ("export database '{home}/export'", "EXPORT"),
]


@pytest.mark.slow
@pytest.mark.parametrize("sql,kind", REFUSED, ids=[k for _, k in REFUSED])
def test_dora_query_refuses_statements_that_write(small_warehouse, capsys, sql, kind):
    from orchestration.cli import main

    home = small_warehouse
    before = sorted(p.name for p in home.iterdir())
    code = main(["query", sql.format(home=home)])
    err = capsys.readouterr().err
    assert code == 2
    assert "read-only" in err and f"refusing a {kind} statement" in err
    assert _warehouse(home, "select count(*), sum(tf) from fct_associations") == [(1, 3)]
    assert sorted(p.name for p in home.iterdir() if p.name != "dagster") == [b for b in before if b != "dagster"]


# A COPY ... TO nested inside a reading statement: DuckDB parses each of these as a SELECT (or an
# EXPLAIN of one), so refusing by statement type alone let them write, including over a landed
# shard in the landing zone (the one folder a read-only connection may read).
NESTED_WRITES = [
    ("cte", "with x as (copy (select 1 as a) to '{target}') select * from x"),
    ("scalar_subquery", "select (with x as (copy (select 1 as a) to '{target}') select * from x)"),
    ("cte_in_cte", "with y as (with x as (copy (select 1 as a) to '{target}') select * from x) select * from y"),
    ("union", "select 1 union all (with x as (copy (select 1 as a) to '{target}') select * from x)"),
    ("explain", "explain with x as (copy (select 1 as a) to '{target}') select * from x"),
    ("explain_analyze", "explain analyze with x as (copy (select 1 as a) to '{target}') select * from x"),
    ("summarize", "summarize (with x as (copy (select 1 as a) to '{target}') select * from x)"),
    ("describe", "describe (with x as (copy (select 1 as a) to '{target}') select * from x)"),
]


@pytest.mark.parametrize("name,sql", NESTED_WRITES, ids=[n for n, _ in NESTED_WRITES])
@pytest.mark.parametrize("where", ["new_file", "landed_shard"])
def test_dora_query_refuses_a_write_nested_in_a_read(small_warehouse, capsys, name, sql, where):
    from orchestration.cli import main

    home = small_warehouse
    shard_dir = home / "landing" / "t2t_completions"
    shard_dir.mkdir(parents=True)
    shard = shard_dir / "a1-0001.parquet"
    with duckdb.connect() as con:  # a real landed shard: 3 rows
        con.execute(f"copy (select range as i from range(3)) to '{shard}' (format parquet)")
    before = shard.read_bytes()
    target = shard if where == "landed_shard" else shard_dir / "forged.parquet"
    code = main(["query", sql.format(target=target)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "read-only" in err and "COPY" in err
    assert shard.read_bytes() == before  # the landed shard is untouched
    assert sorted(p.name for p in shard_dir.iterdir()) == ["a1-0001.parquet"]  # nothing forged beside it
    assert _warehouse(home, "select count(*) from fct_associations") == [(1,)]


@pytest.mark.slow
def test_dora_query_reads(small_warehouse, capsys):
    from orchestration.cli import main

    assert main(["query", "select descriptor, word, tf from fct_associations", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"descriptor": "child", "word": "brave", "tf": 3}]
    # reads of every shape still run: CTEs, recursion, set operations, subqueries, DESCRIBE, SUMMARIZE
    for sql in (
        "with r as (select 1 as n) select * from r",
        "select * from fct_associations union all select 'a', 'b', 2",
        "with recursive r as (select 1 n union all select n + 1 from r where n < 3) select count(*) from r",
        "select (select max(tf) from fct_associations)",
        "describe fct_associations",
        "summarize fct_associations",
        "explain select * from fct_associations",
    ):
        assert main(["query", sql]) == 0, sql
    capsys.readouterr()


PIVOTS = [  # DuckDB's PIVOT spellings; those without an IN list parse as a MULTI statement (a temporary ENUM, then SELECT)
    "pivot fct_associations on word using sum(tf) group by descriptor order by descriptor",
    "pivot_wider fct_associations on word using sum(tf) group by descriptor order by descriptor",
    "pivot fct_associations on word in ('brave', 'kind') using sum(tf) group by descriptor order by descriptor",
    "select * from fct_associations pivot (sum(tf) for word in ('brave', 'kind') group by descriptor) order by descriptor",
    "with p as (pivot fct_associations on word using sum(tf) group by descriptor) select * from p order by descriptor",
]


@pytest.mark.parametrize("sql", PIVOTS)
def test_dora_query_runs_a_read_only_pivot(dora_home, capsys, sql):
    """A PIVOT only reads: ``dora query`` runs it in every spelling (a MULTI statement when no
    IN list names the values, analytics/query.py); the pivoted sums are the table's."""
    from orchestration.cli import main

    dora_home.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(dora_home / "warehouse.duckdb")) as con:
        con.execute(
            "create table fct_associations as select * from (values ('child', 'brave', 3), ('child', 'kind', 1), "
            "('child', 'brave', 2), ('elder', 'kind', 4)) v(descriptor, word, tf)"
        )
    assert main(["query", "-f", "csv", sql]) == 0
    assert capsys.readouterr().out.split() == ["descriptor,brave,kind", "child,5,1", "elder,,4"]


# Holds the warehouse's write lock from "locked" until told to finish on stdin: the readers below
# meet a writer however slowly they start (a writer that wrote for a fixed 4 s could be done
# before a loaded machine got to them)
_WRITER = """
import duckdb, sys
con = duckdb.connect(sys.argv[1])
con.execute("create table if not exists audit_rows (i integer)")
for i in range(20):
    con.execute("insert into audit_rows values (?)", [i])
print("locked", flush=True)
sys.stdin.readline()
for i in range(20, 40):
    con.execute("insert into audit_rows values (?)", [i])
con.close()
print("done", flush=True)
"""


@pytest.mark.slow
def test_query_while_a_writer_holds_the_lock_says_busy_and_the_writer_succeeds(small_warehouse, capsys, monkeypatch):
    from analytics.query import WarehouseBusyError, connect_read_only, execute_query
    from orchestration.cli import main

    path = small_warehouse / "warehouse.duckdb"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "locked"
        with pytest.raises(WarehouseBusyError, match="is busy: another process .* is writing it"):
            execute_query("select count(*) from fct_associations", wait_seconds=0.5)
        monkeypatch.setenv("DORA_WAREHOUSE_WAIT_SECONDS", "0.3")  # an in-run reader's wait (default 300 in audits)
        start = time.monotonic()
        with pytest.raises(WarehouseBusyError):
            connect_read_only()
        # it waited its 0.3 s, and then gave up: far sooner than the 10 s without the variable
        # (the upper bound leaves room for a loaded machine)
        assert 0.3 <= time.monotonic() - start < 9
        writer.stdin.write("finish\n")
        writer.stdin.flush()
        # the CLI waits up to 10 s: it either answers (the writer finished) or says it is busy
        code = main(["query", "select count(*) as n from fct_associations", "--format", "csv"])
        captured = capsys.readouterr()
        assert (code == 0 and captured.out.split() == ["n", "1"]) or (code == 2 and "busy" in captured.err)
    finally:
        rest, _ = writer.communicate(input="finish\n", timeout=600)  # a second "finish" is never read
    assert writer.returncode == 0 and rest.strip() == "done"
    assert _warehouse(small_warehouse, "select count(*) from audit_rows") == [(40,)]


_READER = """
import sys, time
from analytics.query import connect_read_only
con = connect_read_only()
con.execute("select count(*) from fct_associations").fetchall()
print("reading", flush=True)
time.sleep(float(sys.argv[1]))
con.close()
"""


@pytest.mark.slow
def test_dbt_build_waits_for_a_reader_instead_of_failing(dora_home, tmp_path):
    """A ``dora query`` reader holds DuckDB's shared lock; dbt (the writer) retries and succeeds."""
    from analytics.dbt_runner import invoke_dbt

    invoke_dbt(["build", "--select", "stg_audits", "--quiet"], dora_home)
    with duckdb.connect(str(dora_home / "warehouse.duckdb")) as con:
        con.execute("create table fct_associations as select 1 as x")
    reader = subprocess.Popen([sys.executable, "-c", _READER, "3"], env=_env(dora_home), stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert reader.stdout.readline().strip() == "reading"
        start = time.monotonic()
        invoke_dbt(["build", "--select", "stg_audits", "--quiet"], dora_home)  # raises if dbt fails
        waited = time.monotonic() - start
    finally:
        reader.communicate(timeout=600)
    assert reader.returncode == 0
    assert waited >= 1.0  # it did wait for the reader's lock
