"""The audit log asset ``landing/audits``: every probe family's audit events, in one place.

Each probe lands its audit's lifecycle events (started / finished / failed, with model,
version, modality, config hash and registry target) into the landing table ``audits`` as it
runs (:mod:`models_inference.resumable`); ``stg_audits`` and ``dim_audits`` read them. This
asset is that table in the asset graph: its parents are the audit-producing assets of every
family (:attr:`orchestration.family.ProbeFamily.audit_assets`), so the lineage shows where
audits come from, and it runs after them to record which audits the run landed: its
materialisation lists them, and it tags the run with ``dora/audit_id`` (and any of
``dora/family``, ``dora/model``, ``dora/model_version``, ``dora/target``, ``dora/trigger`` its
launch did not set; :data:`orchestration.defs.audits.runs.RUN_TAGS`).

In a registry target's partition it also attributes every audit the run landed or found
complete, of every family, to the target (one more ``landing/audits`` event carrying it, when
the latest one does not: :func:`models_inference.audit_log.record_audit_target`), so
``dim_audits.target`` is the target for each of them: an audit first landed by an ad-hoc
``dora audit`` of the same weights and settings joins the target's history, and ``dora diff
<target> --family NAME`` finds every family's audits by the target's name.
"""

from collections.abc import Mapping

import dagster as dg

from orchestration.defs.audits.runs import (
    AD_HOC,
    PARTITION_TAG,
    TAG_AUDIT_ID,
    TAG_FAMILY,
    TAG_MODEL,
    TAG_MODEL_VERSION,
    TAG_TARGET,
    TAG_TRIGGER,
    tag_value,
)

AUDIT_LOG_KEY = dg.AssetKey(["landing", "audits"])
#: The shared Dagster group: what every family's audits have in common (the audit log, one row
#: per audit, the comparisons between audits), downstream of every family's group.
AUDITS_GROUP = "audits"

AUDIT_LOG_DESCRIPTION = (
    "Audit log: one event per audit start, finish or failure, from every probe family (model, model "
    "version, modality, registry target, config hash, rows generated). Each probe lands its own events "
    "as it runs; this step records which audits the run landed (metadata `audit_ids`) and tags the run "
    "with them (`dora/audit_id`). Read by `stg_audits` -> `dim_audits`."
)


#: Metadata entries naming an audit a probe step ran (ModSCAN's modalities have one each); not
#: ``image_audit_id``, the earlier audit whose images an I2T step describes.
AUDIT_ID_ENTRIES = ("audit_id", "vision_audit_id", "language_audit_id")


def run_audit_ids(metadata: Mapping[str, object]) -> list[str]:
    """The audit ids a probe's materialisation metadata names: :data:`AUDIT_ID_ENTRIES` and
    ``audit_ids`` (comma-separated, one per VLStereoSet scorer), in order, each once."""
    ids: list[str] = []
    for name, value in metadata.items():
        if not isinstance(value, str) or not value:
            continue
        if name in AUDIT_ID_ENTRIES:
            ids.append(value)
        elif name == "audit_ids":
            ids.extend(v for v in value.split(",") if v)
    return list(dict.fromkeys(ids))


def audit_tags(run_tags: Mapping[str, str], events: list[dict], families: list[str], trigger: str) -> dict[str, str]:
    """The dora tags the audit log adds to a run: ``dora/audit_id`` always (when audits landed),
    the others only when the launch did not set them.

    Args:
        run_tags: the run's tags so far.
        events: the latest landed event of each of the run's audits (``audit_id``, ``model_id``,
            ``model_version``, ``target``).
        families: the families whose probes landed those audits.
        trigger: what launched the run, when no ``dora/trigger`` tag says it.

    Returns:
        {tag: value}, values cut to Dagster-friendly length (:func:`~orchestration.defs.audits.runs.tag_value`).
    """

    def joined(column: str) -> str:
        return ",".join(dict.fromkeys(str(e[column]) for e in events if e.get(column)))

    found = {
        TAG_AUDIT_ID: joined("audit_id"),
        TAG_FAMILY: ",".join(dict.fromkeys(families)),
        TAG_MODEL: joined("model_id"),
        TAG_MODEL_VERSION: joined("model_version"),
        TAG_TARGET: joined("target") or AD_HOC,
        TAG_TRIGGER: trigger,
    }
    out = {}
    for tag, value in found.items():
        if value and (tag == TAG_AUDIT_ID or not run_tags.get(tag)):
            out[tag] = tag_value(value)
    return out


