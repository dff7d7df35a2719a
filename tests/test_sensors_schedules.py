"""The new-version sensor, the re-audit schedule and the UI wiring, with Dagster's testing APIs.

No model runs here: targets use explicit versions (and one unreadable file hash), the sensor
and schedule are evaluated with ``build_sensor_context`` / ``build_schedule_context`` on a
real (temporary, persistent) Dagster instance, including the cursor round trip.
"""

from __future__ import annotations

import json
import warnings
from datetime import datetime, timezone

import dagster as dg
import pytest

from ingestion.registry import RegistryError, ScheduleSpec
from orchestration.defs.audits.partitions import AUDIT_PARTITIONS
from orchestration.defs.audits.schedules import build_reaudit_schedule, schedule_spec
from orchestration.defs.audits.sensors import build_audit_version_sensor, decode_cursor
from orchestration.families import FAMILIES

audit_version_sensor = build_audit_version_sensor(FAMILIES)

#: Every family's name, read from the records (never listed by hand).
SHIPPED = {f.name for f in FAMILIES}


def families_of(modality: str, sep: str = ",") -> str:
    """The families a target of ``modality`` that lists none runs: every family auditing a model of
    that modality (``ProbeFamily.target_models``), in FAMILIES order."""
    return sep.join(f.name for f in FAMILIES if modality in f.target_models)


def write_registry(path, versions: dict[str, str], *, extra: str = "", schedule: str = "") -> None:
    lines = [schedule, "targets:"]
    for name, version in versions.items():
        lines.append(
            f"  - {{name: {name}, model: smollm2-135m, version: {{source: explicit, value: '{version}'}}, "
            "probe: {settings: [singular], letters: ab, runs: 1, descriptors: [old person]}}"
        )
    path.write_text("\n".join(lines) + "\n" + extra)


@pytest.fixture
def registry_file(tmp_path, monkeypatch):
    path = tmp_path / "registry.yaml"
    monkeypatch.setenv("DORA_REGISTRY", str(path))
    return path


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def tick(instance, cursor):
    """One sensor evaluation, with its partition requests applied as the daemon would."""
    from orchestration.definitions import defs

    context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    result = audit_version_sensor(context)
    assert isinstance(result, dg.SensorResult)
    for req in result.dynamic_partitions_requests or []:
        assert req.partitions_def_name == AUDIT_PARTITIONS
        instance.add_dynamic_partitions(AUDIT_PARTITIONS, list(req.partition_keys))
    return result


def test_sensor_requests_each_new_version_once_with_a_cursor(registry_file, instance):
    write_registry(registry_file, {"alpha": "v1", "beta": "2025-06"})
    first = tick(instance, None)
    assert sorted(r.partition_key for r in first.run_requests) == ["alpha@v1", "beta@2025-06"]
    assert sorted(first.dynamic_partitions_requests[0].partition_keys) == ["alpha@v1", "beta@2025-06"]
    req = {r.partition_key: r for r in first.run_requests}["alpha@v1"]
    assert req.run_key == "alpha@v1"
    assert req.tags["dora/target"] == "alpha" and req.tags["dora/model_version"] == "v1"
    assert req.tags["dora/trigger"] == "sensor"
    assert req.run_config["ops"]["t2t_completions"]["config"]["registry"] == str(registry_file.resolve())
    assert req.tags["dora/registry"] == str(registry_file.resolve())  # where every asset of the run reads its target
    assert req.tags["dora/family"] == families_of("t2t")  # no `families`: every family auditing a t2t model
    assert len(req.tags["dora/family"].split(",")) > 1
    assert json.loads(first.cursor) == {"seen": {"alpha": ["v1"], "beta": ["2025-06"]}}
    assert sorted(instance.get_dynamic_partitions(AUDIT_PARTITIONS)) == ["alpha@v1", "beta@2025-06"]

    # same versions again: nothing to do, cursor unchanged
    second = tick(instance, first.cursor)
    assert second.run_requests == [] and not second.dynamic_partitions_requests
    assert second.skip_reason is not None and "no new model version" in second.skip_reason.skip_message
    assert second.cursor == first.cursor

    # alpha ships v2: exactly one run, for the new partition; v1 stays in the cursor
    write_registry(registry_file, {"alpha": "v2", "beta": "2025-06"})
    third = tick(instance, second.cursor)
    assert [r.partition_key for r in third.run_requests] == ["alpha@v2"]
    assert list(third.dynamic_partitions_requests[0].partition_keys) == ["alpha@v2"]
    assert decode_cursor(third.cursor) == {"alpha": ["v1", "v2"], "beta": ["2025-06"]}

    # a lost cursor re-requests current versions, but adds no partition that exists (and the
    # run keys equal the partition keys, so the daemon would not launch them twice)
    reset = tick(instance, None)
    assert sorted(r.run_key for r in reset.run_requests) == ["alpha@v2", "beta@2025-06"]
    assert not reset.dynamic_partitions_requests


