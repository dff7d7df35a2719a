"""The resumable probe loop shared by the T2T, T2I and I2T probes (docs/method.md#2-probes).

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
:class:`AuditInfo` (what the audit events carry), :func:`landed_keys`, :func:`model_columns`
(the leading columns of every probe row) and :func:`run_resumable`, which returns a
:class:`ResumableSummary`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

from ingestion.errors import PlanTooLargeError
from ingestion.landing import SCHEMAS, read_landing, write_shard

#: Version of the probe code, stored on every audit event (``landing/audits.code_version``).
CODE_VERSION = "0.1.0"

T = TypeVar("T")


@dataclass(frozen=True)
class ResumableTable:
    """A landing table that a probe fills resumably.

    Attributes:
        name: the landing table (a key of :data:`ingestion.landing.SCHEMAS`).
        key_columns: the columns that, within one audit, identify a planned row (in the order
            of the tuples the ``key`` function of :func:`run_resumable` returns).
        status_column: the column each generated row is counted by in
            :attr:`ResumableSummary.statuses` (and filtered on by ``final_statuses``).
        final_statuses: the statuses that count as landed: a key whose rows all have another
            status (e.g. ``error``) is generated again by the next run. ``None``: any landed
            row counts, whatever its status (nothing is retried).
        unit: what one row is, for the progress bar (``prompt``, ``image``, ...).
        error_status: the status of a row whose call failed (counted against
            ``max_error_share`` by :func:`run_resumable`).
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


@dataclass(frozen=True)
class AuditInfo:
    """What every ``landing/audits`` event of one probe run carries.

    Attributes:
        audit_id: the audit; also the landing partition (sub-folder) of every shard of the run.
        model_id, model_version: the probed model.
        modality: the probe that lands the rows: BiasDora's ``t2t``, ``t2i`` or ``i2t``, or
            another family's probe (``counterfactual``, ``modscan_text``, ``modscan_language``,
            ``modscan_vision``, ``vlstereoset``).
        config: the run's parameters (JSON-serialisable; other values are stored as ``str``).
            Stored as sorted-key JSON in ``config_json``; ``config_hash`` is the first 16 hex
            digits of its sha256.
        target: the audit registry target (``ingestion/registry.py``); ``None`` if ad hoc.
    """

    audit_id: str
    model_id: str
    model_version: str
    modality: str
    config: Mapping = field(default_factory=dict)
    target: str | None = None

    def event(self, status: str, rows_generated: int) -> dict:
        """One ``landing/audits`` row: ``status`` is started / finished / failed, stamped now (UTC)."""
        cfg = json.dumps(self.config, sort_keys=True, default=str)
        return {
            "audit_id": self.audit_id,
            "model_id": self.model_id,
            "model_version": self.model_version,
            "modality": self.modality,
            "config_json": cfg,
            "config_hash": hashlib.sha256(cfg.encode()).hexdigest()[:16],
            "code_version": CODE_VERSION,
            "status": status,
            "rows_generated": rows_generated,
            "event_at": datetime.now(timezone.utc),
            "target": self.target,
        }

    def land_event(self, status: str, rows_generated: int) -> None:
        """Land :meth:`event` as its own shard in the audit's partition of ``landing/audits``."""
        write_shard("audits", [self.event(status, rows_generated)], partition=self.audit_id)


@dataclass
class ResumableSummary:
    """What :func:`run_resumable` did, in rows (every probe run returns one, or a subclass).

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


def slug(text: str, limit: int = 40) -> str:
    """Lower-case ``[a-z0-9._-]`` form of a model name for readable audit ids (``model`` if empty)."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text.lower()).strip("-")[:limit] or "model"


def readable_audit_id(kind: str, names: Sequence[tuple[str, int]], payload: Mapping | str) -> str:
    """The one recipe of dora's deterministic audit ids: ``<kind>-<name>-...-<hash8>``.

    Args:
        kind: the probe's prefix (``t2t``, ``modscan-text``, ``cfsets``, ``vlstereoset-clip``...).
        names: readable parts (model, version...), each as ``(text, limit)``: slugged with
            :func:`slug` and cut to ``limit`` characters.
        payload: everything that changes the audit's rows (JSON, keys sorted), or an already
            computed hex digest; its SHA-256 decides the id, so the same identity always resumes
            the same audit and two identities never share one.

    Returns:
        The id, e.g. ``modscan-text-smollm2-135m-instruct.q4_1.gguf-sha256-3f2a-1a2b3c4d``.
    """
    if isinstance(payload, str):
        digest = payload
    else:
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return "-".join([kind, *(slug(text, limit) for text, limit in names), digest[:8]])


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
    return set(zip(*columns))