def attribute_to_target(run_tags: Mapping[str, str], events: list[dict]) -> list[str]:
    """Attribute each audit of ``events`` to the registry target of the run's partition
    (``<target>@<version>``), in place; a no-op for an ad-hoc run.

    Args:
        run_tags: the run's tags (its ``dagster/partition``).
        events: the latest landed event of each of the run's audits (``audit_id``, ``model_id``,
            ``model_version``, ``modality``, ``target``); their ``target`` is updated.

    Returns:
        The ids of the audits an event was landed for (those already carrying the target are not).
    """
    from ingestion.registry import is_adhoc_partition, parse_partition_key
    from models_inference.audit_log import record_audit_target

    key = run_tags.get(PARTITION_TAG)
    if not key or is_adhoc_partition(key):
        return []
    target = parse_partition_key(key)[0]
    done = []
    for event in events:
        if event["target"] != target and record_audit_target(event["audit_id"], target, event["model_id"], event["model_version"], event["modality"]):
            done.append(event["audit_id"])
        event["target"] = target
    return done


def build_audit_log_asset(producers: Mapping[dg.AssetKey, str]) -> dg.AssetsDefinition:
    """The ``landing/audits`` asset, downstream of ``producers`` ({audit-producing asset key:
    its family's name}, from every family's :attr:`~orchestration.family.ProbeFamily.audit_assets`)."""
    parents = list(producers)  # in FAMILIES order: the run's `dora/family` tag lists them so

    @dg.asset(
        key=AUDIT_LOG_KEY,
        deps=parents,
        group_name=AUDITS_GROUP,
        # not partitioned: a partitioned asset whose parent (the T2T probe) is partitioned too
        # cannot run in an unpartitioned run (`dora audit --family modscan`, the Python API)
        kinds={"python", "parquet", "landing"},
        tags={"dora/layer": "landing"},
        description=AUDIT_LOG_DESCRIPTION,
    )
    def audit_log(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        from ingestion.landing import landing_dir, read_landing

        landing_dir("audits")  # dbt's glob must exist even when no probe landed an event
        ids: list[str] = []
        families: list[str] = []
        for key in parents:
            event = context.instance.get_latest_materialization_event(key)
            if event is None or event.run_id != context.run.run_id or event.asset_materialization is None:
                continue  # not run (not selected, or failed) in this run
            found = run_audit_ids({k: v.value for k, v in event.asset_materialization.metadata.items()})
            ids.extend(found)
            if found:
                families.append(producers[key])
        ids = list(dict.fromkeys(ids))
        columns = ["audit_id", "model_id", "model_version", "modality", "target", "status", "event_at"]
        rows = read_landing("audits", columns=columns, filters={"audit_id": ids}, order_by=["event_at"]).to_pylist()
        latest = {row["audit_id"]: row for row in rows}  # ordered by time: the last event wins
        events = [latest[i] for i in ids if i in latest]
        run_tags = context.run.tags if context.run is not None else {}
        attributed = attribute_to_target(run_tags, events)
        if attributed:
            context.log.info(f"dora: {len(attributed)} audit(s) attributed to the partition's target: {', '.join(attributed)}")
        trigger = "sensor" if "dagster/sensor_name" in run_tags else "schedule" if "dagster/schedule_name" in run_tags else "manual"
        tags = audit_tags(run_tags, events, families, trigger)
        if tags:
            context.instance.add_run_tags(context.run.run_id, tags)
        context.log.info(f"dora: this run landed {len(events)} audit(s): {', '.join(ids) or 'none'}")
        return dg.MaterializeResult(
            metadata={
                "audit_ids": ",".join(ids),
                "audits_in_run": len(events),
                "families": ",".join(dict.fromkeys(families)),
                "statuses": dg.MetadataValue.json({e["audit_id"]: e["status"] for e in events}),
                "partition": run_tags.get(PARTITION_TAG, "(none)"),
                "attributed_to_target": ",".join(attributed),
            }
        )

    return audit_log