def test_sensor_keeps_going_past_an_unreadable_target_and_fails_on_a_bad_registry(registry_file, instance, tmp_path):
    write_registry(
        registry_file,
        {"alpha": "v1"},
        extra=f"  - {{name: lost, model: {tmp_path / 'no-such-weights'}, version: {{source: file_hash}}}}\n",
    )
    result = tick(instance, None)
    assert [r.partition_key for r in result.run_requests] == ["alpha@v1"]
    assert "lost" not in decode_cursor(result.cursor)  # retried on the next tick
    again = tick(instance, result.cursor)
    assert "1 target(s) unreadable" in again.skip_reason.skip_message
    assert "no-such-weights" in again.skip_reason.skip_message

    registry_file.write_text("targets:\n  - {name: alpha, model: m, version: {source: explicit}}\n")
    with pytest.raises(RegistryError, match=r"targets\[0\] \(name 'alpha'\)\.version\.value"):
        tick(instance, result.cursor)
    write_registry(registry_file, {"alpha": "v1"})
    with pytest.raises(ValueError, match="unreadable cursor"):
        tick(instance, "not json")


def test_sensor_tick_resolves_partitioned_run_requests_against_the_job(registry_file, instance):
    """The full tick as the daemon evaluates it (evaluate_tick): requests target dora_audit."""
    from orchestration.definitions import defs

    write_registry(registry_file, {"alpha": "v1"})
    sensor = defs.resolve_sensor_def("audit_version_sensor")
    assert sensor.job_name == "dora_audit"
    context = dg.build_sensor_context(instance=instance, instance_ref=instance.get_ref(), cursor=None, definitions=defs)
    data = sensor.evaluate_tick(context)
    assert [r.partition_key for r in data.run_requests] == ["alpha@v1"]
    assert data.run_requests[0].tags["dagster/partition"] == "alpha@v1"
    assert json.loads(data.cursor)["seen"] == {"alpha": ["v1"]}


def test_schedule_reaudits_every_target_at_its_current_version(registry_file, instance):
    write_registry(registry_file, {"alpha": "v1", "beta": "b7"}, schedule="schedule: {cron: '30 6 * * 2', timezone: Europe/Paris}")
    spec = schedule_spec()
    assert (spec.cron, spec.timezone) == ("30 6 * * 2", "Europe/Paris")
    schedule = build_reaudit_schedule(FAMILIES, spec)
    assert schedule.cron_schedule == "30 6 * * 2" and schedule.execution_timezone == "Europe/Paris"
    instance.add_dynamic_partitions(AUDIT_PARTITIONS, ["alpha@v1"])  # seen before, beta is new

    when = datetime(2025, 6, 3, 4, 30, tzinfo=timezone.utc)
    requests = schedule(dg.build_schedule_context(instance=instance, scheduled_execution_time=when))
    assert sorted(r.partition_key for r in requests) == ["alpha@v1", "beta@b7"]
    assert {r.run_key for r in requests} == {f"alpha@v1|{when.isoformat()}", f"beta@b7|{when.isoformat()}"}
    assert all(r.tags["dora/trigger"] == "schedule" for r in requests)
    assert sorted(instance.get_dynamic_partitions(AUDIT_PARTITIONS)) == ["alpha@v1", "beta@b7"]

    # next week: new run keys (a new re-audit), same partitions
    later = datetime(2025, 6, 10, 4, 30, tzinfo=timezone.utc)
    next_week = schedule(dg.build_schedule_context(instance=instance, scheduled_execution_time=later))
    assert {r.run_key for r in next_week}.isdisjoint({r.run_key for r in requests})
    assert sorted(instance.get_dynamic_partitions(AUDIT_PARTITIONS)) == ["alpha@v1", "beta@b7"]

    # the daemon's evaluation path (partitioned requests resolved against dora_audit)
    from orchestration.definitions import defs

    context = dg.build_schedule_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        scheduled_execution_time=later,
        repository_def=defs.get_repository_def(),
    )
    data = schedule.evaluate_tick(context)
    assert sorted(r.tags["dagster/partition"] for r in data.run_requests) == ["alpha@v1", "beta@b7"]