def plan_resumable(planned: Iterable[T], key: Callable[[T], Hashable], *, table: ResumableTable, audit_id: str) -> ResumableSummary:
    """What :func:`run_resumable` would do, without generating anything (``dora audit --dry-run``).

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


# --- failing audits fail loudly; audit identity; one generator per audit -----------

#: Default share of a run's calls that may fail before the audit ends ``failed``.
DEFAULT_MAX_ERROR_SHARE = 0.1


def audit_events(audit_id: str) -> list[dict]:
    """Every landed ``landing/audits`` event of ``audit_id``, oldest first."""
    rows = read_landing("audits", filters={"audit_id": audit_id}).to_pylist()
    return sorted(rows, key=lambda r: (r["event_at"] is None, r["event_at"]))


def check_audit_identity(audit: AuditInfo, identity: Mapping | None) -> None:
    """Refuse to add rows to an existing audit of another identity.

    The identity of an audit is everything that changes its rows: model id, full model
    version, modality and ``identity`` (backend, generation config, selection; stored as
    ``config["identity"]`` on every event). Events of older code without an ``identity``
    are compared on model id / version / modality only.

    Raises:
        AuditIdentityError: ``audit.audit_id`` names an audit whose events say otherwise.
    """
    from ingestion.errors import AuditIdentityError

    for event in audit_events(audit.audit_id):
        theirs = {"model_id": event["model_id"], "model_version": event["model_version"], "modality": event["modality"]}
        ours = {"model_id": audit.model_id, "model_version": audit.model_version, "modality": audit.modality}
        try:
            stored = json.loads(event["config_json"] or "{}").get("identity")
        except ValueError:
            stored = None
        if isinstance(stored, dict) and identity is not None:
            mine = json.loads(json.dumps(dict(identity), default=str))
            for k in sorted(set(stored) | set(mine)):
                if k not in ("model", "version"):  # = model_id / model_version, compared above
                    theirs[k], ours[k] = stored.get(k), mine.get(k)
        diff = [k for k in ours if theirs.get(k) != ours[k]]
        if diff:
            detail = ", ".join(f"{k}: {_short(theirs.get(k))} vs {_short(ours[k])}" for k in diff)
            raise AuditIdentityError(
                f"audit {audit.audit_id!r} already exists with another identity ({detail}); its rows would "
                "be mixed with this run's. Drop --audit-id (the default id is derived from the identity) or "
                "name a new audit id"
            )
        return  # one event is enough: every event of an audit carries the same identity


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def failure_message(summary: "ResumableSummary | None", errors: Counter, total: int, untried: int = 0, *,
                    step: str | None = None, max_error_share: float | None = None) -> str:
    """``"<step>: 412 of 468 calls failed (88% > --max-error-share 0.1): <most common error>. ..."``
    (one line): the step, the count and share, the cause (redacted of key-shaped tokens,
    :func:`models_inference.backends.openai_api.redact`), and that the next run retries the
    failed rows. ``untried``: rows not tried because a whole batch failed."""
    from models_inference.backends.openai_api import redact

    n = sum(errors.values())
    cause = errors.most_common(1)[0][0] if errors else "unknown error"
    cause = redact(" ".join(str(cause).split()))[:300]
    if untried:
        why = f"every call of a batch failed; stopped with {untried} more rows not tried"
    elif max_error_share is not None and total:
        why = f"{n / total:.0%} > --max-error-share {max_error_share:g}"
    else:
        why = f"{n / total:.0%}" if total else ""
    head = f"{step}: " if step else ""
    return (
        f"{head}{n} of {total} calls failed ({why}): {cause}. The failed rows landed as 'error' and the next "
        "run retries them: fix the cause, then re-run the same command"
    )


@dataclass
class ErrorShare:
    """The failed calls of one run of a step, against ``--max-error-share``.

    Every loop that lands model calls (:func:`run_resumable`, the judge, the counterfactual
    stereotype filter) counts its landed rows here, shard by shard, after landing them (so
    nothing is lost), and raises :class:`~ingestion.errors.AuditFailedError` when more than
    ``max_error_share`` of the rows of this run failed, or when every row of a shard of 8 or
    more failed (the rest would too; not with a limit of 1). ``max_error_share=None`` or ``1``
    never raises.

    Attributes:
        step: the step's name in the message (``"counterfactual text sets"``, ``"judge"``...).
        max_error_share: the limit, a share in [0, 1]; ``None``: no limit.
        total: rows counted so far. errors: their error texts, counted.
    """

    step: str
    max_error_share: float | None
    total: int = 0
    errors: Counter = field(default_factory=Counter)

    def add(self, rows: Sequence[Mapping], status_column: str, error_column: str | None = None, error_status: str = "error",
            *, untried: int = 0) -> None:
        """Count a landed shard's rows (those with ``status_column == error_status`` failed;
        their text is ``error_column``); raise at once if every row of a shard of 8+ failed
        (``untried``: rows of the run left after this shard, named in the message).

        Raises:
            AuditFailedError: the whole shard failed and a limit is set.
        """
        failed = [r for r in rows if r[status_column] == error_status]
        self.total += len(rows)
        self.errors.update(str((r.get(error_column) if error_column else None) or error_status) for r in failed)
        if self.max_error_share is not None and self.max_error_share < 1 and len(rows) >= 8 and len(failed) == len(rows):
            self._raise(untried=untried)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def check(self) -> None:
        """Raise when more than ``max_error_share`` of the counted rows failed.

        Raises:
            AuditFailedError: the share is above the limit (names step, share and cause).
        """
        if self.max_error_share is not None and self.total and self.failed / self.total > self.max_error_share:
            self._raise()

    def _raise(self, untried: int = 0):
        from ingestion.errors import AuditFailedError

        raise AuditFailedError(failure_message(None, self.errors, self.total, untried, step=self.step,
                                               max_error_share=self.max_error_share))


def landing_lock(audit_id: str):
    """An inter-process lock (:mod:`filelock`, ``$DORA_HOME/state/locks/<name>.lock``) per
    audit id (or per scorer and table: ``scoring--<table>--<name>``): two identical concurrent runs do not
    both generate; the second waits (:class:`holding_lock`), then finds the rows landed."""
    from filelock import FileLock

    from ingestion.landing import dora_home, safe_path_component

    folder = dora_home() / "state" / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{safe_path_component(audit_id)}.lock"))


# --- concurrency: a second identical run says whom it waits for ----------------------------
def lock_holder(lock) -> dict | None:
    """What the holder of ``lock`` wrote beside it (pid, host, started_at, command), or ``None``."""
    try:
        with open(f"{lock.lock_file}.json") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


class holding_lock:
    """Context manager: acquire the :mod:`filelock` ``lock``, saying on stderr (one line) whom it
    waits for when another process holds it, and record this process as its holder
    (``<lock file>.json``: pid, host, started_at, command) while it holds it.

    A lock held by a process that dies is released by the operating system (``flock``), so a
    killed run never blocks the next one; the holder file is only informative.
    """

    def __init__(self, lock, what: str):
        self.lock, self.what = lock, what

    def __enter__(self):
        import os
        import socket

        from filelock import Timeout

        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            who = lock_holder(self.lock) or {}
            print(
                f"dora: {self.what} is being generated by another run (pid {who.get('pid', '?')} on "
                f"{who.get('host', '?')}, started {who.get('started_at', '?')}: {who.get('command', '?')}); "
                "waiting for it to finish, then generating only what is still missing",
                file=sys.stderr, flush=True,
            )
            self.lock.acquire()
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "command": " ".join(sys.argv)[:500]}
        try:
            with open(f"{self.lock.lock_file}.json", "w") as fh:
                json.dump(holder, fh)
        except OSError:  # informative only
            pass
        return self

    def __exit__(self, *exc):
        self.lock.release()


def run_resumable(
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
    landed), after checking the audit's identity (:func:`check_audit_identity`).

    Args:
        planned: the planned items, in generation order (e.g. ``(target, letter, run)``).
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
            error (:func:`failure_message`); ``None`` (or 1) never fails on errors. A shard whose
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
    from tqdm.auto import tqdm

    if shard_rows < 1:
        raise ValueError(f"shard_rows must be >= 1, got {shard_rows}")
    if identity is not None:
        audit = AuditInfo(audit.audit_id, audit.model_id, audit.model_version, audit.modality,
                          {**audit.config, "identity": dict(identity)}, audit.target)
    check_audit_identity(audit, identity)
    name = audit.audit_id if block is None else f"{audit.audit_id}--{block}"
    with holding_lock(landing_lock(name), f"audit {name}"):
        summary = ResumableSummary(audit.audit_id)
        done = landed_keys(table, audit.audit_id)
        todo: list[T] = []
        for item in planned:
            summary.planned += 1
            if key(item) in done:
                summary.already_landed += 1
            else:
                todo.append(item)
        if not todo:
            if block is not None:  # the audit's last event is finish_blocks' business
                return summary
            # a run that was interrupted (or failed) and whose rows have all landed since: its last
            # event must not stay 'failed' / 'started' when nothing is missing any more
            events = audit_events(audit.audit_id) if summary.planned else []
            if events and events[-1]["status"] != "finished":
                audit.land_event("finished", 0)
            return summary
        audit.land_event("started", 0)
        tally = ErrorShare(step or audit.modality, max_error_share)
        desc = f"{audit.modality.upper()} {audit.model_id}"
        bar = tqdm(total=len(todo), desc=desc, unit=table.unit, disable=not progress, file=sys.stderr)
        try:
            for start in range(0, len(todo), shard_rows):
                rows = generate_batch(todo[start : start + shard_rows], bar.update)
                write_shard(table.name, rows, partition=audit.audit_id)  # landed before any failure is raised
                summary.generated += len(rows)
                summary.statuses.update(row[table.status_column] for row in rows)
                # every call of a whole shard failed: the rest would too; stop now
                tally.add(rows, table.status_column, table.error_column, table.error_status,
                          untried=len(todo) - min(len(todo), start + shard_rows))
            tally.check()
        except BaseException:
            audit.land_event("failed", summary.generated)
            raise
        finally:
            bar.close()
        if block is None:
            audit.land_event("finished", summary.generated)
        return summary


def finish_blocks(audit_id: str, generated: int) -> bool:
    """Land the ``finished`` event of an audit whose keys ran as blocks (``run_resumable(...,
    block=...)``), once every block has succeeded.

    The event copies the audit's latest event (model, version, config, target) with status
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
    write_shard("audits", [{**events[-1], "status": "finished", "rows_generated": generated,
                            "event_at": datetime.now(timezone.utc)}], partition=audit_id)
    return True


