"""Versioned audits: append-only history, fct_association_changes, `dora diff`, collapse checks,
and (slow) two versions of the real embedded model audited through the sensor.

The hand-made fixture lands three audits (v1, v2, v3) of one registry target as real landing
shards and builds the real dbt project; the expected change types are recomputed here from
first principles (tf-idf, scipy's Fisher exact test and BH q-values, the `change_type` rules)
and some are also fixed by hand, so every type is exercised.
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

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
TARGET = "fixture"
#: the models (and their tests) these tests read: the diff marts and everything upstream of them
# dora diff counts per dimension through the bridge fct_association_dimensions
BUILD = [
    "build",
    "--select",
    "+agg_association_changes_by_dimension",
    "+fct_association_dimensions",
    "+fct_audit_comparisons",
    "+agg_biasdora_drift",
    "+agg_biasdora_audits",
    *NO_UNIT_TESTS,
]
DIMENSIONS = {"old person": "age", "young person": "age", "rich person": "socioeconomic", "poor person": "socioeconomic"}

#: documents (descriptor -> words) of each audit, setting 'singular'
DOCS = {
    "v1": {
        "old person": ["slow"] * 6 + ["wise"] * 2 + ["kind"] * 2 + ["grumpy"] * 2,
        "rich person": ["greedy"] * 6 + ["smart"] * 2 + ["kind"] * 2 + ["busy"] * 2,
        "young person": ["lazy"] * 6 + ["loud"] * 2 + ["busy"] * 2 + ["smart"] * 2,
        "poor person": ["hungry"] * 6 + ["kind"] * 2 + ["tired"] * 2 + ["sad"] * 2,
    },
    "v2": {
        "old person": ["slow"] * 8 + ["wise"] * 2 + ["kind"] * 2,
        "rich person": ["greedy"] * 4 + ["smart"] * 2 + ["kind"] * 2 + ["busy"] * 2 + ["rude"] * 2,
        "young person": ["loud"] * 6 + ["lazy"] * 2 + ["busy"] * 2 + ["smart"] * 2,
        "poor person": ["hungry"] * 6 + ["kind"] * 2 + ["tired"] * 2 + ["sad"] * 2,
    },
    # v3 collapses: most completions fail to parse, nothing is significant any more
    "v3": {
        "old person": ["slow", "wise"],
        "rich person": ["greedy", "kind"],
        "young person": ["loud", "busy"],
        "poor person": ["hungry", "sad"],
    },
}
FAILED_PARSES = {"v1": 0, "v2": 0, "v3": 10}  # per descriptor


def audit_id(version: str) -> str:
    return f"t2t-fixture-{version}-cafe0000"


def land_audit(version: str, order: int) -> None:
    """Land one audit's completions and its started / finished events (target 'fixture')."""
    aid = audit_id(version)
    started = T0 + timedelta(days=order)
    rows = []
    for descriptor, words in DOCS[version].items():
        statuses = [("ok", w) for w in words] + [("wrong_letter", "zzz")] * FAILED_PARSES[version]
        for run, (status, word) in enumerate(statuses, start=1):
            rows.append(
                {
                    "audit_id": aid,
                    "model_id": "org/fixture-model",
                    "model_version": version,
                    "backend": "test",
                    "setting": "singular",
                    "descriptor": descriptor,
                    # one prompt (letter) per descriptor, asked 12 times: the same probe rows in every
                    # version, so the versions are compared on all of them
                    "bias_dimension": DIMENSIONS[descriptor],
                    "letter": "a",
                    "run": run,
                    "seed": run,
                    "prompt_style": "completion",
                    "prompt": f"An {descriptor} is a",
                    "raw_output": word,
                    "word": word if status == "ok" else None,
                    "parse_status": status,
                    "generated_at": started + timedelta(minutes=1),
                }
            )
    write_shard("t2t_completions", rows, partition=aid)
    event = {
        "audit_id": aid,
        "model_id": "org/fixture-model",
        "model_version": version,
        "modality": "t2t",
        "config_json": "{}",
        "config_hash": "cafe",
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


def associations(docs: dict[str, list[str]]) -> dict[tuple[str, str], tuple[float, float]]:
    """(descriptor, word) -> (tfidf, BH q-value), per docs/method.md#3-associations, with scipy."""
    tf = {d: Counter(ws) for d, ws in docs.items() if ws}
    n = len(tf)
    df = Counter(w for c in tf.values() for w in c)
    word_total = Counter(w for ws in docs.values() for w in ws)
    grand = sum(word_total.values())
    keys, pvals, tfidf = [], [], {}
    for d, counts in tf.items():
        length = sum(counts.values())
        for w, a in counts.items():
            b, c = length - a, word_total[w] - a
            p = stats.fisher_exact([[a, b], [c, grand - length - c]], alternative="greater")[1]
            keys.append((d, w))
            pvals.append(p)
            tfidf[(d, w)] = a * math.log(n / df[w])
    qvals = stats.false_discovery_control(pvals, method="bh")
    return {k: (tfidf[k], float(q)) for k, q in zip(keys, qvals, strict=True)}


def expected_changes(before: str, after: str) -> dict[tuple[str, str], str]:
    """The change_type rules (dbt doc block `change_type`) applied to the recomputed stats.

    Listed: significant (one-sided Fisher BH q < 0.05) in either audit; change test: two-sided
    Fisher on [[tf_before, rest_before], [tf_after, rest_after]] with BH over the listed ones.
    """
    a, b = associations(DOCS[before]), associations(DOCS[after])
    listed = sorted(k for k in set(a) | set(b) if (k in a and a[k][1] < 0.05) or (k in b and b[k][1] < 0.05))
    if not listed:
        return {}
    tf_b = {d: Counter(ws) for d, ws in DOCS[before].items()}
    tf_a = {d: Counter(ws) for d, ws in DOCS[after].items()}
    pvals = [
        stats.fisher_exact([[tf_b[d][w], len(DOCS[before][d]) - tf_b[d][w]], [tf_a[d][w], len(DOCS[after][d]) - tf_a[d][w]]]).pvalue
        for d, w in listed
    ]
    qvals = stats.false_discovery_control(pvals, method="bh")
    out = {}
    for key, q in zip(listed, qvals, strict=True):
        sb = key in a and a[key][1] < 0.05
        sa = key in b and b[key][1] < 0.05
        d, w = key
        share_up = tf_a[d][w] * len(DOCS[before][d]) > tf_b[d][w] * len(DOCS[after][d])
        if not q < 0.05:
            kind = "unchanged"
        elif sa and not sb:
            kind = "new"
        elif sb and not sa:
            kind = "gone"
        else:
            kind = "strengthened" if share_up else "weakened"
        out[key] = kind
    return out


def mart_changes(before: str, after: str) -> dict[tuple[str, str], str]:
    rows = execute_query(
        f"select descriptor, word, change_type from fct_association_changes "
        f"where from_audit_id = '{audit_id(before)}' and to_audit_id = '{audit_id(after)}'"
    ).rows
    return {(d, w): t for d, w, t in rows}


@pytest.fixture
def fixture_registry(tmp_path, monkeypatch):
    path = tmp_path / "registry.yaml"
    path.write_text(
        "targets:\n"
        f"  - name: {TARGET}\n"
        "    model: org/fixture-model\n"
        "    version: {source: explicit, value: v3}\n"
        "    options: {biasdora: {checks: {significant_associations: 0.5}}}\n"
    )
    monkeypatch.setenv("DORA_REGISTRY", str(path))
    return path


@pytest.mark.slow
def test_versions_are_append_only_changes_have_the_right_types_and_dora_diff_shows_them(dora_home, fixture_registry, capsys):
    """Three audits of one target land one after another (v1, v2, then a collapsed v3), each
    followed by a dbt build: an audit's staged rows and associations never change when a later
    version lands; a first audit has no change to list and passes the parse-rate check;
    fct_association_changes agrees with the independent recomputation for every pair; `dora
    diff` shows the change summary, takes explicit pairs, and fails clearly; both collapse
    checks fail loudly on v3; `dora models list` shows the last audit; a rebuild is idempotent."""
    from orchestration.cli import main
    from orchestration.defs.audits.checks import check_result, judge_families
    from orchestration.families import FAMILIES

    def drift(check: str):
        """The drift check ``check``'s results for the fixture target and its asset check result."""
        results = [r for r in judge_families(FAMILIES)[0] if r.check == check and r.target == TARGET]
        spec = next(f.drift for f in FAMILIES if f.drift and check in [c.name for c in f.drift.checks])
        return results, check_result(spec.check(check), results)

    # --- v1 alone: nothing to compare
    land_audit("v1", 0)
    invoke_dbt(BUILD, dora_home)
    v1_sql = f"select * from fct_associations where audit_id = '{audit_id('v1')}' order by descriptor, word"
    v1_rows = execute_query(v1_sql).rows
    v1_completions_sql = f"select * from stg_t2t_completions where audit_id = '{audit_id('v1')}' order by all"
    v1_completions = execute_query(v1_completions_sql).rows
    assert len(v1_rows) == len(associations(DOCS["v1"])) == 16
    assert execute_query("select count(*) from fct_association_changes").rows == [(0,)]
    assert drift("parse_rate")[0] == [] and drift("parse_rate")[1].passed  # a first audit has nothing to compare with

    # --- v2 lands: no collapse; `dora diff` shows v1 -> v2
    land_audit("v2", 1)
    invoke_dbt(BUILD, dora_home)
    # a new version leaves the earlier audit's staged rows and associations as they were (the
    # sensor test's real-model audits rely on this check, built by the same dbt models)
    assert execute_query(v1_sql).rows == v1_rows
    assert execute_query(v1_completions_sql).rows == v1_completions
    assert [r.state for r in drift("parse_rate")[0]] == ["ok"] and drift("parse_rate")[1].passed
    assert [r.state for r in drift("significant_associations")[0]] == ["ok"]
    capsys.readouterr()  # drop dbt's log lines
    assert main(["diff", TARGET, "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert f"dora diff {TARGET}: {audit_id('v1')} (version v1) -> {audit_id('v2')} (version v2)" in out
    # documents of 12 words: tf 2 -> 6 is not a detectable change (the change test; the
    # planted-change fixture of tests/test_change_significance.py has a detectable one)
    assert set(expected_changes("v1", "v2").values()) == {"unchanged"}
    assert "  0 of 5 associations (significant in either audit on the common rows) changed significantly" in out
    assert ", compared on the 48 probe rows both audits probed: 4 descriptors, 1 setting, runs 1-12; no row left out" in out
    assert "new 0, gone 0, strengthened 0, weakened 0; no detectable change 5" in out
    assert "t2t age: 0 of 3 changed significantly: no detectable change" in out
    assert "no significant change between these audits" in out and "hungry" not in out

    # --- v3 lands (a collapsed version)
    land_audit("v3", 2)
    invoke_dbt(BUILD, dora_home)

    # every version keeps its own rows; v1's are exactly as before v2 and v3 landed
    assert execute_query(v1_sql).rows == v1_rows
    assert execute_query(v1_completions_sql).rows == v1_completions
    audits = execute_query(
        f"select model_version, audit_seq, previous_audit_id, completions, parse_rate, significant_associations "
        f"from agg_biasdora_audits where target = '{TARGET}' order by audit_seq"
    ).rows
    assert [(v, s, p) for v, s, p, *_ in audits] == [("v1", 1, None), ("v2", 2, audit_id("v1")), ("v3", 3, audit_id("v2"))]
    assert [(c, r) for *_, c, r, _ in audits] == [(48, 1.0), (48, 1.0), (48, 8 / 48)]

    # the hand-made expectations
    # (before the change test: slow strengthened, greedy weakened, loud new, lazy dropped by tf-idf / q
    # rules; the change test finds none of them detectable in 12-word documents: the flags
    # still show which association crossed q = 0.05; every change type is exercised by the
    # unit test of fct_association_changes.yml)
    v1_v2 = mart_changes("v1", "v2")
    assert v1_v2 == {
        k: "unchanged"
        for k in [("old person", "slow"), ("rich person", "greedy"), ("poor person", "hungry"), ("young person", "loud"), ("young person", "lazy")]
    }
    flags = execute_query(
        "select word, significant_before, significant_after, change_q > 0.05 from fct_association_changes "
        f"where to_audit_id = '{audit_id('v2')}' and descriptor = 'young person' order by word"
    ).rows
    assert flags == [("lazy", True, False, True), ("loud", False, True, True)]
    # ... and the whole mart agrees with the independent recomputation, for every pair
    for before, after in [("v1", "v2"), ("v2", "v3"), ("v1", "v3")]:
        assert mart_changes(before, after) == expected_changes(before, after), (before, after)
    assert set(mart_changes("v2", "v3").values()) == {"unchanged"}
    pairs = execute_query(
        "select from_model_version, to_model_version, is_previous, count(*) from fct_association_changes group by all order by all"
    ).rows
    assert [(f, t, p) for f, t, p, _ in pairs] == [("v1", "v2", True), ("v1", "v3", False), ("v2", "v3", True)]
    # before / after values come from the two audits' fct_associations rows
    row = execute_query(
        "select tf_before, tf_after, tfidf_before, tfidf_after, tfidf_change, bias_level_before "
        f"from fct_association_changes where to_audit_id = '{audit_id('v2')}' and descriptor = 'old person' and word = 'slow'"
    ).rows[0]
    assert row[:2] == (6, 8)
    assert row[2] == pytest.approx(6 * math.log(4)) and row[3] == pytest.approx(8 * math.log(4))
    assert row[4] == pytest.approx(2 * math.log(4)) and row[5] is None  # not judged in this fixture

    # the drift checks fail loudly on v3 (parse rate 8/48 vs 1.0 on the 48 common probe rows)
    results, failed = drift("parse_rate")
    assert [(r.state, r.value_before, r.value_after, r.units_compared) for r in results] == [("collapse", 1.0, 8 / 48, 48)]
    assert not failed.passed and failed.severity.value == "ERROR"
    assert (
        f"COLLAPSE: fixture biasdora (t2t) parse_rate: 1 -> 0.1667 on 48 common units, under the collapse ratio 0.5, version v2 -> v3 (audit {audit_id('v2')} -> {audit_id('v3')})"
        in failed.description
    )
    # the exact McNemar p of the 40 rows parsed in v2 only, BH over the audit's two tested checks
    assert results[0].change_p == pytest.approx(stats.binomtest(0, 40).pvalue)

    # explicit pair by model version, non-consecutive; json output
    capsys.readouterr()
    assert main(["diff", TARGET, "--from", "v1", "--to", "v3", "--format", "json"]) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    # the whole result, also when nothing changed significantly: header, compared rows, counts,
    # flips, the parse-rate test, the power line and the verdict
    assert result["top_changes"] == []  # no significant change: nothing listed
    assert result["header"].startswith(f"dora diff {TARGET}: {audit_id('v1')} (version v1) -> {audit_id('v3')} (version v3)")
    assert (result["before"]["audit_id"], result["after"]["audit_id"]) == (audit_id("v1"), audit_id("v3"))
    assert result["comparisons"][0]["common_rows"] == 48
    assert result["counts"]["unchanged"] == sum(result["counts"].values()) > 0
    (parse,) = result["parse_rate_tests"]
    assert (parse["parse_rate_before"], parse["parse_rate_after"], parse["parsed_before_only"]) == (1.0, 8 / 48, 40)
    assert parse["p"] == pytest.approx(stats.binomtest(40, 40, 0.5).pvalue)  # exact McNemar: 40 discordant rows, all one way
    (power,) = result["power"]
    assert power["line"].startswith("power (two-sided, alpha 0.05, power 80%)") and power["detectable_h"] > 0
    flips = result["flips"]
    assert flips["significant_after"] == 0 and flips["significant_before"] >= 2 and len(flips["rows"]) == flips["flipped"]
    assert result["verdict"]["state"] == "collapse"
    assert any(r.startswith("t2t parse rate on the common rows 0.167 < 0.5 x 1") for r in result["verdict"]["reasons"])
    # CSV: the same result flattened to path,value rows
    assert main(["diff", TARGET, "--from", "v1", "--to", "v3", "--format", "csv"]) == 0
    csv_rows = dict(line.split(",", 1) for line in capsys.readouterr().out.splitlines()[1:] if "," in line)
    assert csv_rows["verdict.state"] == "collapse" and csv_rows["comparisons.0.common_rows"] == "48"
    assert float(csv_rows["parse_rate_tests.0.p"]) == pytest.approx(parse["p"])
    # --fail-on: exit 1 on a collapse (either choice), 0 when the verdict is below the choice
    assert main(["diff", TARGET, "--from", "v1", "--to", "v3", "--fail-on", "collapse"]) == 1
    captured = capsys.readouterr()
    assert "  verdict: collapse (" in captured.out
    assert captured.err.startswith("dora diff: --fail-on collapse: collapse: t2t parse rate on the common rows")
    assert main(["diff", TARGET, "--from", "v1", "--to", "v3", "--fail-on", "change", "--format", "json"]) == 1
    capsys.readouterr()
    assert main(["diff", TARGET, "--from", "v1", "--to", "v2", "--fail-on", "change"]) == 0
    assert "  verdict: no change" in capsys.readouterr().out
    # --fail-on collapse judges with the drift checks' own ratios, as the target sets them
    # (options.biasdora.checks): parse rate 0.167 of 1 is no collapse at 0.1, one at 0.2
    original = fixture_registry.read_text()
    for ratio, parse_collapse in ((0.1, False), (0.2, True)):
        fixture_registry.write_text(original.replace("{significant_associations: 0.5}", f"{{parse_rate: {ratio}}}"))
        main(["diff", TARGET, "--from", "v1", "--to", "v3", "--format", "json", "--fail-on", "collapse"])
        reasons = json.loads(capsys.readouterr().out)["verdict"]["reasons"]
        said = [r for r in reasons if r.startswith("t2t parse rate on the common rows 0.167 <")]
        assert said == ([f"t2t parse rate on the common rows 0.167 < {ratio:g} x 1"] if parse_collapse else []), reasons
    fixture_registry.write_text(original)
    # clear errors
    assert main(["diff", "nobody"]) == 2
    assert "no finished audit of target 'nobody'; targets with audits: ['fixture']" in capsys.readouterr().err
    assert main(["diff", TARGET, "--from", "v3", "--to", "v1"]) == 2
    assert "must be an earlier audit" in capsys.readouterr().err
    assert main(["diff", TARGET, "--from", "v9"]) == 2
    assert "is neither an audit id nor a model version" in capsys.readouterr().err

    # dora models list: the target's current (explicit) version, each family's last audit and its checks
    assert main(["models", "list", "--format", "csv"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert (
        listed[0]
        == "target,family,modality,backend,model,version_source,current_version,last_audit,last_audit_version,last_status,last_at,checks,valid"
    )
    (biasdora,) = [line for line in listed if line.startswith("fixture,biasdora,")]
    assert biasdora.startswith(f"fixture,biasdora,t2t,transformers,org/fixture-model,explicit,v3,{audit_id('v3')},v3,finished,")
    assert f",{audit_id('v3')},v3,finished,2025-03-03 00:02,collapse: parse_rate," in biasdora  # then `valid`

    # re-building changes nothing (idempotent)
    before_rebuild = execute_query("select * from fct_association_changes order by all").rows
    invoke_dbt(["build", "--select", "dim_audits", "fct_association_changes", "fct_audit_comparisons", *NO_UNIT_TESTS], dora_home)
    assert execute_query("select * from fct_association_changes order by all").rows == before_rebuild


# ------------------------------------------------------------------ the real model (slow)


@pytest.mark.slow
def test_two_versions_of_the_embedded_model_through_the_sensor(dora_home, tmp_path, monkeypatch):
    """Register v1 of a local target, tick the sensor, run what it asks; ship v2, again.

    Guards the sensor path of a new version: one run request per new (target, version), none
    for a version already seen; each run's T2T audit is its own (audit id, seeds, landed rows),
    and the warehouse links v2 to v1 (``dim_audits``); a re-run of v2's partition generates
    nothing; an old version cannot be generated again.

    Each requested run is executed in-process with the request's partition key, run config
    and tags, for the assets this test reads: the T2T probe with the audit log, and, for v2,
    the dbt models up to ``agg_biasdora_audits`` (with ``dim_audits``; the full job, scoring included, is exercised by
    test_dagster_audit.py; the change types by the hand-made fixture above). v1's run does not
    build the warehouse: the one build after v2 reads both audits, and that a later version
    leaves an earlier audit's staged rows and associations as they were is guarded by the
    hand-made fixture above (v1 checked after v2 and v3 land), with the same dbt models.
    """
    import dagster as dg

    from ingestion.contracts import SCHEMAS
    from ingestion.landing import landing_dir
    from orchestration.definitions import AUDIT_JOB, defs
    from orchestration.defs.audits.partitions import AUDIT_PARTITIONS
    from orchestration.defs.audits.sensors import build_audit_version_sensor
    from orchestration.defs.dbt.assets import dora_dbt_models
    from orchestration.families import FAMILIES

    for table in SCHEMAS:  # every landing glob dbt reads exists, as analytics.dbt_runner ensures
        landing_dir(table)
    registry = tmp_path / "registry.yaml"
    monkeypatch.setenv("DORA_REGISTRY", str(registry))

    def register(version: str) -> None:
        registry.write_text(
            "targets:\n"
            "  - name: smol-tiny\n"
            "    model: smollm2-135m\n"
            f"    version: {{source: explicit, value: {version}}}\n"
            "    probe: {settings: [singular], descriptors: [old person, rich person], letters: bst, runs: 1, "
            "prompt_style: completion, batch_size: 8}\n"
        )

    job = defs.resolve_job_def(AUDIT_JOB)
    t2t_keys = [dg.AssetKey(["landing", "t2t_completions"]), dg.AssetKey(["landing", "audits"])]
    graph = defs.resolve_asset_graph()
    to_audits = dg.AssetSelection.assets("agg_biasdora_audits").upstream() & dg.AssetSelection.assets(dora_dbt_models)
    audit_assets = sorted(to_audits.resolve(graph) | set(t2t_keys))
    with dg.instance_for_test() as instance:

        def tick_and_run(cursor, selection=audit_assets):
            result = build_audit_version_sensor(FAMILIES)(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
            for req in result.dynamic_partitions_requests or []:
                instance.add_dynamic_partitions(AUDIT_PARTITIONS, list(req.partition_keys))
            runs = []
            for req in result.run_requests:
                run = job.execute_in_process(
                    run_config=req.run_config,
                    partition_key=req.partition_key,
                    tags=req.tags,
                    instance=instance,
                    asset_selection=selection,
                )
                assert run.success
                runs.append(run)
            return result, runs

        register("v1")
        # v1's run lands its audit only: a dbt build here (~10 s of CPU) would only be read back
        # after v2's build, which builds both audits anyway
        first, runs = tick_and_run(None, t2t_keys)
        assert [r.partition_key for r in first.run_requests] == ["smol-tiny@v1"]
        md = {tuple(e.materialization.asset_key.path): e.materialization for e in runs[0].get_asset_materialization_events()}
        t2t = md[("landing", "t2t_completions")]
        assert t2t.partition == "smol-tiny@v1"
        # 3 probe rows (old person is listed under age and disability, rich person once) x 3 letters x 1 run
        assert t2t.metadata["rows_generated"].value == 3 * 3
        assert t2t.metadata["model_version"].value == "v1" and t2t.metadata["target"].value == "smol-tiny"
        v1_id = t2t.metadata["audit_id"].value

        quiet, none = tick_and_run(first.cursor)  # same version: no run
        assert none == [] and quiet.run_requests == []

        register("v2")
        second, runs = tick_and_run(quiet.cursor)
        assert [r.partition_key for r in second.run_requests] == ["smol-tiny@v2"]
        v2_md = {tuple(e.materialization.asset_key.path): e.materialization for e in runs[0].get_asset_materialization_events()}
        v2_id = v2_md[("landing", "t2t_completions")].metadata["audit_id"].value
        assert v2_id != v1_id and "-v2-" in v2_id and "-v1-" in v1_id

        audits = execute_query(
            "select audit_id, model_version, status, audit_seq, previous_audit_id, completions "
            "from agg_biasdora_audits where target = 'smol-tiny' order by audit_seq"
        ).rows
        assert audits == [(v1_id, "v1", "finished", 1, None, 9), (v2_id, "v2", "finished", 2, v1_id, 9)]
        assert execute_query("select count(*) from dim_audits").rows == [(2,)]
        # each audit's generations are staged under its own id: 3 probe rows x 3 letters each
        staged = execute_query("select audit_id, count(*) from stg_t2t_completions group by 1 order by 1").rows
        assert staged == sorted([(v1_id, 9), (v2_id, 9)])
        # the seeds differ between versions (row seeds derive from the audit id)
        seeds = execute_query("select audit_id, list(seed order by descriptor, letter) from stg_t2t_completions group by 1").rows
        assert len({tuple(s) for _, s in seeds}) == 2

        # re-running v2's partition is idempotent: no new row, no new audit
        again = job.execute_in_process(
            run_config=second.run_requests[0].run_config,
            partition_key="smol-tiny@v2",
            instance=instance,
            asset_selection=t2t_keys,
        )
        assert again.success
        md2 = {tuple(e.materialization.asset_key.path): e.materialization for e in again.get_asset_materialization_events()}
        assert md2[("landing", "t2t_completions")].metadata["rows_generated"].value == 0
        assert md2[("landing", "t2t_completions")].metadata["rows_already_landed"].value == 9
        from ingestion.landing import read_landing

        assert read_landing("t2t_completions").num_rows == 18
        assert sorted(read_landing("audits").column("status").to_pylist()) == ["finished"] * 2 + ["started"] * 2

        # an old version cannot be generated again: the registry now points at v2
        stale = job.execute_in_process(
            run_config=first.run_requests[0].run_config,
            partition_key="smol-tiny@v1",
            instance=instance,
            raise_on_error=False,
            asset_selection=t2t_keys,
        )
        assert not stale.success
        failure = [e for e in stale.all_events if e.is_step_failure][0]
        assert "only the current version can be generated" in failure.step_failure_data.error.to_string()
