"""Every probe family as a registry target: the registry names a family and its options, the
new-version sensor requests a run for each family's target on a version change, and each run
config validates against the audit job's config schema (Dagster testing APIs, no model runs)."""

from __future__ import annotations

import dagster as dg
import pytest

from ingestion.registry import RegistryError, parse_registry
from orchestration.defs.audits.runs import family_op_configs, run_config_for_target
from orchestration.defs.audits.sensors import audit_version_sensor
from orchestration.families import FAMILIES

REGISTRY = """
targets:
  - {name: bd, model: smollm2-135m, version: {source: explicit, value: '%(v)s'}, probe: {settings: [singular], runs: 1}}
  - name: cf
    family: counterfactual
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    options: {occupations: [nurse], seeds: 2, prompts: [Characteristics]}
  - name: ms
    family: modscan
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    options: {samples: 2}
  - name: vl
    family: vlstereoset
    model: smollm2-135m
    version: {source: explicit, value: '%(v)s'}
    options: {scorers: [idm], items: paper}
"""


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
    for target in registry.targets:
        config = run_config_for_target(target, FAMILIES, str(registry_file))
        dg.validate_run_config(job, config.to_config_dict())  # the job's config schema
    cf = run_config_for_target(registry.target("cf"), FAMILIES).ops
    assert cf["counterfactual_responses"].occupations == ["nurse"] and cf["counterfactual_toxicity"].seeds == 2
    assert cf["counterfactual_responses"].enabled and cf["counterfactual_responses"].model == "smollm2-135m"
    assert not cf["modscan_responses"].enabled and not cf["vlstereoset_probe"].enabled
    ms = run_config_for_target(registry.target("ms"), FAMILIES).ops
    assert ms["modscan_responses"].enabled and ms["modscan_responses"].samples == 2 and not ms["counterfactual_responses"].enabled
    vl = run_config_for_target(registry.target("vl"), FAMILIES).ops
    assert vl["vlstereoset_probe"].items == "paper" and vl["vlstereoset_probe"].scorers == ["idm"]
    assert set(run_config_for_target(registry.target("bd"), FAMILIES).ops) == {"t2t_completions"}


def test_bad_family_options_are_one_line_errors(registry_file):
    target = parse_registry(REGISTRY % {"v": "v1"}).target("cf").model_copy(update={"options": {"sedes": 3}})
    with pytest.raises(ValueError, match=r"target 'cf': unknown option 'sedes' for family counterfactual \(did you mean seeds"):
        family_op_configs(target, FAMILIES)
    target = target.model_copy(update={"options": {"seeds": 0}})  # the range of the flag --cf-seeds
    with pytest.raises(ValueError, match=r"target 'cf': option seeds \(--cf-seeds\): 0 is out of range: expected 1\.\."):
        family_op_configs(target, FAMILIES)
    with pytest.raises(RegistryError, match="options: a biasdora target takes 'probe' settings"):
        parse_registry("targets:\n  - {name: x, model: m, version: {source: explicit, value: v}, options: {seeds: 1}}\n")


def test_sensor_reaudits_every_family_target_on_a_version_change(registry_file):
    from orchestration.definitions import defs

    with dg.instance_for_test() as instance:
        def tick(cursor):
            result = audit_version_sensor(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
            for req in result.dynamic_partitions_requests or []:
                instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
            return result

        first = tick(None)
        assert sorted(r.partition_key for r in first.run_requests) == ["bd@v1", "cf@v1", "ms@v1", "vl@v1"]
        assert not tick(first.cursor).run_requests  # nothing new
        registry_file.write_text(REGISTRY % {"v": "v2"})
        second = tick(first.cursor)
    requests = {r.partition_key: r for r in second.run_requests}
    assert sorted(requests) == ["bd@v2", "cf@v2", "ms@v2", "vl@v2"]
    assert {r.tags["dora/family"] for r in second.run_requests} == {"biasdora", "counterfactual", "modscan", "vlstereoset"}
    ops = requests["cf@v2"].run_config["ops"]
    assert ops["counterfactual_responses"]["config"]["enabled"] and ops["counterfactual_responses"]["config"]["seeds"] == 2
    from ingestion.registry import default_registry_path

    assert ops["t2t_completions"]["config"]["registry"] == str(default_registry_path())  # every asset finds its target there


def test_a_target_runs_only_the_family_it_names_vlstereoset_included(registry_file):
    """VLStereoSet's skip decision for each target's partition: only its own target's partition
    (and an ad-hoc run) scores; a BiasDora target's partition skips it like any other family's."""
    from types import SimpleNamespace

    from orchestration.defs.vlstereoset.assets import _skip_reason
    from orchestration.defs.vlstereoset.config import VLStereoSetConfig

    def reason(key, **config):  # the context of a run of partition ``key`` (what run_partition_key reads)
        context = SimpleNamespace(run=None, partition_key=key, has_partition_key=True)
        return _skip_reason(context, VLStereoSetConfig(**config))

    assert reason("bd@v1") == "partition bd@v1 audits registry target 'bd' of family 'biasdora'"
    assert reason("cf@v1") == "partition cf@v1 audits registry target 'cf' of family 'counterfactual'"
    assert reason("ms@v1") == "partition ms@v1 audits registry target 'ms' of family 'modscan'"
    assert reason("vl@v1") is None and reason("adhoc:smollm2-135m@x") is None
    assert reason("vl@v1", enabled=False) == "--probe does not include vlstereoset"


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
            result = job.execute_in_process(partition_key=f"{name}@v1", instance=instance, asset_selection=[ITEMS_KEY, SCORES_KEY],
                                            run_config={"ops": {k: v for k, v in ops.items() if k == "vlstereoset_probe"}})
            assert result.success
            return {tuple(e.materialization.asset_key.path): {k: v.value for k, v in e.materialization.metadata.items()}
                    for e in result.get_asset_materialization_events()}

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
