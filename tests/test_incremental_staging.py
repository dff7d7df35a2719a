"""Staging incremental on the landing shards (dbt_project/macros/landing_shards.sql).

One landing zone goes through three incremental builds; after each, the staging table and
the association mart must equal a from-scratch build of the same landing zone (what
``--full-refresh`` computes), and the incremental build must have read only the new shards:
an already staged shard rewritten in place (which dora never does: shards are immutable) is
not re-read, while a fresh build sees it.

    build 1  audits 1 and 2 land
    build 2  audit 3 lands, a later retry of some audit-2 keys lands in a new shard
    build 3  audit 1's shards archived (moved away): staging restages from the listing;
             the marts keep audit 1 (history), as before builds were incremental
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from analytics.dbt_runner import invoke_dbt
from ingestion.landing import write_shard
from tests.helpers.dbt_jinja import broken_rules
from tests.helpers.landing_rows import T0, random_rows

RUN = ["run", "--select", "+fct_associations"]
STAGED = "select * exclude (_landing_shard, _dbt_built_at), replace(_landing_shard, ?, '') as shard from stg_t2t_completions order by all"
MART = "select audit_id, modality, setting, descriptor, word, tf, df, tfidf, fisher_p, fisher_q from fct_associations order by all"


def rows_of(home: Path, sql: str, *params) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def fresh_build(landing: Path, tmp: Path) -> Path:
    """A from-scratch build (no warehouse yet) of a copy of ``landing``."""
    home = tmp / "fresh"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(landing, home / "landing")
    invoke_dbt(RUN, home)
    return home


def audit(audit_id, seed, at):
    rows = random_rows(audit_id, "singular", seed=seed, n_descriptors=6, vocabulary=10)
    for r in rows:
        r["generated_at"] = at
    return rows


@pytest.mark.slow
def test_incremental_staging_equals_a_full_refresh(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("DORA_HOME", str(home))
    a2 = audit("audit-2", 20, T0)
    shard1 = write_shard("t2t_completions", audit("audit-1", 10, T0), partition="audit-1")
    write_shard("t2t_completions", a2, partition="audit-2")
    invoke_dbt(RUN, home)  # 1
    staged_1 = rows_of(home, "select count(*), count(distinct _landing_shard) from stg_t2t_completions")[0]
    assert staged_1[0] == 2 * 6 * 26 * 2

    # rewrite an already staged shard in place: an incremental build must not read it again
    original = shard1.read_bytes()
    table = pq.read_table(shard1)
    pq.write_table(table.set_column(table.schema.get_field_index("word"), "word", [["tampered"] * table.num_rows]), shard1)
    write_shard("t2t_completions", audit("audit-3", 30, T0 + timedelta(days=1)), partition="audit-3")
    retry = [{**r, "word": "retried", "parse_status": "ok", "generated_at": T0 + timedelta(days=2)} for r in a2[:40]]
    write_shard("t2t_completions", retry, partition="audit-2")
    invoke_dbt(RUN, home)  # 2
    assert rows_of(home, "select count(*) from stg_t2t_completions where word = 'tampered'")[0][0] == 0
    assert rows_of(home, "select count(*) from stg_t2t_completions where word = 'retried'")[0][0] == 40
    fresh = fresh_build(home / "landing", tmp_path)
    assert rows_of(fresh, "select count(*) from stg_t2t_completions where word = 'tampered'")[0][0] > 0
    shard1.write_bytes(original)  # back to the immutable shard; both warehouses must now agree
    fresh = fresh_build(home / "landing", tmp_path)
    assert rows_of(home, STAGED, str(home)) == rows_of(fresh, STAGED, str(fresh))
    assert rows_of(home, MART) == rows_of(fresh, MART)
    assert len(rows_of(home, STAGED, str(home))) == 3 * 6 * 26 * 2

    # archive audit 1: staging restages from the listing, the mart keeps audit 1's history
    mart_before = rows_of(home, MART)
    shutil.move(str(home / "landing" / "t2t_completions" / "audit-1"), tmp_path / "archived-audit-1")
    invoke_dbt(RUN, home)  # 3
    fresh = fresh_build(home / "landing", tmp_path)
    assert rows_of(home, STAGED, str(home)) == rows_of(fresh, STAGED, str(fresh))
    mart = rows_of(home, MART)
    assert [r for r in mart if r[0] != "audit-1"] == rows_of(fresh, MART)
    assert [r for r in mart if r[0] == "audit-1"] == [r for r in mart_before if r[0] == "audit-1"] != []


@pytest.mark.slow
def test_build_scoped_tests_read_only_the_audits_of_the_build(tmp_path, monkeypatch):
    """``DORA_DBT_TEST_SCOPE=this_build`` (dora audit's builds, macros/build_scope.sql): a data
    test reads the audits the build wrote, not the history; unset, every row is tested."""
    home = tmp_path / "home"
    monkeypatch.setenv("DORA_HOME", str(home))
    build = ["build", "--select", "stg_t2t_completions"]
    write_shard("t2t_completions", audit("audit-1", 10, T0), partition="audit-1")
    assert invoke_dbt(build, home).success
    # history goes bad behind dbt's back: a duplicated key in audit-1's staged rows
    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute("insert into stg_t2t_completions select * from stg_t2t_completions limit 1")
    write_shard("t2t_completions", audit("audit-2", 20, T0 + timedelta(hours=1)), partition="audit-2")
    monkeypatch.setenv("DORA_DBT_TEST_SCOPE", "this_build")
    scoped = invoke_dbt(build, home)
    assert scoped.success  # audit-2 is clean; audit-1 was tested when it was built
    tested = [r for r in scoped.result.results if r.node.resource_type == "test"]
    assert tested and all(r.status == "pass" for r in tested)
    monkeypatch.setenv("DORA_DBT_TEST_SCOPE", "all")
    with pytest.raises(RuntimeError, match="model_rules_stg_t2t_completions"):
        invoke_dbt(["test", "--select", "stg_t2t_completions"], home)
    (key_rule,) = broken_rules(home, "stg_t2t_completions")
    assert key_rule[0].startswith("unique: ") and key_rule[1] == 1