def block_bounds(units: int, block_size: int) -> list[tuple[int, int]]:
    """Split ``units`` planned units (T2T targets, counterfactual sets...) into contiguous
    blocks of at most ``block_size``: ``[(start, stop), ...]``, always at least one (an empty
    ``(0, 0)`` when ``units`` is 0, so a fan-in step still runs).

    Raises:
        ValueError: ``block_size < 1`` or ``units < 0``.
    """
    if block_size < 1 or units < 0:
        raise ValueError(f"block size must be >= 1 and units >= 0, got {block_size} and {units}")
    return [(start, min(units, start + block_size)) for start in range(0, units, block_size)] or [(0, 0)]


__all__ = ["CODE_VERSION", "MAX_PLANNED_ROWS", "AuditInfo", "ErrorShare", "ResumableSummary", "ResumableTable", "block_bounds", "check_plan_size", "finish_blocks", "holding_lock", "landed_keys", "landing_lock", "model_columns", "plan_resumable", "record_audit_target", "run_resumable"]


def record_audit_target(audit_id: str, target: str, model_id: str, model_version: str, modality: str) -> bool:
    """Land one ``landing/audits`` event attributing ``audit_id`` to a registry target.

    The event copies the audit's latest event (status, config, rows) with ``target`` and the
    model id, model version and modality its associations carry (``int_document_words``:
    objective descriptions -> the image model, ``t2i``; subjective -> the describer, ``i2t``).
    ``dim_audits`` takes the latest event's fields, so the audit joins its target's history.

    Returns:
        True if an event landed; False when the latest event already says so, or the audit
        has no event (nothing was generated).
    """
    events = read_landing("audits", filters={"audit_id": audit_id}).to_pylist()
    if not events:
        return False
    latest = max(events, key=lambda e: e["event_at"])
    tag = {"target": target, "model_id": model_id, "model_version": model_version, "modality": modality}
    if all(latest[k] == v for k, v in tag.items()):
        return False
    write_shard("audits", [{**latest, **tag, "event_at": datetime.now(timezone.utc)}], partition=audit_id)
    return True


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
