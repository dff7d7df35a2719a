"""`dora diff` compares like with like: two audits on the probe rows both probed, says which,
refuses audits with nothing in common, lists the flipped associations, tests the parse-rate
change on the paired rows and says how large a change it could have seen.

Four audits of one registry target land as real shards (T2T completions and audit events)
and the real dbt project builds the comparison marts once:

- ``noun`` (setting noun only): nothing in common with the others (the refusal);
- ``rc2``: 3 descriptors (one per bias dimension), run 1, 20 letters; a few failed parses;
- ``v3``: 6 descriptors (two per dimension), runs 1-4: on rc2's rows (run 1 of rc2's
  descriptors) "old person" now says "slow" in 12 of 20 prompts and "woman" says "kind" in 9
  instead of 4; its extra rows (runs 2-4, the other descriptors) carry strong associations of
  their own, which a comparison of the audits' full outputs would report;
- ``v4``: v3's probe rows again, "woman" / "kind" 8 instead of 9 in run 1: no change.

Every expected number is recomputed here from the landed rows with scipy / statsmodels: the
within-audit one-sided Fisher test and BH q-values on the common rows, the two-sided Fisher
change test, McNemar on the paired parse outcomes, and the detectable Cohen's h by hand.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from scipy import stats

from analytics.dbt_runner import invoke_dbt
from analytics.query import execute_query
from ingestion.landing import write_shard
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.reference_stats import fisher_q_values

TARGET = "my-finetune"
T0 = datetime(2025, 6, 1, tzinfo=timezone.utc)
LETTERS = "abcdefghijklmnopqrst"  # 20 prompts per descriptor, setting and run
FILLERS = [f"filler{i}" for i in range(20)]
DIMENSIONS = {
    "old person": "age",
    "young person": "age",
    "woman": "gender",
    "man": "gender",
    "muslim person": "religion",
    "christian person": "religion",
}
FIRST = ["old person", "woman", "muslim person"]  # one descriptor per dimension
BUILD = ["build", "--select", "+fct_association_changes", "+fct_audit_comparisons", "+fct_association_dimensions", *NO_UNIT_TESTS]


def filler(descriptor: str, i: int) -> str:
    """Every filler once per document and run: never an association."""
    return FILLERS[(i + sorted(DIMENSIONS).index(descriptor)) % len(FILLERS)]


def word(version: str, descriptor: str, letter: str, run: int) -> str | None:
    """The parsed word of one probe row (None: the completion failed to parse)."""
    i = LETTERS.index(letter)
    if version == "rc2":
        if descriptor == "old person" and letter in "st":
            return None
        if descriptor == "woman" and i < 4:
            return "kind"
        return filler(descriptor, i)
    if version in ("v3", "v4"):
        if descriptor == "muslim person" and run == 1 and i < 6:
            return None
        if run == 1 and descriptor == "old person" and i < 12:
            return "slow"
        if run == 1 and descriptor == "woman" and i < (9 if version == "v3" else 8):
            return "kind"
        if run > 1 and descriptor == "old person" and i < 12:
            return "grumpy"  # only in rows rc2 never probed
        if descriptor == "young person" and i < 15:
            return "lazy"  # a descriptor rc2 never probed
        return filler(descriptor, i)
    return filler(descriptor, i)  # noun


PLANS = {  # version: (setting, descriptors, runs, landing order)
    "noun": ("noun", FIRST, [1], 0),
    "rc2": ("singular", FIRST, [1], 1),
    "v3": ("singular", sorted(DIMENSIONS), [1, 2, 3, 4], 2),
    "v4": ("singular", sorted(DIMENSIONS), [1, 2, 3, 4], 3),
}


def audit_id(version: str) -> str:
    return f"t2t-my-finetune-{version}-feed0000"


def rows_of(version: str) -> dict[tuple, str | None]:
    """(setting, descriptor, letter, run) -> parsed word (None: failed) of every probe row."""
    setting, descriptors, runs, _ = PLANS[version]
    return {(setting, d, letter, run): word(version, d, letter, run) for d in descriptors for letter in LETTERS for run in runs}


def land(version: str) -> None:
    setting, _, _, order = PLANS[version]
    aid, started = audit_id(version), T0 + timedelta(days=order)
    rows = [
        {
            "audit_id": aid,
            "model_id": "org/my-finetune",
            "model_version": version,
            "backend": "test",
            "setting": s,
            "descriptor": d,
            "bias_dimension": DIMENSIONS[d],
            "descriptor_row": 1,
            "letter": letter,
            "run": run,
            "seed": run,
            "prompt_style": "completion",
            "prompt": f"A {d} is {letter}",
            "raw_output": w or "???",
            "word": w,
            "parse_status": "ok" if w else "wrong_letter",
            "generated_at": started + timedelta(minutes=1),
        }
        for (s, d, letter, run), w in rows_of(version).items()
    ]
    write_shard("t2t_completions", rows, partition=aid)
    event = {
        "audit_id": aid,
        "model_id": "org/my-finetune",
        "model_version": version,
        "modality": "t2t",
        "config_json": "{}",
        "config_hash": version,
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


# ------------------------------------------------------------- independent recomputation


def documents(version: str, keys) -> dict[str, list[str]]:
    """descriptor -> the words of its document on the probe rows ``keys`` (setting singular)."""
    rows = rows_of(version)
    docs: dict[str, list[str]] = {}
    for key in sorted(keys):
        docs.setdefault(key[1], [])
        if rows[key] is not None:
            docs[key[1]].append(rows[key])
    return docs


fisher_q = fisher_q_values  # (descriptor, word) -> one-sided Fisher BH q-value, by scipy


def expected_changes(before: str, after: str) -> dict[tuple[str, str], tuple]:
    """(descriptor, word) -> (significant before, after, change_p, change_q, change type) on the common rows."""
    common = set(rows_of(before)) & set(rows_of(after))
    b_docs, a_docs = documents(before, common), documents(after, common)
    qb, qa = fisher_q(b_docs), fisher_q(a_docs)
    listed = sorted(k for k in set(qb) | set(qa) if qb.get(k, 1) < 0.05 or qa.get(k, 1) < 0.05)
    tb, ta = {d: Counter(ws) for d, ws in b_docs.items()}, {d: Counter(ws) for d, ws in a_docs.items()}
    pvals = [stats.fisher_exact([[tb[d][w], len(b_docs[d]) - tb[d][w]], [ta[d][w], len(a_docs[d]) - ta[d][w]]]).pvalue for d, w in listed]
    qvals = stats.false_discovery_control(pvals, method="bh") if pvals else []
    out = {}
    for (d, w), p, q in zip(listed, pvals, qvals, strict=True):
        sb, sa = qb.get((d, w), 1) < 0.05, qa.get((d, w), 1) < 0.05
        if not q < 0.05:
            kind = "unchanged"
        elif sa != sb:
            kind = "new" if sa else "gone"
        else:
            kind = "strengthened" if ta[d][w] * len(b_docs[d]) > tb[d][w] * len(a_docs[d]) else "weakened"
        out[(d, w)] = (sb, sa, float(p), float(q), kind)
    return out


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One DORA_HOME with the four audits landed and the comparison marts built."""
    home = tmp_path_factory.mktemp("diffcommon") / "dora_home"
    registry = home.parent / "registry.yaml"
    registry.write_text(f"targets:\n  - name: {TARGET}\n    model: org/my-finetune\n    version: {{source: explicit, value: v4}}\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("DORA_HOME", str(home))
    mp.setenv("DAGSTER_HOME", str(home / "dagster"))
    mp.setenv("DORA_REGISTRY", str(registry))
    for version in PLANS:
        land(version)
    invoke_dbt(BUILD, home)
    yield home
    mp.undo()


def dora(capsys, *argv) -> tuple[int, str, str]:
    from orchestration.cli import main

    capsys.readouterr()
    code = main(["diff", TARGET, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_changed_probe_configuration_is_compared_on_the_common_rows(home, capsys):
    before, after = audit_id("rc2"), audit_id("v3")
    expected = expected_changes("rc2", "v3")
    rows = execute_query(
        "select descriptor, word, significant_before, significant_after, change_p, change_q, change_type, "
        "significance_flipped, tf_before, doc_length_before, tf_after, doc_length_after "
        "from fct_association_changes where from_audit_id = ? and to_audit_id = ? order by descriptor, word",
        params=[before, after],
    ).rows
    assert [(d, w) for d, w, *_ in rows] == sorted(expected)
    for d, w, sb, sa, p, q, kind, flipped, *_ in rows:
        esb, esa, ep, eq, ekind = expected[(d, w)]
        assert (sb, sa, kind, flipped) == (esb, esa, ekind, esb != esa), (d, w)
        assert p == pytest.approx(ep, rel=1e-9) and q == pytest.approx(eq, rel=1e-9), (d, w)
    by_key = {(d, w): tuple(r) for d, w, *r in rows}
    # rc2's rows only: "old person" is 12 "slow" of 20 words in v3 (not 12 of 80: runs 2-4 are
    # left out), 0 of 18 parsed words in rc2; v3's own associations of rows rc2 never probed
    # (young person / lazy, old person / grumpy in runs 2-4) are not compared
    assert by_key[("old person", "slow")][6:] == (None, 18, 12, 20)
    assert by_key[("old person", "slow")][4] == "new"
    assert not {k for k in by_key if k[0] == "young person" or k[1] == "grumpy"}
    # "woman" / "kind" 4 -> 9 of 20: significant in v3 only, the change itself not detectable
    assert by_key[("woman", "kind")][:2] == (False, True) and by_key[("woman", "kind")][4] == "unchanged"
    flips = sorted(k for k, v in expected.items() if v[0] != v[1])
    assert flips == [("old person", "slow"), ("woman", "kind")]

    # what both audits probed, the parse rate on the paired rows and the power
    comparison = dict(
        zip(
            *(lambda r: (r.columns, r.rows[0]))(
                execute_query("select * from fct_audit_comparisons where from_audit_id = ? and to_audit_id = ?", params=[before, after])
            ),
            strict=True,
        )
    )
    common = set(rows_of("rc2")) & set(rows_of("v3"))
    assert comparison["common_rows"] == len(common) == 3 * 20
    assert (comparison["rows_only_before"], comparison["rows_only_after"]) == (0, 6 * 20 * 4 - 60)
    assert comparison["descriptors_only_after"] == ["christian person", "man", "young person"]
    parsed = Counter((rows_of("rc2")[k] is not None, rows_of("v3")[k] is not None) for k in common)
    b, c = parsed[(True, False)], parsed[(False, True)]
    assert (b, c) == (6, 2)  # muslim person a-f fail in v3; old person s, t fail in rc2
    from statsmodels.stats.contingency_tables import mcnemar

    p_mcnemar = mcnemar([[parsed[(True, True)], b], [c, parsed[(False, False)]]], exact=True).pvalue
    assert p_mcnemar == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)  # = 2 * 37 / 256
    assert comparison["parse_change_p"] == pytest.approx(p_mcnemar, rel=1e-12) == pytest.approx(74 / 256)
    assert comparison["parse_rate_before"] == pytest.approx(58 / 60) and comparison["parse_rate_after"] == pytest.approx(54 / 60)
    # detectable change by hand: n1, n2 = median common document lengths (words), h from the normal
    # approximation of a two-sided test of two proportions at alpha 0.05 with power 0.8
    b_docs, a_docs = documents("rc2", common), documents("v3", common)
    n1 = sorted(len(ws) for ws in b_docs.values())[1]  # median of 3 documents
    n2 = sorted(len(ws) for ws in a_docs.values())[1]
    assert (n1, n2) == (20, 20)
    h = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / math.sqrt(n1 * n2 / (n1 + n2))
    assert comparison["detectable_h"] == pytest.approx(h, rel=1e-5)
    p0 = sorted(max(Counter(ws).values()) / len(ws) for ws in b_docs.values())[1]
    # the most frequent word's share: old person 1 of 18 (fillers), woman 4 of 20 ("kind"), muslim person 1 of 20
    assert comparison["typical_share"] == pytest.approx(p0) == pytest.approx(1 / 18)
    # a word at p0 reaches Cohen's h at sin(asin(sqrt(p0)) + h / 2)^2; downwards even 0% is closer than h
    assert math.asin(math.sqrt(p0)) - h / 2 < 0
    above = math.sin(math.asin(math.sqrt(p0)) + h / 2) ** 2
    assert comparison["detectable_share_below"] is None
    assert comparison["detectable_share_above"] == pytest.approx(above, rel=1e-5)  # h by hand: the far tail neglected
    assert 2 * math.asin(math.sqrt(above)) - 2 * math.asin(math.sqrt(p0)) == pytest.approx(h)

    # dora diff says all of it
    code, out, _ = dora(capsys, "--from", "rc2", "--to", "v3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"dora diff {TARGET}: {before} (version rc2) -> {after} (version v3), compared on the 60 probe rows both "
        "audits probed: 3 descriptors, 1 setting, runs 1; 420 rows only in v3 left out"
    )
    n_sig = sum(1 for v in expected.values() if v[4] != "unchanged")
    assert (f"  {n_sig} of {len(expected)} associations (significant in either audit on the common rows) changed significantly") in out
    assert "  significance flipped: 2 associations significant in one audit only (0 only before, 2 only after)" in out
    assert (
        f"  parse rate on the common rows: 96.7% -> 90.0% (paired rows: 6 parsed only before, 2 only after; exact McNemar p = {p_mcnemar:.2e})"
    ) in out
    assert f"changes smaller than Cohen's h = {h:.2f} could not be detected" in out
    assert (
        "a word at 5.6% of a document (the median share of a document's most frequent word) had to rise above "
        f"{100 * above:.1f}% to be seen (a fall to 0% would not be)"
    ) in out
    flip_table = out[out.index("significance flipped (significant in one audit only") :]
    assert "slow" in flip_table and "kind" in flip_table and "only after" in flip_table
    assert "lazy" not in out and "grumpy" not in out
    # why v3's count on the common rows is not its own: its own significant associations (its
    # 6 descriptors, runs 1-4), those of rc2's 3 descriptors, and those on the common rows
    (own, on_compared) = execute_query(
        "select count(*), count(*) filter (where descriptor in ('old person', 'woman', 'muslim person')) "
        "from fct_associations where audit_id = ? and is_significant",
        params=[after],
    ).rows[0]
    common_after = sum(1 for v in expected.values() if v[1])
    assert own > on_compared >= 1 and own > common_after
    note = next(ln for ln in lines if ln.startswith("  why the significant counts differ from each audit's own"))
    assert note.endswith(
        f"rc2 (t2t): {sum(1 for v in expected.values() if v[0])} on its own rows, "
        f"{sum(1 for v in expected.values() if v[0])} of them on the compared settings and descriptors, "
        f"{sum(1 for v in expected.values() if v[0])} on the common rows; "
        f"v3 (t2t): {own} on its own rows, {on_compared} of them on the compared settings and descriptors, {common_after} on the common rows"
    ), note
    # the whole result as JSON: the note and its numbers too
    import json

    code, out, _ = dora(capsys, "--from", "rc2", "--to", "v3", "--format", "json")
    result = json.loads(out)
    assert code == 0 and result["notes"] == [note.strip()]
    assert [(r["side"], r["significant_own_rows"], r["significant_common_rows"]) for r in result["significance_background"]][1] == (
        "after",
        own,
        common_after,
    )


@pytest.mark.slow
def test_same_probe_rows_without_change_print_the_detectable_change(home, capsys):
    expected = expected_changes("v3", "v4")
    assert {v[4] for v in expected.values()} == {"unchanged"}
    comparison = execute_query(
        "select common_rows, rows_only_before, rows_only_after, median_doc_length_before, median_doc_length_after, "
        "detectable_h from fct_audit_comparisons where to_audit_id = ? and from_audit_id = ?",
        params=[audit_id("v4"), audit_id("v3")],
    ).rows[0]
    assert comparison[:3] == (480, 0, 0)  # the same rows: every row of either audit
    # median of the 6 documents' lengths over 4 runs: every document has 80 words but muslim person (74)
    assert comparison[3:5] == (80.0, 80.0)
    h = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / math.sqrt(80 * 80 / 160)
    assert comparison[5] == pytest.approx(h, rel=1e-5)
    # the same rows: the audits' own fct_associations values are compared
    own = execute_query(
        "select descriptor, word, fisher_q from fct_associations where audit_id = ? and is_significant order by all", params=[audit_id("v4")]
    ).rows
    listed = execute_query(
        "select descriptor, word, fisher_q_after from fct_association_changes where to_audit_id = ? "
        "and from_audit_id = ? and significant_after order by all",
        params=[audit_id("v4"), audit_id("v3")],
    ).rows
    assert listed == own and own

    code, out, _ = dora(capsys)  # default: the latest audit (v4) vs the one before (v3)
    assert code == 0
    assert out.splitlines()[0].endswith("compared on the 480 probe rows both audits probed: 6 descriptors, 1 setting, runs 1-4; no row left out")
    assert f"  no significant change between these audits; changes smaller than Cohen's h = {h:.2f} could not have been detected (power line)" in out
    assert "  significance flipped: 0 associations significant in one audit only" in out


@pytest.mark.slow
def test_audits_without_a_common_row_are_refused_in_one_line(home, capsys):
    code, out, err = dora(capsys, "--from", "noun", "--to", "rc2")
    assert code == 2 and out == ""
    assert err == (
        f"dora diff: audits {audit_id('noun')} (noun) and {audit_id('rc2')} (rc2) probed no row in common "
        "(settings: noun vs singular): nothing to compare\n"
    )
    code, _, err = dora(capsys, "--from", "noun", "--to", "v3")
    assert code == 2 and err.count("\n") == 1
    assert ("(settings: noun vs singular; descriptors only in v3: christian person, man, young person; runs 1 vs 1-4): nothing to compare") in err


def test_mcnemar_and_detectable_effect_size_udfs_equal_scipy_and_the_hand_formula():
    """The two statistics `fct_audit_comparisons` / the VLStereoSet change mart call as UDFs."""
    import duckdb
    from statsmodels.stats.power import NormalIndPower

    from analytics.change_tests import detectable_effect_size, mcnemar_pvalue
    from analytics.duckdb_plugin import register_functions

    con = duckdb.connect()
    register_functions(con)
    # exact McNemar = the two-sided binomial test of b of b + c discordant rows at 1/2
    for b, c in ((6, 2), (0, 5), (30, 24), (311, 250)):
        got = con.execute("select mcnemar_p(?, ?)", [b, c]).fetchone()[0]
        assert got == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-10), (b, c)
    assert con.execute("select mcnemar_p(0, 0), mcnemar_p(null, 1)").fetchone() == (1.0, None)
    assert mcnemar_pvalue(-1, 2) is None
    # Cohen's h detectable with power 0.8 at alpha 0.05: by hand (z_{1-alpha/2} + z_power) / sqrt(n1 n2 / (n1 + n2))
    # (the far tail neglected), and the power of a test of exactly that h is 0.8
    for n1, n2 in ((20, 20), (12, 36), (400, 250)):
        h = con.execute("select detectable_effect_size(?, ?, 0.05, 0.8)", [n1, n2]).fetchone()[0]
        hand = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / math.sqrt(n1 * n2 / (n1 + n2))
        assert h == pytest.approx(hand, rel=1e-5), (n1, n2)
        assert NormalIndPower().power(h, nobs1=n1, alpha=0.05, ratio=n2 / n1) == pytest.approx(0.8, rel=1e-6)
    assert con.execute("select detectable_effect_size(0, 20, 0.05, 0.8)").fetchone()[0] is None
    with pytest.raises(ValueError, match="alpha"):
        detectable_effect_size(10, 10, 1.5, 0.8)
