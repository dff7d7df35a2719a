"""Incremental marts: history stays queryable, only audits with new inputs are rebuilt.

``fct_associations``, ``fct_association_scores`` and ``agg_completions_by_audit`` are dbt
incremental models (delete+insert on ``audit_id``, ``dbt_project/macros/incremental_audits.sql``).
One landing zone goes through five builds (module fixture ``history``)::

    build 0  audits 1, 2 and a tiny audit 5 land (+ sentiment scores of audit 1)
    build 1  nothing new                                  -> every mart identical
    build 2  audit 1's shards archived, audit 3 lands,    -> audit 1 kept as it was, audit 3
             a failed retry supersedes audit 5's words       computed, audit 5 gone
    build 3  audit 2 resumed (run 3 of every letter),     -> audit 2 recomputed whole, audit 3's
             a sentiment score of audit 3 lands              scores rebuilt
    build 4  dbt build --full-refresh                     -> the same numbers as build 3 for
                                                             audits 2 and 3; audit 1 gone

Rows are checked against the independent Python reference of tests/test_associations_sql.py
(collections + scipy), and the Fisher UDF is wrapped with a counter to see how many
contingency tables each build computed: the audit filter must reach it.
"""

from __future__ import annotations

import math
import shutil
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

import analytics.duckdb_plugin as duckdb_plugin
from analytics.dbt_runner import invoke_dbt
from ingestion.landing import write_shard
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.landing_rows import T0, completion, expected_associations, random_rows

#: every test here builds dbt models (20+ s of CPU for a full build): out of the fast tier
pytestmark = pytest.mark.slow

#: everything the incremental marts need, with their data tests; unit tests run elsewhere
#: (they would also call the Fisher UDF, on their fixture rows).
BUILD = ["build", "--select", "+fct_association_scores", "+agg_biasdora_audits", *NO_UNIT_TESTS]
A1, A2, A3, A5 = "audit-1", "audit-2", "audit-3", "audit-5"
MODEL, VERSION = "org/model-a", "rev1"
MARTS = {
    "fct_associations": "audit_id, modality, setting, descriptor, word",
    "fct_association_scores": "audit_id, modality, setting, descriptor, word",
    "agg_completions_by_audit": "audit_id",
    "agg_biasdora_audits": "audit_id",
}
STATS = ["tf", "df", "tfidf", "fisher_p", "fisher_q"]


# ----------------------------------------------------------------------------- helpers


def audit_rows(audit_id, *, seed, settings=("singular", "adjective"), generated_at=T0):
    rows = []
    for i, setting in enumerate(settings):
        rows += random_rows(audit_id, setting, seed=seed + i, n_descriptors=10, vocabulary=14)
    for r in rows:
        r["generated_at"] = generated_at
    return rows


def audit_events(audit_id, at):
    base = {
        "audit_id": audit_id,
        "model_id": MODEL,
        "model_version": VERSION,
        "modality": "t2t",
        "config_json": "{}",
        "config_hash": "h",
        "code_version": "c",
        "target": "fixture",
    }
    return [
        {**base, "status": "started", "rows_generated": 0, "event_at": at},
        {**base, "status": "finished", "rows_generated": 1, "event_at": at + timedelta(minutes=5)},
    ]


def sentiment(key, score, scored_at):
    audit_id, modality, setting, descriptor, word = key
    return {
        "audit_id": audit_id,
        "model_id": MODEL,
        "model_version": VERSION,
        "modality": modality,
        "setting": setting,
        "descriptor": descriptor,
        "word": word,
        "text": f"{descriptor} {word}",
        "scorer": "vader",
        "scorer_version": "3.3.2",
        "sentiment_label": "negative" if score <= -0.05 else "positive" if score >= 0.05 else "neutral",
        "sentiment_score": score,
        "scored_at": scored_at,
    }


def snapshot(home: Path) -> dict[str, list[dict]]:
    """Every row of the marts, ordered by their key (all columns)."""
    out = {}
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        for mart, key in MARTS.items():
            cur = con.execute(f"select * from {mart} order by {key}")
            cols = [c[0] for c in cur.description]
            out[mart] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    return out


def of_audit(rows, audit_id):
    return [r for r in rows if r["audit_id"] == audit_id]


def keyed(rows):
    return {(r["audit_id"], r["modality"], r["setting"], r["descriptor"], r["word"]): r for r in rows}


def assert_matches_reference(rows, reference):
    """Mart rows == the Python reference (tf, df exactly; tf-idf, Fisher p, BH q to 1e-9)."""
    got = keyed(rows)
    assert set(got) == set(reference)
    for key, exp in reference.items():
        row = got[key]
        assert (row["tf"], row["df"]) == (exp["tf"], exp["df"]), key
        for col in ("tfidf", "fisher_p", "fisher_q"):
            assert math.isclose(row[col], exp[col], rel_tol=1e-9, abs_tol=1e-12), (key, col, row[col], exp[col])


