"""A registry target re-audits what `dora audit` audits: the same weights under the same version
name and the same settings are the same audits, of every family, and a target's partition
attributes every one of them to the target (``dim_audits.target``), so each family's diff finds
them by the target's name.

The fast test lands audit events in a scratch home and runs the audit log's attribution; the
slow one re-runs the session's finished audit (``tests/helpers/homes.py``, an ad-hoc `dora
audit` of every family) as a registry target with the same settings, on a copy of its home.
"""

from __future__ import annotations

import dagster as dg
import pytest


def _latest_events() -> dict[str, dict]:
    from ingestion.landing import read_landing

    rows = read_landing("audits", order_by=["event_at"]).to_pylist()
    return {r["audit_id"]: r for r in rows}  # ordered by time: the last event wins


def test_the_audit_log_attributes_every_audit_of_a_registry_partition_to_its_target(dora_home):
    from models_inference.audit_log import AuditInfo
    from orchestration.defs.audits.assets import attribute_to_target

    AuditInfo("t2t-a", "m", "v1", "t2t", {"runs": 2}).land_event("finished", 36)  # an ad-hoc audit
    AuditInfo("modscan-b", "m", "v1", "modscan_text", {}, target="old").land_event("finished", 10)
    AuditInfo("vl-c", "idm", "ref", "vlstereoset", {}, target="smol").land_event("finished", 5)
    events = list(_latest_events().values())
    assert attribute_to_target({"dagster/partition": "adhoc:m@v1"}, events) == []  # an ad-hoc run: no target
    assert attribute_to_target({}, events) == []
    assert attribute_to_target({"dagster/partition": "smol@v1"}, events) == ["t2t-a", "modscan-b"]
    assert {e["target"] for e in events} == {"smol"}
    latest = _latest_events()
    assert {k: e["target"] for k, e in latest.items()} == {"t2t-a": "smol", "modscan-b": "smol", "vl-c": "smol"}
    # the event copies the audit's latest one: status, rows, model, version, modality, config
    a = latest["t2t-a"]
    assert (a["status"], a["rows_generated"], a["model_id"], a["model_version"], a["modality"]) == ("finished", 36, "m", "v1", "t2t")
    assert '"runs": 2' in a["config_json"]
    # once attributed, nothing more lands
    assert attribute_to_target({"dagster/partition": "smol@v1"}, list(latest.values())) == []
    from ingestion.landing import read_landing

    assert read_landing("audits").num_rows == 5


@pytest.mark.slow
def test_a_target_with_the_finished_audits_weights_and_settings_reuses_and_claims_its_audits(finished_audit, tmp_path, monkeypatch):
    """The finished audit (ad hoc, every family) registered as a target: the sensor's run request
    covers the four families at the ad-hoc version of the embedded weights, the run generates
    nothing (same audit ids), and every family's audit joins the target in dim_audits."""
    import duckdb
    import yaml

    from models_inference.model_ref import model_version
    from orchestration.definitions import AUDIT_JOB, defs
    from orchestration.defs.audits.partitions import AUDIT_PARTITIONS
    from orchestration.defs.audits.sensors import build_audit_version_sensor
    from orchestration.families import FAMILIES
    from tests.helpers.homes import COUNTERFACTUAL_CONFIG, MODSCAN_CONFIG, T2T_CONFIG, copy_home

    home = finished_audit.env(monkeypatch, copy_home(finished_audit, tmp_path / "home"))
    registry = tmp_path / "registry.yaml"
    quiet = {"progress"}
    registry.write_text(
        yaml.safe_dump(
            {
                "targets": [
                    {
                        "name": "smol",
                        "model": "smollm2-135m",
                        "version": {"source": "file_hash"},
                        "probe": {k: v for k, v in T2T_CONFIG.items() if k not in quiet},
                        "options": {
                            "modscan": {k: v for k, v in MODSCAN_CONFIG.items() if k not in quiet},
                            "counterfactual": {k: v for k, v in COUNTERFACTUAL_CONFIG.items() if k not in quiet},
                        },
                    }
                ]
            }
        )
    )
    monkeypatch.setenv("DORA_REGISTRY", str(registry))
    landed = finished_audit.metadata[("landing", "audits")]["audit_ids"].split(",")
    # every family's audit-producing assets (whole: a multi-asset runs all its outputs), the audit
    # log and the two dbt models of the audit log: the marts are the finished audit's
    producers = {key for f in FAMILIES for k in f.audit_assets for key in defs.resolve_assets_def(dg.AssetKey.from_user_string(k)).keys}
    selection = [*producers, dg.AssetKey(["landing", "audits"]), dg.AssetKey("stg_audits"), dg.AssetKey("dim_audits")]
    with dg.instance_for_test() as instance:
        tick = build_audit_version_sensor(FAMILIES)(dg.build_sensor_context(instance=instance, cursor=None, definitions=defs))
        (request,) = tick.run_requests
        assert request.partition_key == f"smol@{model_version('smollm2-135m')}"  # the ad-hoc audit's version name
        assert request.tags["dora/family"] == ",".join(f.name for f in FAMILIES if "t2t" in f.target_models)
        instance.add_dynamic_partitions(AUDIT_PARTITIONS, [request.partition_key])
        result = defs.resolve_job_def(AUDIT_JOB).execute_in_process(
            run_config=request.run_config, partition_key=request.partition_key, tags=request.tags, instance=instance, asset_selection=selection
        )
    assert result.success
    md = {
        tuple(e.materialization.asset_key.path): {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }
    # every family found its audits complete: the same ids, nothing generated
    for key in (("landing", "t2t_completions"), ("landing", "counterfactual_responses"), ("landing", "modscan_responses")):
        assert md[key]["audit_id"] == finished_audit.metadata[key]["audit_id"] and md[key]["rows_generated"] == 0, key
    assert md[("landing", "vlstereoset_scores")]["audit_ids"] == finished_audit.metadata[("landing", "vlstereoset_scores")]["audit_ids"]
    assert md[("landing", "vlstereoset_scores")]["rows_generated"] == 0
    log = md[("landing", "audits")]
    assert sorted(log["audit_ids"].split(",")) == sorted(landed)
    assert sorted(log["attributed_to_target"].split(",")) == sorted(landed)  # each of them, once
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(f"select audit_id, target, family from dim_audits where audit_id in ({', '.join('?' for _ in landed)})", landed).fetchall()
    assert sorted(r[0] for r in rows) == sorted(landed) and {r[1] for r in rows} == {"smol"}
    assert {r[2] for r in rows} == {f.name for f in FAMILIES if f.audit_assets}  # every family's audits
