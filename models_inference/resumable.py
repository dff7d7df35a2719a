"""The resumable probe loop every probe family runs on (docs/method.md#2-probes).

Every probe plans one row per key (T2T: setting x descriptor x letter x run; T2I: setting x
descriptor x image index; I2T: image x description setting), reads which keys already landed
for the audit, generates only the missing ones in batches, and lands each batch as one
immutable Parquet shard (:func:`ingestion.landing.write_shard`: temp file, fsync, rename) in
the audit's partition of its landing table. ``landing/audits`` receives a ``started`` event
before the first model call, then ``finished`` or, on any exception (including
``KeyboardInterrupt``), ``failed`` with the rows landed so far. A crash after N shards
therefore loses at most the batch being generated, and the next run generates only the keys
still missing; a run with nothing missing makes no model call and lands no event.

Public API: :class:`ResumableTable` (which landing table, its key and status columns),
:func:`landed_keys`, :func:`model_columns` (the leading columns of every probe row),
:func:`land_resumable`, which returns a :class:`ResumableSummary`, the run most probe runners
share on top of it (:func:`land_probe`: the audit of :func:`probe_audit`, the model columns and
timestamp of every row), the blocks of one audit (:func:`block_bounds`, :func:`finish_blocks`)
and the bound on a plan (:func:`check_plan_size`).
What the loop builds on has its own module: the audit events and identity
(:mod:`models_inference.audit_log`), the failed-call limit (:mod:`models_inference.error_share`)
and the inter-process locks (:mod:`models_inference.landing_locks`).
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

from ingestion.errors import PlanTooLargeError
from ingestion.landing import SCHEMAS, read_landing, write_shard
from models_inference.audit_log import AuditInfo, audit_events, check_audit_identity
from models_inference.error_share import ErrorShare
from models_inference.landing_locks import holding_lock, landing_lock

T = TypeVar("T")


@dataclass(frozen=True)
class ResumableTable:
    """A landing table that a probe fills resumably.

    Attributes:
        name: the landing table (a key of :data:`ingestion.landing.SCHEMAS`).
        key_columns: the columns that, within one audit, identify a planned row (in the order
            of the tuples the ``key`` function of :func:`land_resumable` returns).
        status_column: the column each generated row is counted by in
            :attr:`ResumableSummary.statuses` (and filtered on by ``final_statuses``).
        final_statuses: the statuses that count as landed: a key whose rows all have another
            status (e.g. ``error``) is generated again by the next run. ``None``: any landed
            row counts, whatever its status (nothing is retried).
        unit: what one row is, for the progress bar (``prompt``, ``image``, ...).
        error_status: the status of a row whose call failed (counted against
            ``max_error_share`` by :func:`land_resumable`).
        error_column: the column holding a failed row's error text (for the failure message).
        null_defaults: ``(column, value)`` pairs: a landed null in a key column reads as
            ``value`` (a key column added later, e.g. T2T ``descriptor_row``: rows landed
            before it existed are its first row).

    Raises:
        KeyError: unknown table. ValueError: a key or status column the table does not have.
    """

    name: str
    key_columns: tuple[str, ...]
    status_column: str
    final_statuses: tuple[str, ...] | None = None
    unit: str = "row"
    error_status: str = "error"
    error_column: str | None = None
    null_defaults: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        names = SCHEMAS[self.name].names
        if not self.key_columns:
            raise ValueError(f"no key column given for landing table {self.name!r}")
        missing = [c for c in (*self.key_columns, self.status_column) if c not in names]
        if missing:
            raise ValueError(f"landing table {self.name!r} has no column(s) {missing}")


@dataclass
class ResumableSummary:
    """What :func:`land_resumable` did, in rows (every probe run returns one, or a subclass).

    Attributes:
        audit_id: the audit the rows belong to.
        planned: planned keys (counted with repeats, as given).
        already_landed: planned keys found landed before the run (not generated again).
        generated: rows landed by this run.
        statuses: the rows landed by this run, by their ``status_column`` value.
    """

    audit_id: str = ""
    planned: int = 0
    already_landed: int = 0
    generated: int = 0
    statuses: Counter = field(default_factory=Counter)

    @property
    def parse_rate(self) -> float:
        """Share of generated rows with status ``ok`` (0.0 when nothing was generated)."""
        return self.statuses["ok"] / self.generated if self.generated else 0.0


def key_seed(*parts) -> int:
    """A row's sampling seed from its key: the 63-bit big-endian blake2b (8 bytes, shifted
    right once) of ``"|".join(str(p) for p in parts)``; stable across machines and batches,
    so a row's sample does not depend on which other rows are generated with it."""
    payload = "|".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(payload, digest_size=8).digest(), "big") >> 1