def test_schedule_defaults_weekly_and_survives_a_broken_registry(registry_file):
    write_registry(registry_file, {"alpha": "v1"})
    assert schedule_spec() == ScheduleSpec()
    assert build_reaudit_schedule(FAMILIES, schedule_spec()).cron_schedule == "0 3 * * 1"
    registry_file.write_text("targets: [")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert schedule_spec().cron == "0 3 * * 1"
    assert any("not valid YAML" in str(w.message) for w in caught)


def test_definitions_wire_automation_groups_and_descriptions():
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert (node.description or "").strip(), f"asset {key.to_user_string()} has no description"
        assert node.group_name != "default", f"asset {key.to_user_string()} is in no pipeline-stage group"
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert {g for f in FAMILIES for g in f.groups} | {"audits"} == groups  # one group per probe family, one shared
    assert SHIPPED | {"audits"} <= groups
    t2t = graph.get(dg.AssetKey(["landing", "t2t_completions"]))
    assert t2t.partitions_def is not None and t2t.partitions_def.name == AUDIT_PARTITIONS
    assert dg.AssetKey("fct_association_changes") in graph.get_all_asset_keys()

    def reads_audit_log(key: dg.AssetKey) -> bool:
        parents = graph.get(key).parent_keys
        return dg.AssetKey("dim_audits") in parents or any(reads_audit_log(p) for p in parents if graph.has(p))

    # every family's drift checks sit on its drift mart, in its own group (in the shared group
    # when the mart compares through the audit log, as BiasDora's audit comparisons do: a family
    # group reading the audit log would make the group graph circular)
    for family in FAMILIES:
        if family.drift is None:
            continue
        mart = dg.AssetKey(family.drift.relation)
        assert graph.get(mart).group_name == ("audits" if reads_audit_log(mart) else family.group)
        checks = {c.name for c in graph.asset_check_keys if c.asset_key == mart}
        assert {f"drift_{c.name}" for c in family.drift.checks} <= checks  # beside the mart's dbt tests
    assert defs.resolve_schedule_def("reaudit_schedule").job_name == "dora_audit"
    assert defs.resolve_job_def("dora_audit").partitions_def.name == AUDIT_PARTITIONS


def test_cli_models_list_and_audit_target_errors(registry_file, dora_home, capsys, tmp_path):
    from orchestration.cli import main

    write_registry(registry_file, {"alpha": "v1"})
    assert main(["models", "list", "--format", "csv"]) == 0  # no warehouse yet: no last audit
    out = capsys.readouterr().out.splitlines()
    # one row per family the target runs (every family of its modality), none audited yet
    assert [line for line in out[1:] if line] == [
        f"alpha,{f.name},t2t,transformers,smollm2-135m,explicit,v1,-,-,-,-,-,ok" for f in FAMILIES if "t2t" in f.target_models
    ]
    assert main(["models", "list", "--no-resolve", "--format", "csv"]) == 0
    assert ",(not read)," in capsys.readouterr().out

    bad = tmp_path / "bad.yaml"
    bad.write_text("targets:\n  - {name: x, model: m, version: {source: explicit, value: v}, probe: {runs: -1}}\n")
    assert main(["models", "list", "--registry", str(bad)]) == 2
    assert "targets[0] (name 'x').probe.runs: Input should be greater than or equal to 1" in capsys.readouterr().err

    # `dora audit --target` registers the partition of the current version, or says why not
    assert main(["audit", "--target", "nope", "--no-progress"]) == 2
    assert "no audit target 'nope' in the registry; registered: alpha" in capsys.readouterr().err
    assert main(["audit", "--target", "alpha", "--registry", str(bad), "--no-progress"]) == 2
    assert "probe.runs" in capsys.readouterr().err


def test_add_target_partition_for_dora_audit_target(registry_file, instance):
    from ingestion.registry import load_registry
    from orchestration.defs.audits.runs import add_target_partition

    write_registry(registry_file, {"alpha": "v1"})
    target = load_registry().target("alpha")
    assert add_target_partition(instance, target) == ("alpha@v1", "v1", "explicit: version.value in the registry")
    assert add_target_partition(instance, target)[0] == "alpha@v1"  # idempotent
    assert instance.get_dynamic_partitions(AUDIT_PARTITIONS) == ["alpha@v1"]


