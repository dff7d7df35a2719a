"""Every probe family as a registry target: a target lists its families and each one's options,
the new-version sensor requests a run of exactly those families for each target on a version
change, and each run config validates against the audit job's config schema (Dagster testing
APIs, no model runs)."""

from __future__ import annotations

import dagster as dg
import pytest

from ingestion.errors import TargetConfigError
from ingestion.registry import RegistryError, parse_registry
from orchestration.defs.audits.runs import run_config_for_target, target_families, target_ops
from orchestration.defs.audits.sensors import build_audit_version_sensor
from orchestration.families import FAMILIES

REGISTRY = """
targets:
  - {name: bd, family: biasdora, model: smollm2-135m, version: {source: explicit, value: '%(v)s'}, probe: {settings: [singular], runs: 1}}
  - name: cf
    family: counterfactual
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    options: {occupations: [nurse], runs: 2, prompts: [Characteristics]}
  - name: ms
    families: [modscan]
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    options: {modscan: {runs: 2}}
  - name: vl
    family: vlstereoset
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    options: {scorers: [idm], items: paper}
  - name: every
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    probe: {settings: [verb], runs: 3}
    options: {modscan: {instances: 1}, counterfactual: {runs: 3}, biasdora: {judge_model: tiny-judge}}
"""

#: The enabled switch of each family's ops that have one (BiasDora's T2T probe and judge).
ENABLED_OPS = {
    "t2t_completions": "biasdora",
    "judge_ratings": "biasdora",
    "counterfactual_responses": "counterfactual",
    "counterfactual_toxicity": "counterfactual",
    "counterfactual_stereotype_filter": "counterfactual",
    "modscan_responses": "modscan",
    "vlstereoset_probe": "vlstereoset",
}


@pytest.fixture
def registry_file(tmp_path, monkeypatch):
    path = tmp_path / "registry.yaml"
    monkeypatch.setenv("DORA_REGISTRY", str(path))
    path.write_text(REGISTRY % {"v": "v1"})
    return path


def test_each_family_target_gets_a_valid_run_config(registry_file):
    from orchestration.definitions import defs
    from orchestration.instance import AUDIT_JOB

    job = defs.resolve_job_def(AUDIT_JOB)
    registry = parse_registry(registry_file.read_text())
    families = {}
    for target in registry.targets:
        config = run_config_for_target(target, FAMILIES, str(registry_file))
        dg.validate_run_config(job, config.to_config_dict())  # the job's config schema
        families[target.name] = [f.name for f in target_families(target, FAMILIES)]
        # the target's families enabled, every other family's switch off
        assert {op: cfg.enabled for op, cfg in config.ops.items() if op in ENABLED_OPS} == {
            op: family in families[target.name] for op, family in ENABLED_OPS.items()
        }, target.name
    assert families == {
        "bd": ["biasdora"],
        "cf": ["counterfactual"],
        "ms": ["modscan"],
        "vl": ["vlstereoset"],
        "every": [f.name for f in FAMILIES if "t2t" in f.target_models],
    }  # none listed: all of `dora audit`
    cf = run_config_for_target(registry.target("cf"), FAMILIES).ops
    assert cf["counterfactual_responses"].occupations == ["nurse"] and cf["counterfactual_toxicity"].runs == 2
    assert cf["counterfactual_responses"].model == "smollm2-135m" and cf["counterfactual_responses"].progress is False
    ms = run_config_for_target(registry.target("ms"), FAMILIES).ops
    assert ms["modscan_responses"].runs == 2
    vl = run_config_for_target(registry.target("vl"), FAMILIES).ops
    assert vl["vlstereoset_probe"].items == "paper" and vl["vlstereoset_probe"].scorers == ["idm"]
    assert vl["vlstereoset_probe"].text_model == "smollm2-135m"  # the target's model is the text prior's
    assert set(run_config_for_target(registry.target("bd"), FAMILIES).ops) == {
        *(op for f in FAMILIES if f.name == "biasdora" for op in f.configs),
        *(op for op in ENABLED_OPS if op != "judge_ratings"),
    }
    every = run_config_for_target(registry.target("every"), FAMILIES, str(registry_file)).ops
    # each family's options went to that family only; BiasDora's probe settings to its T2T probe
    assert (every["t2t_completions"].settings, every["t2t_completions"].runs) == (["verb"], 3)
    assert every["judge_ratings"].model == "tiny-judge" and every["counterfactual_responses"].runs == 3
    assert every["modscan_responses"].instances_per_scenario == 1 and every["modscan_responses"].runs == 1
    assert every["t2i_images"].t2i_model is None and every["i2t_descriptions"].i2t_model is None  # a t2t target draws nothing
    assert {cfg.registry for cfg in every.values() if "registry" in type(cfg).model_fields} == {str(registry_file)}


