"""The batch sensor: land the finished Batch API batches of every audit without a person.

A run in batch mode without ``--api-batch-wait`` (a scheduled re-audit, a registry target's
partition) submits its batches and returns; until now its rows waited for someone to run the
same command again. On every tick this sensor reads every batch ledger of ``$DORA_HOME``
(``models_inference/backends/batch_ledger.py``) and, for each with batches open at the API,
rebuilds its step from what the ledger recorded (the family's
:class:`~orchestration.family.BatchStep`) and runs one pass of it
(:func:`~models_inference.backends.batch_api.land_open_batches`): batches that ended are
landed, requests that failed, never ran or were lost are sent again (not for an audit whose
batches a person cancelled: it lands what ran and waits for the audit's next run), and the audit's
``finished`` event lands once nothing is missing. When the batches of a registry target's
partition have all landed, the sensor requests one run of that partition (run key: the
ledger and its number of files, so once), which finds nothing left to generate and builds the
marts. Each pass holds the step's landing lock, and
an audit whose lock is held (a ``dora audit`` of it is landing right now) is left to that run
for this tick: every batch lands exactly once. Ledgers of steps that cannot be rebuilt alone
(a step whose requests follow from the marts, without ``work``) land through their audit's own run.

A ledger that cannot be read is named in the tick's log, never skipped silently. The families
are an argument of :func:`build_batch_sensor` (``orchestration/definitions.py`` passes
:data:`orchestration.families.FAMILIES`): this shared module names none.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from orchestration.instance import AUDIT_JOB

#: The sensor's name in the UI, and seconds between ticks (a batch takes minutes to hours).
BATCH_SENSOR_NAME = "batch_landing_sensor"
BATCH_SENSOR_INTERVAL_SECONDS = 120

_OPEN_AT_THE_API = ("prepared", "uploaded", "submitted", "landing")


def _options(ledger):
    """The batch options a ledger's step ran with (its recorded Config's ``api_batch_*``)."""
    from models_inference.backends.batch_requests import BatchOptions

    record = ledger.meta.get("record") or {}
    config = record.get("config") or {}
    return BatchOptions(
        max_requests=int(config.get("api_batch_max_requests") or 50_000),
        retries=int(config.get("api_batch_retries", 3)),
        max_open=int(config.get("api_batch_max_open") or 0) or None,
        record=record,
    )


def _cancelled(ledger) -> bool:
    """Whether a person cancelled batches of the ledger (``dora batches --cancel``): the sensor
    then lands what ran and sends nothing new (the audit's next run does, when asked)."""
    return any(e.status in ("cancelling", "cancelled") or (e.error or "").startswith("cancelled by") for e in ledger.entries)


def _marts_run(ledger, summary, families: Sequence) -> dg.RunRequest | None:
    """The run of a registry target's partition once its ledger's batches have all landed (its
    marts then hold every row), else ``None`` (an ad-hoc audit's marts are built by its next
    ``dora audit``)."""
    from ingestion.registry import load_registry, partition_key
    from orchestration.defs.audits.runs import audit_run_request

    record = ledger.meta.get("record") or {}
    target, version = record.get("target"), record.get("model_version")
    if not target or not version or summary.pending or not summary.generated:
        return None
    key = partition_key(target, version)
    run_key = f"{key}:batches-landed:{ledger.name}:{len(ledger.entries)}"
    return audit_run_request(key, load_registry().target(target), version, trigger="sensor", families=families, run_key=run_key)


def land_batches(families: Sequence) -> tuple[list[str], list[dg.RunRequest]]:
    """One pass over every ledger with batches open at the API: land what ended (see the
    module docstring).

    Returns:
        One line per ledger acted on or left alone, and per ledger that cannot be read; the runs
        of the registry partitions whose batches have all landed.
    """
    from ingestion.errors import DoraError
    from models_inference.backends.batch_api import land_open_batches
    from models_inference.backends.batch_ledger import ledger_names, load_ledger, unreadable_ledgers
    from orchestration.cli.batch import work_from_ledger

    lines, runs = list(unreadable_ledgers()), []
    for name in ledger_names():
        try:
            ledger = load_ledger(name)
            if not any(e.state in _OPEN_AT_THE_API for e in ledger.entries):
                continue
            work = work_from_ledger(ledger, families)
            summary = land_open_batches(work, _options(ledger), send=not _cancelled(ledger))
            run = _marts_run(load_ledger(name), summary, families) if summary is not None else None
        except DoraError as exc:  # one audit's problem (a key unset, the API refusing) leaves the others alone
            lines.append(f"{name}: {exc}")
            continue
        if summary is None:
            lines.append(f"{name}: being landed by another dora process (its landing lock is held); left to it")
            continue
        lost = f"; {len(summary.lost)} lost batch(es) sent again" if summary.lost else ""
        marts = f"; a run of partition {run.partition_key} builds its marts" if run is not None else ""
        lines.append(f"{name}: {summary.generated:,} rows landed, {summary.pending:,} requests still in open batches{lost}{marts}")
        if run is not None:
            runs.append(run)
    return lines, runs


def build_batch_sensor(families: Sequence) -> dg.SensorDefinition:
    """The batch sensor over ``families`` (every :class:`~orchestration.family.ProbeFamily`)."""

    def tick(context: dg.SensorEvaluationContext):
        from orchestration.instance import prepare_environment

        prepare_environment(dagster=False)
        lines, runs = land_batches(families)
        for line in lines:
            context.log.info(line)
        if runs:
            return dg.SensorResult(run_requests=runs)
        return dg.SkipReason("; ".join(lines) if lines else "no batch open at the API")

    return dg.SensorDefinition(
        name=BATCH_SENSOR_NAME,
        job_name=AUDIT_JOB,
        evaluation_fn=tick,
        minimum_interval_seconds=BATCH_SENSOR_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Lands the finished Batch API batches of every audit (--api-batch without --api-batch-wait, "
        "scheduled re-audits): one pass per ledger with open batches, under the audit's landing lock, so a "
        "concurrent `dora audit` of it and this sensor land each batch once; failed, expired and lost requests "
        "are sent again; the audit's finished event lands once nothing is missing, and a registry partition whose "
        "batches have all landed gets one run that builds its marts.",
    )


__all__ = ["BATCH_SENSOR_INTERVAL_SECONDS", "BATCH_SENSOR_NAME", "build_batch_sensor", "land_batches"]
