"""The association SQL (dbt_project/) against hand arithmetic and scipy.

docs/method.md#3-associations fixes the definitions; here every number of ``fct_associations`` is
recomputed independently in Python (collections + scipy) from the landed rows, and a tiny
example is checked against arithmetic written out by hand. ``dbt build`` itself runs the
schema (data) tests and the dbt unit tests; a failing one makes ``invoke_dbt`` raise.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import special, stats

from analytics.dbt_runner import invoke_dbt
from analytics.duckdb_plugin import register_functions
from ingestion.landing import SCHEMAS, landing_dir, write_shard
from tests.helpers.dbt_jinja import broken_rules
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.landing_rows import T0, completion, expected_associations, random_rows

# ----------------------------------------------------------------------------- helpers


def tiny_example_rows():
    """Audit 'audit-1', setting singular: the hand-computed example (see test_tiny_example).

    Documents after filtering and dedup:
        old person   = [good, good, kind]
        young person = [good, lazy]
        rich person  = [lazy]
    """
    a = "audit-1"
    return [
        completion(a, "old person", "good", letter="g", run=1),
        completion(a, "old person", " Good ", letter="g", run=2),  # normalised to 'good'
        completion(a, "old person", "kind", letter="k", run=1),
        # not counted: bad parse status (even though the word is there)
        completion(a, "old person", "good", letter="h", run=1, parse_status="wrong_letter"),
        completion(a, "old person", "zany", letter="z", run=1, parse_status="not_a_word"),
        completion(a, "young person", "good", letter="g", run=1, bias_dimension="age"),
        # the same key twice: the later generated_at ('lazy') replaces 'lame'
        completion(a, "young person", "lame", letter="l", run=1, generated_at=T0 - timedelta(hours=1)),
        completion(a, "young person", "lazy", letter="l", run=1),
        completion(a, "young person", None, letter="q", run=1, parse_status="no_word"),
        completion(a, "rich person", "lazy", letter="l", run=1, bias_dimension="socioeconomic"),
        completion(a, "rich person", "", letter="e", run=1, parse_status="empty", bias_dimension="socioeconomic"),
        completion(a, "rich person", "good", letter="g", run=1, parse_status="error", bias_dimension="socioeconomic"),
    ]


def query(home: Path, sql: str, params=None) -> list[dict]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        cur = con.execute(sql, params or [])
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def close(x, y, rel=1e-9, abs_=0.0):
    return math.isclose(x, y, rel_tol=rel, abs_tol=abs_)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One landing with two audits, built once by ``dbt build`` (tests + unit tests)."""
    home = tmp_path_factory.mktemp("dora_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        rows = tiny_example_rows()
        write_shard("t2t_completions", rows[:6], partition="audit-1")
        write_shard("t2t_completions", rows[6:], partition="audit-1")
        # an exact duplicate of a landed row, in another shard: must collapse
        write_shard("t2t_completions", [rows[0]], partition="audit-1")
        big1 = random_rows("audit-1", "adjective", seed=1)
        write_shard("t2t_completions", big1, partition="audit-1")
        # a second audit in the same landing: same descriptors and settings, other model
        small2 = [
            completion("audit-2", d, w, letter=w[0], run=i, model_id="org/model-b")
            for i, (d, w) in enumerate(
                [("old person", "good"), ("young person", "kind"), ("rich person", "lazy"), ("poor person", "lazy"), ("poor person", "good")], start=1
            )
        ]
        big2 = random_rows("audit-2", "adjective", seed=2, n_descriptors=9, vocabulary=12, model_id="org/model-b")
        write_shard("t2t_completions", small2 + big2, partition="audit-2")
        write_shard(
            "audits",
            [
                {
                    "audit_id": "audit-1",
                    "model_id": "org/model-a",
                    "model_version": "rev1",
                    "modality": "t2t",
                    "config_json": "{}",
                    "config_hash": "h1",
                    "code_version": "c1",
                    "status": "started",
                    "rows_generated": 0,
                    "event_at": T0,
                },
                {
                    "audit_id": "audit-1",
                    "model_id": "org/model-a",
                    "model_version": "rev1",
                    "modality": "t2t",
                    "config_json": "{}",
                    "config_hash": "h1",
                    "code_version": "c1",
                    "status": "finished",
                    "rows_generated": len(rows) + len(big1),
                    "event_at": T0 + timedelta(minutes=5),
                },
            ],
        )
        # audit-2's event as landed before the audit log had a `family` column: a shard without
        # it (read with union_by_name); stg_audits names its family from its modality
        old = {
            "audit_id": "audit-2",
            "model_id": "org/model-b",
            "model_version": "rev1",
            "modality": "t2t",
            "config_json": "{}",
            "config_hash": "h2",
            "code_version": "c0",
            "status": "finished",
            "rows_generated": len(small2) + len(big2),
            "event_at": T0,
            "target": None,
        }
        old_schema = pa.schema([f for f in SCHEMAS["audits"] if f.name != "family"])
        (landing_dir("audits") / "audit-2").mkdir()
        pq.write_table(pa.Table.from_pylist([old], schema=old_schema), landing_dir("audits") / "audit-2" / "old.parquet")
        result = invoke_dbt(["build"], home)
        landing = rows + [rows[0]] + big1 + small2 + big2
        yield {"home": home, "result": result, "landing": landing, "expected": expected_associations(landing)}


@pytest.fixture(scope="module")
def fct(built):
    rows = query(built["home"], "select * from main.fct_associations")
    return {(r["audit_id"], r["modality"], r["setting"], r["descriptor"], r["word"]): r for r in rows}


# ----------------------------------------------------------------------------- the UDFs


def test_fisher_udf_matches_scipy_on_many_tables():
    rng = random.Random(7)
    tables = [(0, 0, 0, 0), (0, 0, 1, 1), (1, 0, 0, 0), (0, 5, 0, 7), (3, 0, 4, 0), (5, 0, 0, 5), (0, 5, 5, 0), (1, 1, 1, 1), (1, 0, 1, 104_000)]
    for _ in range(400):
        scale = rng.choice([3, 10, 50, 1000, 100_000])
        tables.append(tuple(rng.randint(0, scale) for _ in range(4)))
    for _ in range(100):  # association-like: small a, b; huge c, d
        tables.append((rng.randint(1, 30), rng.randint(0, 300), rng.randint(0, 2000), rng.randint(10_000, 200_000)))
    con = duckdb.connect()
    try:
        register_functions(con)
        con.execute("create table t (i bigint, a bigint, b bigint, c bigint, d bigint)")
        con.executemany("insert into t values (?, ?, ?, ?, ?)", [(i, *t) for i, t in enumerate(tables)])
        got = dict(con.execute("select i, fisher_greater(a, b, c, d) from t").fetchall())
        nulls = con.execute("select fisher_greater(null, 1, 2, 3), fisher_greater(1, 2, 3, null), normal_sf(null), normal_sf(0.0)").fetchone()
        z = np.linspace(-12, 12, 241)
        con.execute("create table zs (i bigint, z double)")
        con.executemany("insert into zs values (?, ?)", list(enumerate(z.tolist())))
        sf = dict(con.execute("select i, normal_sf(z) from zs").fetchall())
    finally:
        con.close()
    for i, (a, b, c, d) in enumerate(tables):
        want = stats.fisher_exact([[a, b], [c, d]], alternative="greater").pvalue
        assert close(got[i], want), ((a, b, c, d), got[i], want)
    assert nulls == (None, None, None, 0.5)
    for i, zi in enumerate(z):
        assert close(sf[i], float(special.ndtr(-zi)), rel=1e-12)
        assert close(sf[i], float(stats.norm.sf(zi)), rel=1e-9)


# ----------------------------------------------------------------------------- dbt build


@pytest.mark.slow
def test_dbt_build_ran_data_tests_and_unit_tests(built):
    results = built["result"].result.results
    kinds = Counter(type(r.node).__name__ for r in results)
    assert kinds["UnitTestNode"] >= 3, kinds
    assert kinds["GenericTestNode"] >= 40, kinds
    assert {str(r.status) for r in results} <= {"pass", "success"}
    names = {r.node.name for r in results}
    built_models = {r.node.name for r in results if type(r.node).__name__ == "ModelNode"}
    assert {"stg_t2t_completions", "int_document_words", "int_association_counts", "fct_associations", "dim_audits"} <= built_models
    assert "fct_associations_by_hand" in names
    assert any(n.startswith("model_rules_stg_t2t_completions") for n in names)


@pytest.mark.slow
def test_tiny_example_by_hand(fct):
    """audit-1 / t2t / singular after filtering and dedup:

        old person   = [good, good, kind]   (length 3)
        young person = [good, lazy]         (length 2; 'lame' was replaced by a later 'lazy')
        rich person  = [lazy]               (length 1)
    N = 3 descriptors, T = 6 words; word totals good 3, kind 1, lazy 2.
    df: good 2 (old, young), kind 1, lazy 2 (young, rich).
    idf = ln(N / df): good, lazy ln(3/2) = 0.405465..., kind ln(3) = 1.098612...
    tfidf = tf * idf: (old, good) 2 ln 1.5 = 0.810930...; (old, kind) ln 3; the rest ln 1.5.
    pmi = log2(tf * T / (len(d) * total(w))):
        (old, good) log2(2*6 / (3*3)) = log2(4/3); (old, kind) log2(6/3) = 1;
        (young, good) log2(6/6) = 0; (young, lazy) log2(6/4); (rich, lazy) log2(6/2).
    Fisher [[a, b], [c, d']], one-sided greater:
        (rich, lazy) [[1, 0], [1, 4]]: the one word of 'rich' drawn from 6 of which 2 are
            'lazy': p = 2/6 = 1/3.
        (old, kind) [[1, 2], [0, 3]]: 'kind' (1 occurrence) lands in old's 3 of 6: p = 1/2.
        (old, good) [[2, 1], [1, 2]]: P(X >= 2), X ~ Hypergeom(6, 3 good, 3 drawn)
            = (C(3,2) C(3,1) + C(3,3)) / C(6,3) = (9 + 1) / 20 = 1/2.
        (young, good) [[1, 1], [2, 2]]: P(X >= 1), 2 drawn: 1 - C(3,2)/C(6,2) = 1 - 3/15 = 0.8.
        (young, lazy) [[1, 1], [1, 3]]: 1 - C(4,2)/C(6,2) = 1 - 6/15 = 0.6.
    BH, m = 5: sorted p 1/3, 1/2, 1/2, 0.6, 0.8 -> p*5/rank 5/3, 5/4, 5/6, 3/4, 4/5 ->
        running min from the top: 3/4, 3/4, 3/4, 3/4, 4/5. Nothing is significant.
    """
    g = ("audit-1", "t2t", "singular")
    got = {k[3:]: v for k, v in fct.items() if k[:3] == g}
    assert set(got) == {("old person", "good"), ("old person", "kind"), ("young person", "good"), ("young person", "lazy"), ("rich person", "lazy")}
    ln15, ln3 = math.log(3 / 2), math.log(3)
    want = {
        ("old person", "good"): (2, 2, ln15, 2 * ln15, math.log2(4 / 3), 0.5, 0.75),
        ("old person", "kind"): (1, 1, ln3, ln3, 1.0, 0.5, 0.75),
        ("young person", "good"): (1, 2, ln15, ln15, 0.0, 0.8, 0.8),
        ("young person", "lazy"): (1, 2, ln15, ln15, math.log2(1.5), 0.6, 0.75),
        ("rich person", "lazy"): (1, 2, ln15, ln15, math.log2(3), 1 / 3, 0.75),
    }
    for key, (tf, df, idf, tfidf, pmi, p, q) in want.items():
        row = got[key]
        assert (row["tf"], row["df"]) == (tf, df), key
        assert close(row["idf"], idf, rel=1e-12), key
        assert close(row["tfidf"], tfidf, rel=1e-12), key
        assert close(row["pmi"], pmi, rel=1e-12, abs_=1e-15), key
        assert close(row["fisher_p"], p, rel=1e-12), key
        assert close(row["fisher_q"], q, rel=1e-12), key
        assert row["is_significant"] is False
        assert row["model_id"] == "org/model-a" and row["model_version"] == "rev1"
    assert list(got[("rich person", "lazy")]["bias_dimensions"]) == ["socioeconomic"]
    # 'zany', 'lame' never count (bad parse status / replaced by a later duplicate)
    assert not any(w in {"zany", "lame"} for (_, w) in got)
    # the paper's own statistics (docs/method.md#3a-paper-statistics) are checked in tests/test_paper_statistics.py


@pytest.mark.slow
def test_every_association_matches_python_reference(fct, built):
    expected = built["expected"]
    assert set(fct) == set(expected)
    for key, want in expected.items():
        row = fct[key]
        assert (row["tf"], row["df"]) == (want["tf"], want["df"]), key
        assert close(row["idf"], want["idf"], rel=1e-12, abs_=1e-300), key
        assert close(row["tfidf"], want["tfidf"], rel=1e-12, abs_=1e-300), key
        assert close(row["pmi"], want["pmi"], rel=1e-12, abs_=1e-12), key
        assert close(row["fisher_p"], want["fisher_p"]), (key, want["table"])
        assert close(row["fisher_q"], want["fisher_q"]), key
        assert row["fisher_q"] >= row["fisher_p"]
        assert row["is_significant"] == want["is_significant"], key
        # paper_p_value (docs/method.md#3a-paper-statistics): tests/test_paper_statistics.py


@pytest.mark.slow
def test_fisher_q_is_scipy_bh_per_setting_including_ties(fct):
    groups = defaultdict(list)
    for key, row in fct.items():
        groups[key[:3]].append(row)
    assert len(groups) == 4  # (audit-1 | audit-2) x (singular | adjective)
    saw_ties = False
    for group, rows in groups.items():
        p = np.array([r["fisher_p"] for r in rows])
        q = stats.false_discovery_control(p, method="bh")
        saw_ties |= len(set(p.tolist())) < len(p)
        for r, qi in zip(rows, q, strict=True):
            assert close(r["fisher_q"], float(qi)), group
    assert saw_ties
    assert any(r["is_significant"] for r in fct.values())  # the random audits have signal


@pytest.mark.slow
def test_duplicates_in_landing_collapse_in_staging(built):
    home = built["home"]
    rows = query(home, "select * from main.stg_t2t_completions where audit_id = 'audit-1' and setting = 'singular' order by descriptor, letter, run")
    # 12 landed + 1 exact duplicate shard row; 'young person'/l/1 landed twice -> 11 keys
    assert len(rows) == 11
    lazy = [r for r in rows if r["descriptor"] == "young person" and r["letter"] == "l"]
    assert [r["word"] for r in lazy] == ["lazy"]
    counts = query(
        home,
        "select count(*) as n, count(distinct (audit_id, model_id, model_version,"
        " setting, descriptor, letter, run)) as k from main.stg_t2t_completions",
    )
    assert counts[0]["n"] == counts[0]["k"]
    # bad parse statuses stay in staging but never reach the documents
    statuses = {r["parse_status"] for r in rows}
    assert {"wrong_letter", "not_a_word", "no_word", "empty", "error"} <= statuses
    words = query(home, "select count(*) as n from main.int_document_words where audit_id = 'audit-1' and setting = 'singular'")
    assert words[0]["n"] == 6


@pytest.mark.slow
def test_second_audit_is_independent(fct, built):
    """audit-2 / singular: old=[good], young=[kind], rich=[lazy], poor=[lazy, good]: N = 4.

    df(good) = 2, so idf = ln(4/2) = ln 2 (in audit-1 it is ln(3/2)); audit-1's numbers are
    the ones of the tiny example alone (checked above), so nothing leaks across audits.
    """
    got = {k[3:]: v for k, v in fct.items() if k[:3] == ("audit-2", "t2t", "singular")}
    assert len(got) == 5
    assert close(got[("poor person", "good")]["idf"], math.log(2), rel=1e-12)
    assert close(got[("young person", "kind")]["idf"], math.log(4), rel=1e-12)
    assert {r["model_id"] for r in got.values()} == {"org/model-b"}
    audit1_adj = {k for k in fct if k[:3] == ("audit-1", "t2t", "adjective")}
    audit2_adj = {k for k in fct if k[:3] == ("audit-2", "t2t", "adjective")}
    assert audit1_adj and audit2_adj
    assert {k[3] for k in audit2_adj} <= {f"descriptor {i}" for i in range(9)}


@pytest.mark.slow
def test_dim_audits(built):
    rows = query(built["home"], "select * from main.dim_audits order by audit_id")
    assert [(r["audit_id"], r["family"]) for r in rows] == [("audit-1", "biasdora"), ("audit-2", "biasdora")]
    row = rows[0]
    assert row["audit_id"] == "audit-1" and row["status"] == "finished"
    assert row["model_id"] == "org/model-a" and row["modality"] == "t2t"
    assert row["started_at"] < row["finished_at"]
    assert row["rows_generated"] == 12 + 12 * 26 * 2


# ----------------------------------------------------------------------------- edge cases


def test_build_with_empty_landing(empty_warehouses):
    """Only the empty ``_schema.parquet`` shards: everything builds, tables are empty."""
    tmp_path = empty_warehouses / "full"
    for model in ("stg_t2t_completions", "int_association_counts", "fct_associations", "dim_audits"):
        assert query(tmp_path, f"select count(*) as n from main.{model}")[0]["n"] == 0
    cols = [
        r["column_name"]
        for r in query(tmp_path, "select column_name from information_schema.columns where table_name = 'fct_associations' order by ordinal_position")
    ]
    assert cols == [
        "audit_id",
        "model_id",
        "model_version",
        "modality",
        "setting",
        "descriptor",
        "word",
        "tf",
        "df",
        "idf",
        "tfidf",
        "pmi",
        "paper_p_value",
        "fisher_p",
        "fisher_q",
        "is_significant",
        "inputs_landed_at",
        # appended
        "bias_dimensions",
        "paper_df",
        "n_paper_documents",
        "paper_idf",
        "paper_tfidf",
        "is_paper_significant",
    ]


@pytest.mark.slow
def test_duplicate_association_key_fails_the_build(tmp_path, monkeypatch):
    """One audit id landed by two models: the association key repeats, the model's key rule fails
    (and no other of its rules)."""
    monkeypatch.setenv("DORA_HOME", str(tmp_path))
    write_shard(
        "t2t_completions",
        [
            completion("audit-x", "old person", "good", model_id="org/model-a"),
            completion("audit-x", "old person", "good", model_id="org/model-b"),
            completion("audit-x", "young person", "kind", model_id="org/model-a"),
        ],
    )
    with pytest.raises(RuntimeError, match="model_rules_int_association_counts"):
        invoke_dbt(["build", "--select", "+int_association_counts"], tmp_path)  # the model, its parents, their tests
    assert broken_rules(tmp_path, "int_association_counts") == [("unique: audit_id, modality, setting, descriptor, word", 1)]


@pytest.mark.slow
def test_a_row_breaking_a_row_rule_fails_the_build_naming_the_model(tmp_path, monkeypatch):
    """A completion landed with a setting outside the five (a hand-written shard) breaks one of
    stg_t2t_completions' row rules (dbt_project/tests/generic/model_rules.sql): dbt fails the
    build and names the test, whose query names the rule."""
    monkeypatch.setenv("DORA_HOME", str(tmp_path))
    write_shard("t2t_completions", [completion("audit-x", "old person", "good", setting="sideways")])
    with pytest.raises(RuntimeError, match="model_rules_stg_t2t_completions"):
        invoke_dbt(["build", "--select", "stg_t2t_completions", *NO_UNIT_TESTS], tmp_path)
    (setting_rule,) = broken_rules(tmp_path, "stg_t2t_completions")
    assert "setting in (" in setting_rule[0] and setting_rule[1] == 1