def test_family_and_flat_options_are_one_family_and_a_bad_shape_is_named():
    one = parse_registry("targets:\n  - {name: x, family: modscan, model: m, version: {source: explicit, value: v}, options: {runs: 2}}\n").target(
        "x"
    )
    assert (one.families, one.options) == (["modscan"], {"modscan": {"runs": 2}})
    with pytest.raises(RegistryError) as err:
        parse_registry(
            "targets:\n"
            "  - {name: a, family: modscan, families: [modscan], model: m, version: {source: explicit, value: v}}\n"
            "  - {name: b, families: [modscan, modscan, Nope], model: m, version: {source: explicit, value: v}, "
            "options: {modscan: 3, vlstereoset: {items: all}}}\n"
            "  - {name: c, families: [], model: m, version: {source: explicit, value: v}}\n",
            "t.yaml",
        )
    assert err.value.problems == [
        "targets[0] (name 'a').family: give 'families' (a list) or 'family' (one name), not both",
        "targets[1] (name 'b').families: 'Nope' is not a family name",
        "targets[1] (name 'b').families: 'modscan' listed more than once",
        "targets[1] (name 'b').options.modscan: must be a mapping of the family's options ({<option>: <value>}), got 3",
        "targets[1] (name 'b').options.vlstereoset: 'vlstereoset' is not one of this target's families "
        "['modscan', 'modscan', 'Nope']; options are given per family: options: {<family>: {<option>: <value>}}",
        "targets[2] (name 'c').families: list at least one family (or leave it out: every family of `dora audit`)",
    ]


def test_bad_family_options_name_every_problem_on_one_line(registry_file):
    target = parse_registry(REGISTRY % {"v": "v1"}).target("cf")
    bad = target.model_copy(update={"options": {"counterfactual": {"rnus": 3, "runs": 0, "model": "other"}}})
    with pytest.raises(TargetConfigError) as err:
        target_ops(bad, FAMILIES)
    assert str(err.value) == (
        "target 'cf': unknown option 'rnus' for family counterfactual (did you mean runs?); options are the flags of "
        "dora audit --help-family counterfactual without --cf- (or their run-config field names); "
        "option runs (--cf-runs): 0 is out of range: expected 1..1000; "
        "option model (counterfactual) sets the target's own model: give it as the target's 'model'"
    )
    # BiasDora's probe settings on a target that does not run BiasDora, options of a family it does not run
    odd = parse_registry(
        "targets:\n  - {name: x, families: [modscan], model: m, version: {source: explicit, value: v}, probe: {runs: 2}, scorers: [sentiment]}\n"
    ).target("x")
    with pytest.raises(TargetConfigError) as err:
        target_ops(odd, FAMILIES)
    assert str(err.value) == (
        "target 'x': probe: read by family biasdora, which this target does not run (families: modscan); "
        "scorers: read by family biasdora, which this target does not run (families: modscan)"
    )
    # a family that takes no model of the target's modality, an unknown one
    painter = parse_registry(
        "targets:\n  - {name: p, modality: t2i, backend: diffusers, families: [biasdora, modscan, nope], "
        "model: m, version: {source: explicit, value: v}}\n"
    ).target("p")
    with pytest.raises(TargetConfigError) as err:
        target_ops(painter, FAMILIES)
    assert str(err.value) == (
        f"target 'p': unknown probe family 'nope'; families: {', '.join(f.name for f in FAMILIES)}; "
        "family modscan audits no t2i model (its target models: t2t)"
    )
    # a vision target that lists no family runs the families that take its modality: BiasDora's T2I probe
    assert [f.name for f in target_families(painter.model_copy(update={"families": None}), FAMILIES)] == ["biasdora"]


