"""The re-audit schedule ``reaudit_schedule``: every target at its current version, weekly by default.

The cron string and time zone come from the registry's ``schedule`` section (default
``0 3 * * 1``, Mondays 03:00 UTC), read when the Dagster definitions load; so is the
description the UI shows, which names each target and the families its run covers. Each tick
reads the registry again and requests one run per target for its current version's partition
(added if new), running the target's families (every family of ``dora audit`` unless it lists
them). Audits are idempotent per (model version, generation config): an unchanged version whose
audit is complete costs no model call, an interrupted one is completed, and a version the sensor
missed (sensor off, failed tick) gets audited. The families are an argument of
:func:`build_reaudit_schedule` (``orchestration/definitions.py`` passes
:data:`orchestration.families.FAMILIES`): this shared module names none.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import dagster as dg

from ingestion.registry import RegistryError, ScheduleSpec, load_registry, partition_key
from orchestration.defs.audits.partitions import audit_partitions
from orchestration.defs.audits.runs import audit_run_request, current_versions, describe_targets
from orchestration.instance import AUDIT_JOB

#: The schedule's one name (the UI, the docs and ``registry.yaml`` say it).
SCHEDULE_NAME = "reaudit_schedule"


def schedule_spec(registry_path: str | None = None) -> ScheduleSpec:
    """The registry's schedule section; the weekly default (with a warning) if it is invalid.

    The definitions must load even with a broken registry (ad-hoc ``dora audit`` does not
    need it); the sensor and the schedule's ticks then fail with every bad field named.
    """
    try:
        return load_registry(registry_path).schedule
    except RegistryError as exc:
        warnings.warn(f"{exc}\nthe re-audit schedule uses the weekly default until it is fixed", stacklevel=2)
        return ScheduleSpec()


def targets_description(families: Sequence, registry_path: str | None = None) -> str:
    """What a tick of the sensor or the schedule runs over ``families`` (every
    :class:`~orchestration.family.ProbeFamily`), for their UI descriptions: ``Targets (registry
    <path>, read when the definitions loaded): <name>: <families>; ...``, or why the registry
    cannot be read (ticks then fail, naming every bad field)."""
    from ingestion.registry import default_registry_path

    path = registry_path or default_registry_path()
    try:
        registry = load_registry(path)
    except RegistryError as exc:
        return f"The registry {path} is invalid ({'; '.join(exc.problems)}): ticks fail until it is fixed."
    return (
        f"Targets and the probe families each one's run covers (registry {path}, as read when the definitions "
        f"loaded; reload them after editing it): {'; '.join(describe_targets(registry, families))}."
    )


def build_reaudit_schedule(families: Sequence, spec: ScheduleSpec | None = None) -> dg.ScheduleDefinition:
    """The re-audit schedule over ``families`` (every :class:`~orchestration.family.ProbeFamily`)
    for ``spec`` (default: the registry's schedule section)."""
    spec = spec or schedule_spec()

    @dg.schedule(
        name=SCHEDULE_NAME,
        cron_schedule=spec.cron,
        execution_timezone=spec.timezone,
        job_name=AUDIT_JOB,
        description=f"Re-audits every registry target at its current model version ({spec.cron}, "
        f"{spec.timezone}; set in the registry's 'schedule' section), running the target's probe families. New "
        "versions get a new partition and audit; a complete audit of an unchanged version is a no-op. " + targets_description(families),
    )
    def reaudit_schedule(context: dg.ScheduleEvaluationContext):
        registry = load_registry()
        versions, errors = current_versions(registry, context.log)
        existing = set(context.instance.get_dynamic_partitions(audit_partitions.name))
        new_keys = [partition_key(n, v) for n, (_, v) in versions.items() if partition_key(n, v) not in existing]
        if new_keys:
            # schedules cannot return dynamic partition requests; add them before the runs resolve
            context.instance.add_dynamic_partitions(audit_partitions.name, new_keys)
        tick = context.scheduled_execution_time.isoformat() if context.scheduled_execution_time else "manual"
        requests = []
        for n, (t, v) in versions.items():
            try:  # a target whose family options are wrong fails alone, named; the others run
                requests.append(
                    audit_run_request(partition_key(n, v), t, v, trigger="schedule", families=families, run_key=f"{partition_key(n, v)}|{tick}")
                )
            except (KeyError, ValueError) as exc:
                errors.append(str(exc))
                context.log.error(f"dora: cannot configure target {n!r}: {exc}")
        if not requests:
            return dg.SkipReason("no target version could be read: " + " | ".join(errors))
        return requests

    return reaudit_schedule
