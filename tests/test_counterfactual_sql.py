"""The counterfactual marts' SQL on hand-computed cases (docs/families/counterfactual.md#checked-against-the-paper test vectors): the
dbt model files themselves, run on an in-memory DuckDB with their refs bound to test tables."""

import math
import re
from pathlib import Path

import duckdb
import pytest
from scipy import stats

from analytics.counterfactual_stats import kruskal_pvalue, register_functions

MODELS = Path(__file__).resolve().parents[1] / "dbt_project" / "models"


def model_sql(name: str) -> str:
    """A model's SQL with ref()/source()/var() rendered (the only Jinja these models use)."""
    sql = next(MODELS.glob(f"*/counterfactual/{name}.sql")).read_text()  # models/<layer>/counterfactual/
    sql = re.sub(r"\{\{\s*ref\('(\w+)'\)\s*\}\}", r"\1", sql)
    sql = re.sub(r"\{\{\s*source\('\w+',\s*'(\w+)'\)\s*\}\}", r"\1", sql)
    sql = re.sub(r"\{\{\s*var\('\w+',\s*([\d.]+)\)\s*\}\}", r"\1", sql)
    assert "{{" not in sql, sql
    return sql


def responses(con, rows):
    con.execute(
        "create table fct_counterfactual_responses (audit_id varchar, model_id varchar, model_version varchar, "
        "variant varchar, subset varchar, set_id varchar, occupation varchar, prompt_kind varchar, prompt_label varchar, "
        "mitigation varchar, run integer, a1 varchar, a2 varchar, group_label varchar, status varchar, toxicity double, "
        "severe_toxicity double, obscene double, threat double, insult double, identity_attack double)"
    )
    for r in rows:
        con.execute("insert into fct_counterfactual_responses values (" + ", ".join("?" * 21) + ")", r)


def row(set_id, run, group, tox, status="ok", insult=None):
    return [
        "a",
        "m",
        "v",
        "text",
        "race_gender",
        set_id,
        "nurse",
        "open",
        "Describe",
        "none",
        run,
        "x",
        group,
        group,
        status,
        tox,
        None,
        None,
        None,
        insult,
        None,
    ]


def test_max_toxicity_vectors():
    con = duckdb.connect()
    rows = [row("c", 1, g, t) for g, t in zip("abcd", [0.02, 0.05, 0.40, 0.03], strict=True)]  # C.5.4: 0.38
    rows += [row("e", 1, g, 0.2) for g in "abcd"]  # all equal: 0
    # runs are separate units: run-wise MaxToxicity 0.10, 0.30, 0.20 -> mean 0.20
    for run, spread in enumerate([0.10, 0.30, 0.20], start=1):
        rows += [row("s", run, "a", 0.1), row("s", run, "b", 0.1 + spread), row("s", run, "c", 0.1), row("s", run, "d", 0.1)]
    # a member without a response (error): its unit is excluded
    rows += [row("m", 1, "a", 0.9), row("m", 1, "b", 0.1), row("m", 1, "c", 0.1), row("m", 1, "d", None, status="error")]
    responses(con, rows)
    con.execute(f"create table fct_max_toxicity as {model_sql('fct_max_toxicity')}")
    got = {
        (s, run): (v, g)
        for s, run, v, g in con.sql("select set_id, run, max_toxicity, max_group from fct_max_toxicity where head = 'toxicity'").fetchall()
    }
    assert got[("c", 1)][0] == pytest.approx(0.38) and got[("c", 1)][1] == "c"
    assert got[("e", 1)][0] == 0
    assert [round(got[("s", k)][0], 10) for k in (1, 2, 3)] == [0.1, 0.3, 0.2]
    assert ("m", 1) not in got
    # heads without scores give no unit; a scored head gives its own
    assert con.sql("select distinct head from fct_max_toxicity").fetchall() == [("toxicity",)]
    con.execute(f"create table agg as {model_sql('agg_max_toxicity')}")
    con.execute("delete from fct_max_toxicity where set_id <> 's'")
    con.execute(f"create or replace table agg as {model_sql('agg_max_toxicity')}")
    units, mean, p90 = con.sql("select units, mean_max_toxicity, p90_max_toxicity from agg").fetchall()[0]
    assert units == 3 and mean == pytest.approx(0.20)
    assert p90 == pytest.approx(0.28)  # linear interpolation (pandas): 0.2 + 0.8 * (0.3 - 0.2)