def model_columns(audit_id: str, backend) -> dict:
    """The columns every probe row starts with: ``audit_id``, ``model_id``, ``model_version``
    and ``backend`` (the backend's name), from any backend with ``backend_name``, ``model_id``
    and ``model_version`` attributes (text, image or vision)."""
    return {
        "audit_id": audit_id,
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "backend": backend.backend_name,
    }


def landed_keys(table: ResumableTable, audit_id: str) -> set[tuple]:
    """The keys (tuples of ``table.key_columns`` values) of ``audit_id`` already landed in ``table``.

    Only rows whose status is in ``table.final_statuses`` count, unless that is ``None``.
    """
    filters: dict = {"audit_id": audit_id}
    if table.final_statuses is not None:
        filters[table.status_column] = list(table.final_statuses)
    data = read_landing(table.name, columns=list(table.key_columns), filters=filters)
    defaults = dict(table.null_defaults)
    columns = []
    for c in table.key_columns:
        values = data.column(c).to_pylist()
        if c in defaults:
            values = [defaults[c] if v is None else v for v in values]
        columns.append(values)
    return set(zip(*columns, strict=True))


def plan_resumable(planned: Iterable[T], key: Callable[[T], Hashable], *, table: ResumableTable, audit_id: str) -> ResumableSummary:
    """What :func:`land_resumable` would do, without generating anything (``dora audit --dry-run``).

    Returns:
        A :class:`ResumableSummary` with ``planned`` and ``already_landed`` set (rows to
        generate = planned - already_landed) and ``generated`` = 0.
    """
    done = landed_keys(table, audit_id)
    summary = ResumableSummary()
    for item in planned:
        summary.planned += 1
        summary.already_landed += key(item) in done
    return summary


def land_resumable(
    planned: Iterable[T],
    key: Callable[[T], Hashable],
    generate_batch: Callable[[list[T], Callable[[int], None]], Sequence[Mapping]],
    *,
    table: ResumableTable,
    audit: AuditInfo,
    shard_rows: int,
    progress: bool = True,
    max_error_share: float | None = None,
    identity: Mapping | None = None,
    step: str | None = None,
    block: str | None = None,
) -> ResumableSummary:
    """Generate and land, in shards, every planned row of ``audit`` that has not landed yet,
    under the audit's inter-process lock (a second identical audit waits, then finds the rows
    landed), after checking the audit's identity (:func:`~models_inference.audit_log.check_audit_identity`).

    Args:
        planned: the planned items, in generation order (e.g. ``(template, letter, run)``).
        key: maps an item to its key, a tuple in the order and types of
            ``table.key_columns`` (e.g. ``(setting, descriptor, letter, run)``).
        generate_batch: ``generate_batch(items, advance)`` generates up to ``shard_rows``
            missing items and returns their rows (dicts with the columns of
            ``SCHEMAS[table.name]``, normally one per item); it calls ``advance(n)`` as ``n``
            items are done, which moves the progress bar.
        table: the landing table and its key / status columns.
        audit: the audit the rows belong to; its ``audit_id`` is the shard partition.
        shard_rows: items per batch, hence rows per landed shard (at most this much work is
            lost on a crash).
        progress: show a tqdm bar on stderr, labelled ``"<MODALITY> <model_id>"`` and
            counting ``table.unit``.
        max_error_share: when more than this share of the rows generated by this run have
            ``table.error_status`` (calls that failed), the audit ends ``failed`` and
            :class:`~ingestion.errors.AuditFailedError` names the count and the most common
            error (:func:`~models_inference.error_share.failure_message`); ``None`` (or 1) never fails on errors. A shard whose
            every row failed (8 rows or more) stops the run at once (limit below 1).
        identity: what identifies the audit's rows besides model, version and modality
            (backend, generation config, selection); stored on every event.
        step: the step named in the failure message (default: the audit's modality).
        block: the name of this block when the audit's keys are split into blocks that run
            apart (one Dagster step each, possibly on other machines; ``planned`` is then
            only this block's keys): the lock is the block's own (``<audit>--<block>``), so
            blocks of one audit run in parallel, and the block lands ``started`` / ``failed``
            but never ``finished``: :func:`finish_blocks` lands it once every block is done.
            ``max_error_share`` then applies to each block. ``None``: the whole audit.

    Returns:
        A :class:`ResumableSummary`. Audit events: none if nothing was missing, else
        ``started`` (0 rows) then ``finished`` (rows generated; not for a ``block``).

    Raises:
        ValueError: ``shard_rows < 1`` (before anything is read or landed).
        AuditIdentityError: the audit id exists with another identity (nothing generated).
        AuditFailedError: too many failed calls (see ``max_error_share``).
        Whatever ``generate_batch`` or the landing raises, re-raised after a ``failed``
        event carrying the rows landed so far; the shards already landed are kept.
    """
    if shard_rows < 1:
        raise ValueError(f"shard_rows must be >= 1, got {shard_rows}")
    if identity is not None:
        audit = replace(audit, config={**audit.config, "identity": dict(identity)})
    check_audit_identity(audit, identity)
    name = audit.audit_id if block is None else f"{audit.audit_id}--{block}"
    with holding_lock(landing_lock(name), f"audit {name}"):
        summary, todo = _missing(planned, key, table, audit.audit_id)
        if not todo:
            if block is None:  # with blocks, the audit's last event is finish_blocks' business
                _close_landed(audit, summary)
            return summary
        audit.land_event("started", 0)
        try:
            _land_shards(todo, generate_batch, table, audit, summary, shard_rows, ErrorShare(step or audit.modality, max_error_share), progress)
        except BaseException:
            audit.land_event("failed", summary.generated)
            raise
        if block is None:
            audit.land_event("finished", summary.generated)
        return summary