def test_sensor_reaudits_every_family_target_on_a_version_change(registry_file):
    from orchestration.definitions import defs

    with dg.instance_for_test() as instance:

        def tick(cursor):
            result = build_audit_version_sensor(FAMILIES)(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
            for req in result.dynamic_partitions_requests or []:
                instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
            return result

        first = tick(None)
        assert sorted(r.partition_key for r in first.run_requests) == ["bd@v1", "cf@v1", "every@v1", "ms@v1", "vl@v1"]
        assert not tick(first.cursor).run_requests  # nothing new
        registry_file.write_text(REGISTRY % {"v": "v2"})
        second = tick(first.cursor)
    requests = {r.partition_key: r for r in second.run_requests}
    assert sorted(requests) == ["bd@v2", "cf@v2", "every@v2", "ms@v2", "vl@v2"]
    assert {k: r.tags["dora/family"] for k, r in requests.items()} == {
        "bd@v2": "biasdora",
        "cf@v2": "counterfactual",
        "ms@v2": "modscan",
        "vl@v2": "vlstereoset",
        "every@v2": ",".join(f.name for f in FAMILIES if "t2t" in f.target_models),
    }
    ops = requests["cf@v2"].run_config["ops"]
    assert ops["counterfactual_responses"]["config"]["enabled"] and ops["counterfactual_responses"]["config"]["runs"] == 2
    assert not ops["t2t_completions"]["config"]["enabled"] and not ops["modscan_responses"]["config"]["enabled"]
    from ingestion.registry import default_registry_path

    # every asset finds its target in the registry the run's tag names
    assert {r.tags["dora/registry"] for r in second.run_requests} == {str(default_registry_path())}


def test_a_target_runs_only_the_families_it_names_vlstereoset_included(registry_file):
    """VLStereoSet's skip decision for each target's partition: only the partitions of targets
    that run it (and an ad-hoc run) score; a BiasDora target's partition skips it like any other."""
    from types import SimpleNamespace

    from orchestration.defs.vlstereoset.assets import _skip_reason
    from orchestration.defs.vlstereoset.config import VLStereoSetConfig

    def reason(key, **config):  # the context of a run of partition ``key`` (what run_partition_key reads)
        context = SimpleNamespace(run=None, partition_key=key, has_partition_key=True)
        return _skip_reason(context, VLStereoSetConfig(**config))

    assert reason("bd@v1") == "partition bd@v1 audits registry target 'bd' of family 'biasdora'"
    assert reason("cf@v1") == "partition cf@v1 audits registry target 'cf' of family 'counterfactual'"
    assert reason("ms@v1") == "partition ms@v1 audits registry target 'ms' of family 'modscan'"
    assert reason("vl@v1") is None and reason("every@v1") is None and reason("adhoc:smollm2-135m@x") is None
    assert reason("vl@v1", enabled=False) == "--family does not include vlstereoset"


@pytest.mark.slow
def test_a_biasdora_partition_lands_no_vlstereoset_audit_and_its_own_target_does(registry_file, dora_home):
    """The VLStereoSet assets in two partition runs: the BiasDora target's materialise as skipped
    and land nothing (no items, no scores, no audit event); the VLStereoSet target's score."""
    from ingestion.landing import read_landing
    from orchestration.definitions import defs
    from orchestration.defs.audits.partitions import AUDIT_PARTITIONS
    from orchestration.defs.vlstereoset.assets import ITEMS_KEY, SCORES_KEY
    from orchestration.instance import AUDIT_JOB

    registry_file.write_text((REGISTRY % {"v": "v1"}).replace("items: paper", "items: all"))  # the synthetic file is no paper pool
    job = defs.resolve_job_def(AUDIT_JOB)
    registry = parse_registry(registry_file.read_text())
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(AUDIT_PARTITIONS, ["bd@v1", "vl@v1"])

        def run(name):
            ops = run_config_for_target(registry.target(name), FAMILIES, str(registry_file)).to_config_dict()["ops"]
            result = job.execute_in_process(
                partition_key=f"{name}@v1",
                instance=instance,
                asset_selection=[ITEMS_KEY, SCORES_KEY],
                run_config={"ops": {k: v for k, v in ops.items() if k == "vlstereoset_probe"}},
            )
            assert result.success
            return {
                tuple(e.materialization.asset_key.path): {k: v.value for k, v in e.materialization.metadata.items()}
                for e in result.get_asset_materialization_events()
            }

        bd = run("bd")
        for key in (ITEMS_KEY, SCORES_KEY):
            md = bd[tuple(key.path)]
            assert md["status"] == "skipped" and md["reason"] == "partition bd@v1 audits registry target 'bd' of family 'biasdora'"
        assert read_landing("vlstereoset_items").num_rows == 0 and read_landing("vlstereoset_scores").num_rows == 0
        assert read_landing("audits").num_rows == 0

        vl = run("vl")[tuple(SCORES_KEY.path)]
        assert vl["scorers"] == "idm" and vl["item_set"] == "all" and vl["rows_generated"] > 0
        assert read_landing("vlstereoset_scores").num_rows == vl["rows_generated"]
        assert {(r["target"], r["modality"]) for r in read_landing("audits").to_pylist()} == {("vl", "vlstereoset")}