def test_pmi_vector():
    con = duckdb.connect()
    con.execute(
        "create table int_counterfactual_words (audit_id varchar, model_id varchar, model_version varchar, "
        "variant varchar, subset varchar, group_label varchar, response_id varchar, word varchar)"
    )
    words = [("D", "w", 20), ("D", "x", 971), ("D", "v", 9), ("O", "w", 30), ("O", "x", 8739), ("O", "y", 231)]
    for g, w, n in words:
        con.execute("insert into int_counterfactual_words select 'a', 'm', 'v', 'text', 'rg', ?, 'r', ? from range(?)", [g, w, n])
    con.execute(f"create table pmi as {model_sql('int_counterfactual_word_pmi')}")
    got = {
        (g, w): (s, pg, po, c)
        for g, w, s, pg, po, c in con.sql("select group_label, word, s_w, pmi_group, pmi_other, is_candidate from pmi").fetchall()
    }
    s, pmi_d, pmi_other, cand = got[("D", "w")]
    assert pmi_d == pytest.approx(2.0) and pmi_other == pytest.approx(-0.5850, abs=1e-4)  # C.5.4
    assert s == pytest.approx(math.log2(6)) and s == pytest.approx(pmi_d - pmi_other) and cand
    assert ("D", "v") not in got  # freq 9 < min-freq 10: discarded
    assert got[("O", "y")][0] == math.inf and got[("O", "y")][3]  # never in C_other: +inf, kept


def test_kruskal_udf_matches_scipy():
    a, b, c = [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0], [2.5, 3.5]
    expected = stats.kruskal(a, b, c).pvalue
    assert kruskal_pvalue(a + b + c, ["a"] * 4 + ["b"] * 3 + ["c"] * 2) == pytest.approx(expected)
    assert kruskal_pvalue([1.0, 2.0], ["a", "a"]) is None  # one group
    assert kruskal_pvalue([3.0, 3.0, 3.0], ["a", "b", "c"]) is None  # all equal
    con = duckdb.connect()
    register_functions(con)
    p = con.sql("select kruskal_p([1, 2, 3, 4, 5, 6, 7, 2.5, 3.5]::double[], ['a','a','a','a','b','b','b','c','c'])").fetchall()[0][0]
    assert p == pytest.approx(expected)


def test_staging_numbers_runs_from_1_and_keeps_seed_for_the_random_seed():
    """The landing columns `seed` (the run's 0-based index) and `generation_seed` (the random
    seed) stage as `run` = seed + 1 and `seed`; the filter's `repeat` (0-based) as `run`; a
    retried error is replaced by its later answer (docs/glossary.md)."""
    from datetime import datetime, timedelta, timezone

    import pyarrow as pa

    from ingestion.contracts import SCHEMAS
    from tests.helpers.dbt_jinja import render_model

    def staged(table: str, rows: list[dict]) -> list[dict]:
        con = duckdb.connect()
        con.register(table, pa.Table.from_pylist(rows, schema=SCHEMAS[table]))
        sql = render_model(next(MODELS.glob(f"staging/counterfactual/stg_{table}.sql")), source=lambda _, name: name)
        rel = con.sql(sql)
        return [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]

    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    key = {"audit_id": "a", "set_id": "s1", "a1": "x", "a2": "y", "prompt_label": "Describe", "mitigation": "none"}
    rows = staged(
        "counterfactual_responses",
        [
            {**key, "seed": 0, "generation_seed": 111, "status": "error", "response_id": "r0", "generated_at": t0},
            {**key, "seed": 0, "generation_seed": 111, "status": "ok", "response_id": "r0", "generated_at": t0 + timedelta(hours=1)},
            {**key, "seed": 1, "generation_seed": 222, "status": "ok", "response_id": "r1", "generated_at": t0},
        ],
    )
    assert "generation_seed" not in rows[0]
    assert sorted((r["run"], r["seed"], r["status"]) for r in rows) == [(1, 111, "ok"), (2, 222, "ok")]
    flags = staged(
        "counterfactual_stereotype_flags",
        [
            {
                "audit_id": "a",
                "subset": "race_gender",
                "group_label": "D",
                "repeat": k,
                "judge_model_version": "j",
                "word_list_hash": "h",
                "parse_status": "ok",
                "judged_at": t0,
            }
            for k in range(3)
        ],
    )
    assert "repeat" not in flags[0] and sorted(r["run"] for r in flags) == [1, 2, 3]


def test_the_family_declares_its_duckdb_function_and_the_shared_plugin_registers_it():
    """kruskal_p is named by the family's landing contract (``DUCKDB_FUNCTIONS``), not listed in
    profiles.yml: the shared dbt-duckdb plugin registers every family's functions, and the value
    is scipy's Kruskal-Wallis p."""
    import yaml

    from analytics.duckdb_plugin import register_family_functions
    from orchestration.families import get_family

    assert get_family("counterfactual").duckdb_functions == ("analytics.counterfactual_stats",)
    profiles = yaml.safe_load((Path(__file__).resolve().parents[1] / "dbt_project" / "profiles.yml").read_text())
    assert [p["module"] for p in profiles["dora"]["outputs"]["dev"]["plugins"]] == ["analytics.duckdb_plugin"]
    with duckdb.connect() as con:
        register_family_functions(con)
        (p,) = con.execute("select kruskal_p([1, 2, 3, 7, 8, 9]::double[], ['a', 'a', 'a', 'b', 'b', 'b'])").fetchone()
    assert p == pytest.approx(stats.kruskal([1, 2, 3], [7, 8, 9]).pvalue)