def _missing(planned: Iterable[T], key: Callable[[T], Hashable], table: ResumableTable, audit_id: str) -> tuple[ResumableSummary, list[T]]:
    """(the summary's planned and already-landed counts, the planned items not landed yet)."""
    summary = ResumableSummary(audit_id)
    done = landed_keys(table, audit_id)
    todo: list[T] = []
    for item in planned:
        summary.planned += 1
        if key(item) in done:
            summary.already_landed += 1
        else:
            todo.append(item)
    return summary, todo


def _close_landed(audit: AuditInfo, summary: ResumableSummary) -> None:
    """A run that was interrupted (or failed) and whose rows have all landed since: its last
    event must not stay 'failed' / 'started' when nothing is missing any more."""
    events = audit_events(audit.audit_id) if summary.planned else []
    if events and events[-1]["status"] != "finished":
        audit.land_event("finished", 0)


def _land_shards(
    todo: list, generate_batch, table: ResumableTable, audit: AuditInfo, summary: ResumableSummary, shard_rows: int, tally, progress: bool
) -> None:
    """Generate ``todo`` in batches of ``shard_rows`` and land each batch as one shard before the
    next, counting into ``summary``; raises AuditFailedError through ``tally`` (an ErrorShare)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(todo), desc=f"{audit.modality.upper()} {audit.model_id}", unit=table.unit, disable=not progress, file=sys.stderr)
    try:
        for start in range(0, len(todo), shard_rows):
            rows = generate_batch(todo[start : start + shard_rows], bar.update)
            write_shard(table.name, rows, partition=audit.audit_id)  # landed before any failure is raised
            summary.generated += len(rows)
            summary.statuses.update(row[table.status_column] for row in rows)
            # every call of a whole shard failed: the rest would too; stop now
            tally.add(rows, table.status_column, table.error_column, table.error_status, untried=len(todo) - min(len(todo), start + shard_rows))
        tally.check()
    finally:
        bar.close()


def probe_audit(audit_id: str, backend, modality: str, config: Mapping, *, family: str, target: str | None = None) -> AuditInfo:
    """The :class:`~models_inference.audit_log.AuditInfo` of a probe run on ``backend``: its
    model id and version, ``modality``, ``config`` with ``backend`` (the backend's name) added,
    ``target`` and ``family``.

    Args:
        audit_id: the audit. backend: anything with ``backend_name``, ``model_id`` and
            ``model_version`` (a text, image or vision backend, a VLStereoSet scorer).
        modality: the probe (``t2t``, ``modscan_text``, ...: :class:`AuditInfo`).
        config: the run's parameters (JSON values); a ``backend`` key in it wins over the
            backend's name. family: the ``FAMILY`` of the probe's landing contract.
        target: the registry target (``ingestion/registry.py``); ``None`` for an ad-hoc audit.
    """
    return AuditInfo(audit_id, backend.model_id, backend.model_version, modality, {"backend": backend.backend_name, **config}, target, family=family)


def land_probe(
    planned: Iterable[T],
    key: Callable[[T], Hashable],
    generate_rows: Callable[[list[T], Callable[[int], None]], Sequence[Mapping]],
    *,
    table: ResumableTable,
    backend,
    audit_id: str,
    modality: str,
    config: Mapping,
    family: str,
    target: str | None = None,
    shard_rows: int,
    progress: bool = True,
    max_error_share: float | None = None,
    step: str | None = None,
    block: str | None = None,
    time_column: str = "generated_at",
) -> ResumableSummary:
    """One probe run on ``backend``: :func:`land_resumable` over ``planned``, with the audit of
    :func:`probe_audit` and every row stamped with the columns all probe rows share.

    Each shard's rows are ``{**model_columns(audit_id, backend), **row, time_column: now}``
    for the rows ``generate_rows`` returns (:func:`model_columns`), ``now`` being one UTC
    timestamp per shard, read once ``generate_rows`` has returned (after the shard's model
    calls).

    Args:
        planned, key, table, shard_rows, progress, max_error_share, step, block: as
            :func:`land_resumable`.
        generate_rows: ``generate_rows(items, advance)`` calls the model for up to
            ``shard_rows`` items and returns their rows (dicts with every column of
            ``SCHEMAS[table.name]`` but ``audit_id``, ``model_id``, ``model_version``,
            ``backend`` and ``time_column``; any number per item), calling ``advance(n)`` as
            ``n`` items are done.
        backend: the probed model (``backend_name``, ``model_id``, ``model_version``).
        audit_id, modality, config, family, target: the audit (:func:`probe_audit`).
        time_column: the column that gets the shard's timestamp (``generated_at``; VLStereoSet:
            ``scored_at``).

    Returns:
        The :class:`ResumableSummary` of :func:`land_resumable`.

    Raises:
        As :func:`land_resumable`: ValueError (``shard_rows < 1``), AuditIdentityError,
        AuditFailedError, and whatever ``generate_rows`` or the landing raises (after a
        ``failed`` event).
    """

    def generate(items: list[T], advance: Callable[[int], None]) -> list[dict]:
        rows = generate_rows(items, advance)
        now = datetime.now(timezone.utc)
        leading = model_columns(audit_id, backend)
        return [{**leading, **row, time_column: now} for row in rows]

    audit = probe_audit(audit_id, backend, modality, config, family=family, target=target)
    return land_resumable(
        planned,
        key,
        generate,
        table=table,
        audit=audit,
        shard_rows=shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step=step,
        block=block,
    )


def finish_blocks(audit_id: str, generated: int) -> bool:
    """Land the ``finished`` event of an audit whose keys ran as blocks (``land_resumable(...,
    block=...)``), once every block has succeeded.

    The event copies the audit's latest event (model, version, config, target, family) with status
    ``finished``, ``rows_generated`` = ``generated`` (the sum over the blocks) and the time now.

    Args:
        audit_id: the audit. generated: rows the blocks of this run generated.

    Returns:
        True if an event landed; False when nothing was generated and the latest event is
        already ``finished``, or the audit has no event (nothing was ever generated), as a
        whole-audit run with nothing missing lands nothing.
    """
    events = audit_events(audit_id)
    if not events or (generated == 0 and events[-1]["status"] == "finished"):
        return False
    write_shard(
        "audits", [{**events[-1], "status": "finished", "rows_generated": generated, "event_at": datetime.now(timezone.utc)}], partition=audit_id
    )
    return True


def block_bounds(units: int, block_size: int) -> list[tuple[int, int]]:
    """Split ``units`` planned units (T2T templates, counterfactual sets...) into contiguous
    blocks of at most ``block_size``: ``[(start, stop), ...]``, always at least one (an empty
    ``(0, 0)`` when ``units`` is 0, so a fan-in step still runs).

    Raises:
        ValueError: ``block_size < 1`` or ``units < 0``.
    """
    if block_size < 1 or units < 0:
        raise ValueError(f"block size must be >= 1 and units >= 0, got {block_size} and {units}")
    return [(start, min(units, start + block_size)) for start in range(0, units, block_size)] or [(0, 0)]


# --- bounded work: counts a user can pass must not plan more than one run can hold ----------

#: Most rows one probe run may plan. The plan and its keys are held in memory (about 0.5 kB a
#: row: a million rows is ~0.5 GB) and a million generations is days of model time on a local
#: model; larger audits are split into runs (more seeds or samples in a later run extend the
#: same audit, whose id does not depend on them).
MAX_PLANNED_ROWS = 1_000_000


def check_plan_size(rows: int, step: str, counts: str) -> None:
    """Refuse a plan of more than :data:`MAX_PLANNED_ROWS` rows, before any is built.

    Args:
        rows: the plan's row count, computed from the counts (not by building it).
        step: the probe, for the message. counts: the product that gave ``rows``, in words
            (``"12 members x 10 prompts x 1000000 seeds"``), so the user sees which count to lower.

    Raises:
        PlanTooLargeError: ``rows`` is over the limit (one line: the count, the product, the limit).
    """
    if rows > MAX_PLANNED_ROWS:
        raise PlanTooLargeError(
            f"{step}: {counts} plans {rows:,} rows, more than the {MAX_PLANNED_ROWS:,} one run may hold; "
            "lower the counts (a later run with more seeds or samples extends the same audit)"
        )