def test_the_shipped_schedule_reaudits_what_dora_audit_audits(monkeypatch, instance):
    """The shipped registry's schedule: one run for the embedded model's target, covering every
    family of `dora audit` with `dora audit`'s settings, at the version `dora audit` names the
    same weights (so its audits are the quick start's); the UI descriptions say so."""
    from models_inference.model_ref import model_version
    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser
    from orchestration.defs.audits.sensors import build_audit_version_sensor
    from orchestration.defs.biasdora.dry_run import t2t_plan_lines

    monkeypatch.delenv("DORA_REGISTRY", raising=False)
    schedule = build_reaudit_schedule(FAMILIES, schedule_spec())
    when = datetime(2025, 6, 2, 3, 0, tzinfo=timezone.utc)
    (request,) = schedule(dg.build_schedule_context(instance=instance, scheduled_execution_time=when))
    version = model_version("smollm2-135m")  # the ad-hoc `dora audit`'s version of the embedded weights
    assert version.startswith("gguf-q4_1-") and request.partition_key == f"smollm2-135m@{version}"
    assert request.tags["dora/family"] == ",".join(f.name for f in FAMILIES)  # registry.yaml lists every family
    ops = request.run_config["ops"]
    assert all(ops[op]["config"]["enabled"] for op in ops if "enabled" in ops[op]["config"])
    # every family's settings are `dora audit`'s defaults (bar the registry file and progress bars)
    defaults = op_run_configs(build_parser().parse_args(["audit"]))
    assert set(ops) == set(defaults)
    for op, config in defaults.items():
        expected = {k: v for k, v in config.model_dump().items() if k not in ("registry", "progress")}
        got = {k: ops[op]["config"].get(k) for k in expected}  # the run config leaves out None values
        if op == "t2t_completions":  # the registry names the prompt style the embedded model defaults to
            assert (got.pop("prompt_style"), expected.pop("prompt_style")) == ("completion", None)
        assert got == expected, op
    # ... so the T2T audit is the quick start's own audit id
    from orchestration.defs.biasdora.config import AuditConfig

    t2t = AuditConfig(**ops["t2t_completions"]["config"])
    assert t2t_plan_lines(t2t)[1] == t2t_plan_lines(defaults["t2t_completions"])[1]
    # the Automation page names the target and the families a tick runs
    for description in (schedule.description, build_audit_version_sensor(FAMILIES).description):
        assert f"smollm2-135m: {', '.join(f.name for f in FAMILIES)}" in description


def test_the_descriptions_name_each_target_and_its_families(registry_file):
    from orchestration.defs.audits.sensors import build_audit_version_sensor

    registry_file.write_text(
        "targets:\n"
        "  - {name: every, model: m, version: {source: explicit, value: v}}\n"
        "  - {name: two, families: [modscan, counterfactual], model: m, version: {source: explicit, value: v}}\n"
        "  - {name: painter, modality: t2i, backend: diffusers, model: m, version: {source: explicit, value: v}}\n"
        "  - {name: odd, family: nosuch, model: m, version: {source: explicit, value: v}}\n"
    )
    expected = (
        f"every: {families_of('t2t', ', ')}; two: counterfactual, modscan; painter: {families_of('t2i', ', ')}; "
        f"odd: refused (unknown probe family 'nosuch'; families: {', '.join(f.name for f in FAMILIES)})."
    )
    assert "biasdora" in families_of("t2i").split(",") and len(families_of("t2t").split(",")) > 1
    assert build_reaudit_schedule(FAMILIES, schedule_spec()).description.endswith(expected)
    assert build_audit_version_sensor(FAMILIES).description.endswith(expected)
    registry_file.write_text("targets: [")
    assert "is invalid (not valid YAML" in build_audit_version_sensor(FAMILIES).description


@pytest.mark.slow
def test_a_non_t2t_target_partition_generates_no_t2t_rows(registry_file, instance, dora_home):
    from ingestion.landing import read_landing
    from orchestration.definitions import defs

    registry_file.write_text(
        "targets:\n  - {name: painter, modality: t2i, backend: diffusers, model: /models/sd, version: {source: explicit, value: r1}}\n"
    )
    instance.add_dynamic_partitions(AUDIT_PARTITIONS, ["painter@r1"])
    keys = [dg.AssetKey(["landing", "t2t_completions"]), dg.AssetKey(["landing", "audits"])]
    result = defs.resolve_job_def("dora_audit").execute_in_process(
        partition_key="painter@r1",
        instance=instance,
        asset_selection=keys,
        run_config={"ops": {"t2t_completions": {"config": {"registry": str(registry_file)}}}},
    )
    assert result.success
    md = result.get_asset_materialization_events()[0].materialization.metadata
    assert md["modality"].value == "t2i" and md["rows_generated"].value == 0
    assert read_landing("t2t_completions").num_rows == 0
