"""The new-version sensor: audit every registry target's version the first time it is seen.

Each tick reads the audit registry (``ingestion/registry.py``), resolves every target's
current model version and, for a (target, version) not in the cursor, adds the dynamic
partition ``<target>@<version>`` and requests one run of the audit job for it, running the
target's probe families. The cursor is JSON ``{"seen": {target: [versions...]}}``, so a version
is requested once; the run key is the partition key, so even a reset cursor never launches the
same version twice. Its UI description names each target and the families its run covers.
The families are an argument of :func:`build_audit_version_sensor` (``orchestration/definitions.py``
passes :data:`orchestration.families.FAMILIES`): this shared module names none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import dagster as dg

from ingestion.registry import load_registry, partition_key
from orchestration.defs.audits.partitions import audit_partitions
from orchestration.defs.audits.runs import audit_run_request, current_versions
from orchestration.defs.audits.schedules import targets_description
from orchestration.instance import AUDIT_JOB

#: Seconds between ticks: reading a version can hash a weights file or call an API.
SENSOR_INTERVAL_SECONDS = 300


def decode_cursor(cursor: str | None) -> dict[str, list[str]]:
    """``{target: [versions seen]}`` from the sensor cursor (empty when there is none).

    Raises:
        ValueError: a cursor that is not this sensor's JSON.
    """
    if not cursor:
        return {}
    try:
        seen = json.loads(cursor)["seen"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"audit_version_sensor: unreadable cursor {cursor[:80]!r}; reset it in the UI") from exc
    return {str(k): [str(v) for v in vs] for k, vs in seen.items()}


def encode_cursor(seen: dict[str, list[str]]) -> str:
    """The cursor JSON for ``{target: [versions seen]}`` (stable key order)."""
    return json.dumps({"seen": {k: seen[k] for k in sorted(seen)}}, sort_keys=True)


#: The sensor's name in the UI.
SENSOR_NAME = "audit_version_sensor"


def build_audit_version_sensor(families: Sequence) -> dg.SensorDefinition:
    """The new-version sensor over ``families`` (every :class:`~orchestration.family.ProbeFamily`),
    its description naming the registry's targets and their families."""

    def tick(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        return _tick(context, families)

    return dg.sensor(
        name=SENSOR_NAME,
        job_name=AUDIT_JOB,
        minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
        description="Reads the audit registry (registry.yaml / $DORA_REGISTRY), resolves each target's current model "
        "version and requests an audit run for every (target, version) it has not seen, adding the dynamic partition "
        "<target>@<version>; the run covers the target's probe families. Cursor: the versions seen per target. " + targets_description(families),
    )(tick)


def _tick(context: dg.SensorEvaluationContext, families: Sequence) -> dg.SensorResult:
    """One tick over ``families``; an invalid registry fails the tick with every bad field named."""
    registry = load_registry()
    seen = decode_cursor(context.cursor)
    existing = set(context.instance.get_dynamic_partitions(audit_partitions.name))
    versions, errors = current_versions(registry, context.log)
    new_keys: list[str] = []
    requests: list[dg.RunRequest] = []
    for name, (target, version) in versions.items():
        if version in seen.get(name, []):
            continue
        key = partition_key(name, version)
        try:  # a target whose family options are wrong fails alone, named; the others run
            request = audit_run_request(key, target, version, trigger="sensor", families=families)
        except (KeyError, ValueError) as exc:
            errors.append(str(exc))
            context.log.error(f"dora: cannot configure target {name!r}: {exc}")
            continue
        if key not in existing:
            new_keys.append(key)
        requests.append(request)
        seen.setdefault(name, []).append(version)
        context.log.info(f"dora: new version of {name!r}: {version} -> audit run for partition {key}")
    skip = None
    if not requests:
        skip = "no new model version" + (f"; {len(errors)} target(s) unreadable: " + " | ".join(errors) if errors else "")
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[audit_partitions.build_add_request(new_keys)] if new_keys else None,
        cursor=encode_cursor(seen),
        skip_reason=skip,
    )
