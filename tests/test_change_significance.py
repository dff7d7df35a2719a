"""Change significance between model versions (fct_association_changes.change_p / change_q).

- the DuckDB UDF ``fisher_two_sided`` equals ``scipy.stats.fisher_exact(alternative="two-sided")``
  on thousands of tables (random, symmetric, tied, large, degenerate);
- a synthetic pair of versions of one registry target, identical up to sampling noise except
  for ONE planted change, built by the real dbt project: exactly that change is significant,
  and every change_p / change_q equals scipy's ``fisher_exact`` + ``false_discovery_control``
  recomputed from the landed documents; ``dora diff`` shows the q-values, sorted, and the count.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta, timezone

import duckdb
import numpy as np
import pytest
from scipy import stats

from analytics.dbt_runner import invoke_dbt
from analytics.duckdb_plugin import register_functions
from analytics.fisher_two_sided import fisher_two_sided_pvalues
from analytics.query import execute_query
from ingestion.landing import write_shard
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.reference_stats import fisher_q_values


def _tables() -> np.ndarray:
    rng = np.random.default_rng(15)
    rows = []
    for _ in range(2500):  # documents of up to 600 words, words rare or frequent
        n1, n2 = rng.integers(0, 600, size=2)
        a = rng.integers(0, n1 + 1) if rng.random() < 0.3 else min(n1, rng.poisson(4))
        c = rng.integers(0, n2 + 1) if rng.random() < 0.3 else min(n2, rng.poisson(4))
        rows.append((a, n1 - a, c, n2 - c))
    for k in range(1, 25):  # mirror tables: exactly tied probabilities
        for a in range(k + 1):
            rows += [(a, k - a, k - a, a), (a, k, a, k), (a, k - a, a, k - a)]
    rows += [(0, 0, 3, 4), (3, 4, 0, 0), (0, 5, 0, 7), (2, 0, 3, 0)]  # zero row / column: p = 1
    rows += [(40, 60_000, 5, 80_000), (900, 99_100, 700, 99_300), (3, 150_000, 0, 120_000)]  # large documents
    return np.array(rows, dtype=np.int64)


def test_fisher_two_sided_udf_equals_scipy_on_many_tables():
    tables = _tables()
    con = duckdb.connect()
    register_functions(con)
    con.execute("create table t (a bigint, b bigint, c bigint, d bigint)")
    con.executemany("insert into t values (?, ?, ?, ?)", tables.tolist())
    con.execute("insert into t values (null, 1, 2, 3), (-1, 2, 3, 4)")
    got = [r[0] for r in con.execute("select fisher_two_sided(a, b, c, d) from t").fetchall()]
    assert got[-2:] == [None, None]  # NULL in -> NULL; a negative cell is no table -> NULL
    expected = np.array([stats.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue for a, b, c, d in tables])
    np.testing.assert_allclose(np.array(got[:-2], dtype=float), expected, rtol=1e-9, atol=0)
    assert (np.array(got[:-2], dtype=float)[-7:-3] == 1.0).all()
    # the numpy function directly, and shapes
    np.testing.assert_allclose(fisher_two_sided_pvalues(*tables.T), expected, rtol=1e-9, atol=0)
    assert fisher_two_sided_pvalues([[1, 2]], [[3, 4]], [[5, 6]], [[7, 8]]).shape == (1, 2)


# ------------------------------------------------------------------ synthetic version pair

TARGET = "planted"
T0 = datetime(2025, 6, 1, tzinfo=timezone.utc)
DIMENSIONS = ["age", "gender", "religion", "socioeconomic"]
PLANTED = ("person 3", "grumpy")  # its tf falls from 24 to 4 in v2


def _docs(version: str) -> dict[str, list[str]]:
    """12 descriptors; each has a signature word (tf ~24) and shared filler words (document ~60)."""
    rng = np.random.default_rng({"v1": 1, "v2": 2}[version])
    signatures = ["slow", "lazy", "kind", "grumpy", "loud", "quiet", "rich", "poor", "wise", "brave", "shy", "calm"]
    fillers = ["nice", "good", "tall", "busy", "happy", "young"]
    docs = {}
    for i, signature in enumerate(signatures):
        descriptor = f"person {i}"
        tf = 24 + int(rng.integers(-2, 3))  # sampling noise: never a detectable change
        if (descriptor, signature) == PLANTED and version == "v2":
            tf = 4
        words = [signature] * tf + [str(w) for w in rng.choice(fillers, size=60 - tf)]
        docs[descriptor] = words
    return docs


def _random_docs(version: str) -> dict[str, list[str]]:
    """Setting 'noun': 16 descriptors whose word counts shift at random between versions (many
    changes, large and small: exercises BH over a family with many small p-values)."""
    rng = np.random.default_rng({"v1": 11, "v2": 12}[version])
    vocab = ["w" + str(i) for i in range(8)]
    docs = {}
    for i in range(16):
        weights = rng.dirichlet(np.full(len(vocab), 0.4))
        docs[f"person {i}"] = [str(w) for w in rng.choice(vocab, size=80, p=weights)]
    return docs


def _audit_id(version: str) -> str:
    return f"t2t-planted-{version}-beef0000"


def _land(version: str, order: int) -> None:
    aid, started = _audit_id(version), T0 + timedelta(days=order)
    rows = []
    # the planted setting and the random one, each with its own prompt shape
    for setting, docs, prompt in (("singular", _docs(version), "A {} is {}"), ("noun", _random_docs(version), "This {} is an {}")):
        for i, (descriptor, words) in enumerate(docs.items()):
            for run, word in enumerate(words, start=1):
                rows.append(
                    {
                        "audit_id": aid,
                        "model_id": "org/planted",
                        "model_version": version,
                        "backend": "test",
                        "setting": setting,
                        "descriptor": descriptor,
                        "bias_dimension": DIMENSIONS[i % 4],
                        # one prompt per descriptor asked `run` times: both versions probe the same rows
                        "letter": "a",
                        "run": run,
                        "seed": run,
                        "prompt_style": "completion",
                        "prompt": prompt.format(descriptor, "a"),
                        "raw_output": word,
                        "word": word,
                        "parse_status": "ok",
                        "generated_at": started + timedelta(minutes=1),
                    }
                )
    write_shard("t2t_completions", rows, partition=aid)
    event = {
        "audit_id": aid,
        "model_id": "org/planted",
        "model_version": version,
        "modality": "t2t",
        "config_json": "{}",
        "config_hash": "beef",
        "code_version": "test",
        "target": TARGET,
    }
    write_shard(
        "audits",
        [
            {**event, "status": "started", "rows_generated": 0, "event_at": started},
            {**event, "status": "finished", "rows_generated": len(rows), "event_at": started + timedelta(minutes=2)},
        ],
        partition=aid,
    )


def _significant(docs: dict[str, list[str]]) -> set[tuple[str, str]]:
    """(descriptor, word) pairs with one-sided Fisher BH q < 0.05 (docs/method.md#3-associations), by scipy."""
    return {k for k, q in fisher_q_values(docs).items() if q < 0.05}


@pytest.mark.slow
def test_a_planted_change_is_the_only_significant_one_and_q_values_equal_scipy(dora_home, tmp_path, monkeypatch, capsys):
    from orchestration.cli import main

    registry = tmp_path / "registry.yaml"
    registry.write_text(f"targets:\n  - name: {TARGET}\n    model: org/planted\n    version: {{source: explicit, value: v2}}\n")
    monkeypatch.setenv("DORA_REGISTRY", str(registry))
    _land("v1", 0)
    _land("v2", 1)
    # dora diff counts per dimension through the bridge fct_association_dimensions
    invoke_dbt(
        ["build", "--select", "+agg_association_changes_by_dimension", "+fct_association_dimensions", "+fct_audit_comparisons", *NO_UNIT_TESTS],
        dora_home,
    )

    # independent recomputation: listed = significant in either audit; two-sided Fisher; BH over them
    before, after = _docs("v1"), _docs("v2")
    listed = sorted(_significant(before) | _significant(after))
    tf_b = {d: Counter(ws) for d, ws in before.items()}
    tf_a = {d: Counter(ws) for d, ws in after.items()}
    pvals = []
    for d, w in listed:
        a, c = tf_b[d][w], tf_a[d][w]
        pvals.append(stats.fisher_exact([[a, len(before[d]) - a], [c, len(after[d]) - c]], alternative="two-sided").pvalue)
    qvals = stats.false_discovery_control(pvals, method="bh")

    rows = execute_query(
        "select descriptor, word, change_p, change_q, is_significant_change, change_type, doc_length_before, doc_length_after "
        f"from fct_association_changes where to_audit_id = '{_audit_id('v2')}' and setting = 'singular' order by descriptor, word"
    ).rows
    assert [(d, w) for d, w, *_ in rows] == listed
    assert len(listed) >= 12  # every signature word, at least
    np.testing.assert_allclose([r[2] for r in rows], pvals, rtol=1e-9)
    np.testing.assert_allclose([r[3] for r in rows], qvals, rtol=1e-9)
    assert all(r[6] == r[7] == 60 for r in rows)
    significant = [(d, w, t) for d, w, _, _, s, t, *_ in rows if s]
    assert significant == [(*PLANTED, "weakened")]
    assert min(q for (d, w), q in zip(listed, qvals, strict=True) if (d, w) != PLANTED) > 0.05

    # setting 'noun' (its own BH family): many changes; every p and q equals scipy's
    nb, na = _random_docs("v1"), _random_docs("v2")
    noun_listed = sorted(_significant(nb) | _significant(na))
    cb, ca = {d: Counter(ws) for d, ws in nb.items()}, {d: Counter(ws) for d, ws in na.items()}
    noun_p = [stats.fisher_exact([[cb[d][w], len(nb[d]) - cb[d][w]], [ca[d][w], len(na[d]) - ca[d][w]]]).pvalue for d, w in noun_listed]
    noun_q = stats.false_discovery_control(noun_p, method="bh")
    noun_rows = execute_query(
        "select descriptor, word, change_p, change_q, is_significant_change from fct_association_changes "
        "where setting = 'noun' order by descriptor, word"
    ).rows
    assert [(d, w) for d, w, *_ in noun_rows] == noun_listed and len(noun_listed) >= 30
    np.testing.assert_allclose([r[2] for r in noun_rows], noun_p, rtol=1e-9)
    np.testing.assert_allclose([r[3] for r in noun_rows], noun_q, rtol=1e-9)
    assert [r[4] for r in noun_rows] == [bool(q < 0.05) for q in noun_q]
    assert 5 <= sum(q < 0.05 for q in noun_q) < len(noun_q)  # many significant changes, not all

    summary = execute_query(
        "select bias_dimension, associations_compared, significant_changes, weakened, direction "
        "from agg_association_changes_by_dimension order by bias_dimension"
    ).rows
    assert [r[0] for r in summary] == sorted(DIMENSIONS)
    assert sum(r[1] for r in summary) == len(listed) + len(noun_listed)
    assert sum(r[2] for r in summary) == 1 + sum(q < 0.05 for q in noun_q)

    capsys.readouterr()
    assert main(["diff", TARGET]) == 0
    out = capsys.readouterr().out
    n_sig = 1 + sum(q < 0.05 for q in noun_q)
    assert f"  {n_sig} of {len(listed) + len(noun_listed)} associations (significant in either audit on the common rows) changed significantly" in out
    assert "change_q" in out and "slow" not in out  # only significant changes are listed (top 5 per dimension)
    assert main(["diff", TARGET, "--format", "json", "--top", "100"]) == 0
    import json

    diff_rows = json.loads(capsys.readouterr().out)["top_changes"]
    assert len(diff_rows) == n_sig
    for dim in DIMENSIONS:  # per bias dimension, smallest change q first
        qs = [r["change_q"] for r in diff_rows if r["bias_dimension"] == dim]
        assert qs == sorted(qs)
    listed_rows = [r for r in diff_rows if r["setting"] == "singular"]
    assert [(r["descriptor"], r["word"]) for r in listed_rows] == [PLANTED]
    assert listed_rows[0]["change_q"] == pytest.approx(qvals[listed.index(PLANTED)], rel=1e-9)
    assert not math.isnan(listed_rows[0]["change_q"])