class FisherCounter:
    """Counts the contingency tables the ``fisher_greater`` UDF computes: :meth:`udf` wraps it
    and is registered in its place (dbt-duckdb registers the plugin's UDFs at each run)."""

    def __init__(self):
        self.tables = 0
        original = duckdb_plugin.fisher_greater

        def udf(a, b, c, d):
            self.tables += len(a)
            return original(a, b, c, d)

        self.udf = udf


# ----------------------------------------------------------------------------- the scenario


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    home = tmp_path_factory.mktemp("dora_home")
    archive = tmp_path_factory.mktemp("archive")
    counter = FisherCounter()
    landed = {A1: audit_rows(A1, seed=10), A2: audit_rows(A2, seed=20)}
    landed[A5] = [completion(A5, "old person", "slow", letter="s"), completion(A5, "young person", "loud", letter="l")]
    builds = []

    def build(args=BUILD):
        counter.tables = 0
        start = time.perf_counter()
        invoke_dbt(args, home)
        builds.append(
            {
                "seconds": time.perf_counter() - start,
                "fisher_tables": counter.tables,
                "marts": snapshot(home),
                "landed": {a: list(rows) for a, rows in landed.items()},
            }
        )

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        mp.setattr(duckdb_plugin, "fisher_greater", counter.udf)
        for audit_id, rows in landed.items():
            write_shard("t2t_completions", rows, partition=audit_id)
            write_shard("audits", audit_events(audit_id, T0), partition=audit_id)
        a1_keys = sorted(expected_associations(landed[A1]))[:3]
        write_shard("sentiment_scores", [sentiment(k, -0.5, T0 + timedelta(hours=1)) for k in a1_keys], partition=A1)
        build()  # 0

        build()  # 1: nothing landed

        shutil.move(str(home / "landing" / "t2t_completions" / A1), archive / "t2t_completions")
        shutil.move(str(home / "landing" / "sentiment_scores" / A1), archive / "sentiment_scores")
        landed[A3] = audit_rows(A3, seed=30, generated_at=T0 + timedelta(days=1))
        write_shard("t2t_completions", landed[A3], partition=A3)
        write_shard("audits", audit_events(A3, T0 + timedelta(days=1)), partition=A3)
        # a later answer that parses to no word supersedes both words (an `error` row would not:
        # failed calls never replace a landed answer, they are retried)
        retry = [{**r, "word": None, "raw_output": "...", "parse_status": "no_word", "generated_at": T0 + timedelta(days=1)} for r in landed[A5]]
        write_shard("t2t_completions", retry, partition=A5)
        build()  # 2

        resumed = [r for r in random_rows(A2, "singular", seed=23, n_descriptors=10, vocabulary=14, runs=3) if r["run"] == 3]
        for r in resumed:
            r["generated_at"] = T0 + timedelta(days=2)
        landed[A2] = landed[A2] + resumed
        write_shard("t2t_completions", resumed, partition=A2)
        a3_key = sorted(expected_associations(landed[A3]))[0]
        write_shard("sentiment_scores", [sentiment(a3_key, 0.7, T0 + timedelta(days=3))], partition=A3)
        build()  # 3

        build([*BUILD, "--full-refresh"])  # 4
    print("build seconds / Fisher tables:", [(round(b["seconds"], 1), b["fisher_tables"]) for b in builds])
    return {"builds": builds, "a1_keys": a1_keys, "a3_key": a3_key}


# ----------------------------------------------------------------------------- the tests


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # the reference's z-score of audit 5 (2 equal tf-idf)
def test_first_build_matches_the_reference_and_records_watermarks(history):
    b0 = history["builds"][0]
    fct = b0["marts"]["fct_associations"]
    for audit_id in (A1, A2, A5):
        rows = of_audit(fct, audit_id)
        assert_matches_reference(rows, expected_associations(b0["landed"][audit_id]))
        assert {r["inputs_landed_at"] for r in rows} == {T0}
    assert b0["fisher_tables"] == len(fct)
    scores = of_audit(b0["marts"]["fct_association_scores"], A1)
    scored = {k: r for k, r in keyed(scores).items() if r["sentiment_label"] is not None}
    assert set(scored) == set(history["a1_keys"])
    assert {(r["sentiment_label"], r["sentiment_score"]) for r in scored.values()} == {("negative", -0.5)}
    assert {r["scores_landed_at"] for r in scores} == {T0 + timedelta(hours=1)}
    completions = {r["audit_id"]: r for r in b0["marts"]["agg_completions_by_audit"]}
    a1 = b0["landed"][A1]
    assert completions[A1]["completions"] == len(a1) == 2 * 10 * 26 * 2
    assert completions[A1]["completions_parsed"] == sum(r["parse_status"] == "ok" for r in a1)


def test_no_change_rebuild_leaves_every_mart_identical(history):
    b0, b1 = history["builds"][:2]
    assert b1["marts"] == b0["marts"]
    assert b1["fisher_tables"] == 0  # no audit to rebuild: Fisher's test ran on no table


def test_archived_shards_keep_history_and_a_new_audit_appears(history):
    b0, b1, b2 = history["builds"][:3]
    before, after = b1["marts"], b2["marts"]
    # audit 1 (completion and score shards archived) and audit 2 (nothing new): rows as they were
    for mart in ("fct_associations", "fct_association_scores", "agg_completions_by_audit", "agg_biasdora_audits"):
        for audit_id in (A1, A2):
            assert of_audit(after[mart], audit_id) == of_audit(before[mart], audit_id), (mart, audit_id)
            assert of_audit(after[mart], audit_id), (mart, audit_id)
    # audit 3 is new: computed exactly like the reference, and only its tables went through Fisher
    a3 = of_audit(after["fct_associations"], A3)
    assert_matches_reference(a3, expected_associations(b2["landed"][A3]))
    assert {r["inputs_landed_at"] for r in a3} == {T0 + timedelta(days=1)}
    assert b2["fisher_tables"] == len(a3) > 0
    # audit 5: a later answer superseded both its words, so its associations are gone
    assert of_audit(before["fct_associations"], A5) and not of_audit(after["fct_associations"], A5)
    assert not of_audit(after["fct_association_scores"], A5)
    a5 = {r["audit_id"]: r for r in after["agg_completions_by_audit"]}[A5]
    assert (a5["completions"], a5["completions_parsed"]) == (2, 0)
    # agg_biasdora_audits still counts audit 1's completions and associations (its events were kept)
    dims = {r["audit_id"]: r for r in after["agg_biasdora_audits"]}
    assert dims[A1]["completions"] == len(b0["landed"][A1])
    assert dims[A1]["associations"] == len(of_audit(after["fct_associations"], A1)) > 0


def test_resumed_audit_is_recomputed_whole_and_equals_a_full_refresh(history):
    b2, b3, b4 = history["builds"][2:5]
    old = keyed(of_audit(b2["marts"]["fct_associations"], A2))
    new = keyed(of_audit(b3["marts"]["fct_associations"], A2))
    # recomputed whole: every statistic of the setting that gained rows moved, none is stale
    assert_matches_reference(list(new.values()), expected_associations(b3["landed"][A2]))
    assert len(b3["landed"][A2]) > len(b2["landed"][A2])
    assert {r["inputs_landed_at"] for r in new.values()} == {T0 + timedelta(days=2)}
    singular = [k for k in old if k[2] == "singular"]
    moved = [k for k in singular if k not in new or (new[k]["tf"], new[k]["fisher_p"]) != (old[k]["tf"], old[k]["fisher_p"])]
    assert len(moved) > len(singular) / 2  # the grand total of the setting changed
    adjective = [k for k in old if k[2] == "adjective"]  # no new rows: same statistics, new watermark
    assert adjective and all({c: new[k][c] for c in STATS} == {c: old[k][c] for c in STATS} for k in adjective)
    assert len(new) > len(old)
    assert b3["fisher_tables"] == len(new)  # only audit 2's tables went through Fisher
    # the other audits' rows did not move
    for audit_id in (A1, A3):
        assert of_audit(b3["marts"]["fct_associations"], audit_id) == of_audit(b2["marts"]["fct_associations"], audit_id)
    # --full-refresh rebuilds everything from the landing zone: row for row the same numbers
    for audit_id in (A2, A3):
        incremental = of_audit(b3["marts"]["fct_associations"], audit_id)
        full = of_audit(b4["marts"]["fct_associations"], audit_id)
        assert [{c: r[c] for c in ["descriptor", "word", *STATS]} for r in incremental] == [
            {c: r[c] for c in ["descriptor", "word", *STATS]} for r in full
        ]
    assert b4["fisher_tables"] == len(b4["marts"]["fct_associations"])
    # ... and so audit 1, whose shards are archived, is gone after it (README: restore them first)
    assert not of_audit(b4["marts"]["fct_associations"], A1)


def test_new_scores_rebuild_only_their_audit(history):
    b2, b3 = history["builds"][2:4]
    a3_after = keyed(of_audit(b3["marts"]["fct_association_scores"], A3))
    a3_before = keyed(of_audit(b2["marts"]["fct_association_scores"], A3))
    key = history["a3_key"]
    assert a3_after[key]["sentiment_label"] == "positive" and a3_after[key]["sentiment_score"] == 0.7
    assert key not in a3_before or a3_before[key]["sentiment_label"] is None
    assert {r["scores_landed_at"] for r in a3_after.values()} == {T0 + timedelta(days=3)}
    assert {r["scores_landed_at"] for r in a3_before.values()} <= {None}
    # audit 1's scores (score shards archived) are as they were
    assert of_audit(b3["marts"]["fct_association_scores"], A1) == of_audit(b2["marts"]["fct_association_scores"], A1)
    assert Counter(r["sentiment_label"] for r in of_audit(b3["marts"]["fct_association_scores"], A1))["negative"] == 3
