"""Batch mode of the API steps that carry the volume: the OpenAI Batch API, and the same JSONL
format for offline runners (vLLM's ``vllm run-batch``).

Against a hosted model, one request per row means hours of rate limits at full price; the
OpenAI Batch API takes the same requests as JSONL files (one line per request:
``{"custom_id", "method": "POST", "url", "body"}``; at most :data:`MAX_REQUESTS_PER_FILE`
requests and :data:`MAX_FILE_BYTES` per file; endpoints ``/v1/chat/completions`` and
``/v1/completions`` here; completion window ``24h``), at half price in a separate rate-limit
pool. vLLM's ``run-batch`` reads and writes the same line format offline.

A step's batch run (:func:`run_batched`), for its planned rows not yet landed:

1. writes their requests as JSONL files within the limits (:func:`split_sizes`), each line's
   ``custom_id`` the row's resume key (:func:`custom_id`), and records every file with its
   keys in the step's ledger (:mod:`models_inference.backends.batch_ledger`) *before* anything
   is sent; rows already in an open batch are never put into another one;
2. uploads each file (``purpose="batch"``) and creates its batch, recording the file id and
   then the batch id; a run killed between creating a batch and recording it finds the batch
   again by its input file (``batches.list``) instead of creating a second one; a failed
   ``batches.create`` call is never retried blindly (the same look-up first);
3. polls the batches (with ``wait``, until none is open, showing the request counts; without,
   once) and lands each finished batch's output and error files as rows with their status, in
   one shard named after the batch (landing a batch again rewrites the same shard: exactly
   once). Requests that failed (an HTTP error, a reply that is not a completion) land as
   ``error`` rows; requests that never ran (``batch_expired`` / ``batch_cancelled`` lines,
   or missing from an expired or cancelled batch's files) land nothing; both go into the next
   batch (at most ``retries`` times per row in one run; the next run retries the rest). A batch
   the API failed as a whole (a bad file, over a limit) fails the step in one line naming the
   cause (:class:`~ingestion.errors.BatchError`).

Requests carry what the live backend would send (:func:`request_body`: the same fields as
:class:`~models_inference.backends.openai_chat.OpenAIChatBackend`), and replies are read the same way
(:func:`result_of`), so a row is the same whichever way it was generated; the audit id does not
depend on the mode. Offline engines: :func:`export_batched` writes the files and records them
as ``exported``; :func:`import_batched` lands a runner's output file, each file once.

Public API: :class:`BatchSummary`, :func:`run_batched`, :func:`export_batched`,
:func:`import_batched`, :func:`refresh_ledger`, :func:`cancel_ledger`. The line format, the
step's work and options and the file plan are in :mod:`models_inference.backends.batch_requests`
(:class:`~models_inference.backends.batch_requests.BatchOptions`,
:class:`~models_inference.backends.batch_requests.BatchWork`, ``plan_files``, ``split_sizes``,
``custom_id``, ``key_of``, ``request_body``, ``result_of``); the API calls in
:class:`~models_inference.backends.batch_client.BatchClient`.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ingestion.errors import BatchError
from ingestion.landing import write_shard
from models_inference.backends.batch_client import BatchClient
from models_inference.backends.batch_ledger import (
    BatchEntry,
    Ledger,
    atomic_write_text,
    files_dir,
    load_ledger,
    now_text,
    updating,
)
from models_inference.backends.batch_requests import (
    TERMINAL_STATUSES,
    BatchOptions,
    BatchWork,
    custom_id,
    plan_files,
    read_lines,
    result_of,
)
from models_inference.audit_log import AuditInfo, audit_events, check_audit_identity
from models_inference.error_share import ErrorShare
from models_inference.landing_locks import holding_lock, landing_lock
from models_inference.resumable import ResumableSummary

# ----------------------------------------------------------------------------- the run


@dataclass
class BatchSummary(ResumableSummary):
    """What a batch run did: :class:`~models_inference.resumable.ResumableSummary` (rows landed
    by this run in ``generated``) plus the batch work.

    Attributes:
        files: files written by this run. submitted: requests sent by this run.
        batches: batch ids created by this run. pending: requests in batches still open at the end.
        not_run: requests that never ran (expired, cancelled), put back for the next batch.
    """

    files: int = 0
    submitted: int = 0
    batches: list[str] = field(default_factory=list)
    pending: int = 0
    not_run: int = 0


def _failure_cause(batch) -> str:
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    parts = []
    for err in errors[:3]:
        where = f" (line {err.line})" if getattr(err, "line", None) is not None else ""
        parts.append(f"{err.code}: {err.message}{where}")
    return "; ".join(parts) or f"status {batch.status} without an error message"


class _Runner:
    """One batch run of a step (see :func:`run_batched`)."""

    def __init__(self, work: BatchWork, options: BatchOptions, summary: BatchSummary, tally: ErrorShare | None):
        self.work, self.options, self.summary, self.tally = work, options, summary, tally
        self.items = {}
        for item in work.planned:
            self.items.setdefault(custom_id(work.key(item)), item)
        self._client: BatchClient | None = None
        self.bar = None
        self.ended = 0  # requests of the batches this run landed (the progress bar's done part)

    @property
    def client(self) -> BatchClient:
        if self._client is None:
            self._client = BatchClient(self.work.backend, self.work.step)
        return self._client

    def prepare(self, items: Sequence, state: str = "prepared", folder: Path | None = None) -> list[BatchEntry]:
        """Write ``items``' files and record them (state ``prepared``, or ``exported`` into ``folder``)."""
        plans = plan_files(self.work, items, self.options)
        entries = []
        with updating(self.work.name) as ledger:
            ledger.step = self.work.step
            ledger.meta = {**ledger.meta, **self.work.meta(self.options)}
            for plan in plans:
                entry = BatchEntry(BatchEntry.new_id(), plan.keys, plan.endpoint, plan.requests, plan.bytes, state=state)
                path = (folder or files_dir(self.work.name)) / f"{entry.id}.jsonl"
                # the file first, then its entry: a kill in between leaves a file nothing points to
                atomic_write_text(path, b"".join(plan.lines).decode("utf-8"))
                entry.path = str(path)
                ledger.entries.append(entry)
                entries.append(entry)
        self.summary.files += len(entries)
        return entries

    def _save(self, entry_id: str, **changes) -> BatchEntry:
        with updating(self.work.name) as ledger:
            entry = ledger.entry(entry_id)
            for k, v in changes.items():
                setattr(entry, k, v)
            entry.touch()
        return entry

    def submit(self, entry: BatchEntry) -> BatchEntry:
        """Upload and create the batch of a ``prepared`` / ``uploaded`` entry, recording each step."""
        if entry.state == "prepared":
            file_id = self.client.upload(Path(entry.path))
            entry = self._save(entry.id, file_id=file_id, state="uploaded")
        if entry.state == "uploaded":
            batch = self.client.create(entry.file_id, entry.endpoint, {"dora_entry": entry.id, "dora_ledger": self.work.name[:500]})
            entry = self._save(entry.id, batch_id=batch.id, state="submitted", status=batch.status)
            self.summary.submitted += entry.requests
            self.summary.batches.append(batch.id)
        return entry

    def poll(self, entry: BatchEntry) -> BatchEntry:
        """Refresh a ``submitted`` entry's status; land it when its batch has ended."""
        batch = self.client.retrieve(entry.batch_id)
        counts = getattr(batch, "request_counts", None)
        seen = (batch.status, getattr(counts, "completed", 0) or 0, getattr(counts, "failed", 0) or 0)
        if seen != (entry.status, entry.completed, entry.failed):  # the ledger is rewritten only on a change
            entry = self._save(entry.id, status=seen[0], completed=seen[1], failed=seen[2])
        if batch.status in TERMINAL_STATUSES:
            entry = self.land(entry, batch)
        return entry

    def land(self, entry: BatchEntry, batch) -> BatchEntry:
        """Land an ended batch's output and error files (or, for a batch failed as a whole,
        close it and raise :class:`BatchError` naming the cause)."""
        if batch.status == "failed" and not getattr(batch, "output_file_id", None):
            cause = _failure_cause(batch)
            self._save(entry.id, state="closed", error=cause)
            raise BatchError(
                f"{self.work.step}: batch {batch.id} ({entry.requests:,} requests, file {entry.id}.jsonl) failed as a "
                f"whole: {cause}; none of its requests ran: fix the cause, then run the same command again"
            )
        lines = []
        for file_id in (getattr(batch, "output_file_id", None), getattr(batch, "error_file_id", None)):
            if file_id:
                lines += read_lines(self.client.content(file_id))
        return self.land_lines(entry, lines)

    def land_lines(self, entry: BatchEntry, lines: Sequence[Mapping]) -> BatchEntry:
        """Land the rows of ``entry``'s requests found in ``lines`` (one shard named after the
        entry: landing it again rewrites that shard), close the entry and count the rows."""
        by_cid = {line["custom_id"]: line for line in lines}
        if entry.state != "landing":  # the keys landed by another way meanwhile are left out, once and for all
            done = self.work.done()
            skip = [c for c in entry.keys if c in by_cid and c in self.items and self.work.key(self.items[c]) in done]
            entry = self._save(entry.id, state="landing", skip=skip)
        skip = set(entry.skip)
        items, results, not_run = [], [], 0
        key = getattr(self._client, "key", None)
        for cid in entry.keys:
            line = by_cid.get(cid)
            result = (
                None
                if line is None
                else result_of(line, entry.endpoint, self.work.backend, constraint=self.work.constraint, choices=self.work.choices, key=key)
            )
            if result is None:
                not_run += 1
            elif cid not in skip and cid in self.items:
                items.append(self.items[cid])
                results.append(result)
        rows = self.work.rows(items, results) if items else []
        write_shard(self.work.table, rows, partition=self.work.partition, name=f"batch-{entry.id}")
        if entry.path and Path(entry.path).parent == files_dir(self.work.name):
            Path(entry.path).unlink(missing_ok=True)
        entry = self._save(entry.id, state="closed", landed=len(rows), not_run=not_run)
        self.summary.generated += len(rows)
        self.summary.not_run += not_run
        self.summary.statuses.update(r[self.work.status_column] for r in rows)
        if self.tally is not None and rows:
            self.tally.add(rows, self.work.status_column, self.work.error_column, self.work.error_status)
        self.ended += entry.requests
        return entry

    def show(self, open_entries: Sequence[BatchEntry]) -> None:
        """Move the progress bar to the requests done: those of the batches landed by this run
        and the completed / failed counts of the open ones, with the open batches' states."""
        if self.bar is None:
            return
        self.bar.total = max(self.bar.total or 0, self.ended + sum(e.requests for e in open_entries))
        self.bar.n = self.ended + sum(e.completed + e.failed for e in open_entries)
        self.bar.set_postfix_str(
            ", ".join(f"{e.batch_id or e.id} {e.status or e.state} {e.completed + e.failed:,}/{e.requests:,}" for e in open_entries[:3])
            + (", ..." if len(open_entries) > 3 else "")
        )

    def step_once(self) -> list[BatchEntry]:
        """Submit what is prepared, poll what is submitted, land what ended; returns the entries
        still open at the API (``exported`` ones wait for ``dora batch import``, not for a poll)."""
        for entry in load_ledger(self.work.name).open_entries:
            if entry.state in ("prepared", "uploaded"):
                entry = self.submit(entry)
            if entry.state == "landing" and entry.batch_id:  # killed while landing: land the same rows again
                entry = self.land(entry, self.client.retrieve(entry.batch_id))
            elif entry.state == "submitted":
                entry = self.poll(entry)
        return _api_open(load_ledger(self.work.name))

    def todo(self, attempts: Counter) -> list:
        """The planned items to put into new batches: not landed, not in an open entry, and
        sent fewer than ``1 + retries`` times by this run."""
        done = self.work.done()
        flying = load_ledger(self.work.name).in_flight()
        return [
            item
            for cid, item in self.items.items()
            if cid not in flying and self.work.key(item) not in done and attempts[cid] <= self.options.retries
        ]


def _api_open(ledger: Ledger) -> list[BatchEntry]:
    """The open entries of ``ledger`` that a batch run resolves (all but ``exported``)."""
    return [e for e in ledger.open_entries if e.state != "exported"]


def _checked_audit(work: BatchWork) -> AuditInfo | None:
    """``work.audit`` carrying ``work.identity``, after :func:`~models_inference.audit_log.check_audit_identity`."""
    audit = work.audit
    if audit is not None and work.identity is not None:
        audit = dataclasses.replace(audit, config={**audit.config, "identity": dict(work.identity)})
        check_audit_identity(audit, work.identity)
    return audit


def run_batched(
    work: BatchWork,
    options: BatchOptions,
    *,
    progress: bool = True,
    max_error_share: float | None = None,
    finish: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchSummary:
    """Generate a step's missing rows through the Batch API and land them (module docstring),
    under the step's landing lock; a run with nothing missing and no open batch sends nothing.

    Args:
        work: the step's requests and rows (:class:`BatchWork`).
        options: limits, waiting, retries (:class:`BatchOptions`).
        progress: show the requests landed so far (tqdm on stderr) while waiting.
        max_error_share: as :func:`~models_inference.resumable.run_resumable`: more than this
            share of the rows landed by this run with ``error_status`` fails the step.
        finish: land the audit's ``finished`` event once nothing is missing or open (not for
            one block of a spread audit, whose last step does).
        sleep: the wait between polls (tests pass a fake).

    Returns:
        A :class:`BatchSummary`; ``pending`` > 0 when batches are still open (no ``wait``).
        Audit events (``work.audit``): ``started`` when anything is missing, ``finished`` when
        nothing is open at the end, ``failed`` (then re-raised) on any exception.

    Raises:
        BatchError: a batch failed as a whole, the API refused a call, the ledger is unreadable.
        ModelNotAvailableError: the key variable is unset. AuditIdentityError: as
            :func:`~models_inference.audit_log.check_audit_identity`.
        AuditFailedError: too many failed requests.
    """
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        summary = BatchSummary(work.name)
        tally = ErrorShare(work.step, max_error_share)
        runner = _Runner(work, options, summary, tally)
        done = work.done()
        summary.planned = len(work.planned)
        summary.already_landed = sum(1 for item in work.planned if work.key(item) in done)
        missing = summary.already_landed < summary.planned
        if not missing and not _api_open(load_ledger(work.name)):
            if audit is not None and finish and summary.planned:
                events = audit_events(audit.audit_id)
                if events and events[-1]["status"] != "finished":
                    audit.land_event("finished", 0)
            return summary
        if audit is not None:
            audit.land_event("started", 0)
        attempts: Counter = Counter()
        try:
            from tqdm.auto import tqdm

            open_entries = runner.step_once()  # batches of earlier runs first: their rows may be all that is missing
            while True:
                todo = runner.todo(attempts)
                if todo:
                    for entry in runner.prepare(todo):
                        for cid in entry.keys:
                            attempts[cid] += 1
                    open_entries = runner.step_once()
                if not open_entries or not options.wait:
                    break
                if runner.bar is None:
                    runner.bar = tqdm(total=0, desc=f"{work.step} batches", unit="request", disable=not progress, file=sys.stderr)
                runner.show(open_entries)
                sleep(options.poll_seconds)
                open_entries = runner.step_once()
                runner.show(open_entries)
            tally.check()
        except BaseException:
            if audit is not None:
                audit.land_event("failed", summary.generated)
            raise
        finally:
            if runner.bar is not None:
                runner.bar.close()
        open_entries = load_ledger(work.name).open_entries
        summary.pending = sum(e.requests for e in open_entries)
        if audit is not None and finish and not open_entries:
            audit.land_event("finished", summary.generated)
        return summary


# ----------------------------------------------------------------------------- offline runners


def export_batched(work: BatchWork, options: BatchOptions, folder: str | Path) -> list[BatchEntry]:
    """Write the requests of the step's rows not landed and not in an open batch as JSONL
    files into ``folder`` for an offline runner (``vllm run-batch -i <file> -o <output>``),
    recorded as ``exported`` in the step's ledger (they go into no other batch until
    :func:`import_batched` lands their output or :func:`cancel_ledger` closes them).

    Returns:
        The exported entries (``path``: each file; empty when nothing is missing).

    Raises:
        BatchError: a request larger than a file may hold; the ledger is unreadable.
    """
    folder = Path(folder).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        runner = _Runner(work, options, BatchSummary(work.name), None)
        todo = runner.todo(Counter())
        if not todo:
            return []
        entries = runner.prepare(todo, state="exported", folder=folder)
        if audit is not None:  # the audit exists (model, version, identity) from its first export on
            audit.land_event("started", 0)
        return entries


def import_batched(work: BatchWork, lines: Sequence[Mapping], *, max_error_share: float | None = None) -> BatchSummary:
    """Land an offline runner's output lines (vLLM ``run-batch``: the Batch API's output format)
    as the step's rows: each ``exported`` file whose requests appear in ``lines`` is landed
    once and closed; its requests missing from ``lines`` go back to the pool (the next export
    or batch run sends them again). Lines of files already imported are left alone.

    Returns:
        A :class:`BatchSummary` (``generated``: rows landed; ``files``: files landed).

    Raises:
        BatchError: a line whose ``custom_id`` is in no exported file of the step (names it).
        AuditFailedError: too many failed requests (the rows landed first).
    """
    ledger = load_ledger(work.name)
    owner = {cid: e for e in ledger.entries for cid in e.keys}
    unknown = [line["custom_id"] for line in lines if line["custom_id"] not in owner]
    if unknown:
        raise BatchError(
            f"{work.step}: {len(unknown)} output line(s) name no request of ledger {work.name!r} "
            f"(first: custom_id {unknown[0][:120]!r}); import the output of a file `dora batch export` wrote for it"
        )
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        summary = BatchSummary(work.name, planned=len(work.planned))
        before = work.done()
        summary.already_landed = sum(1 for item in work.planned if work.key(item) in before)
        tally = ErrorShare(work.step, max_error_share)
        runner = _Runner(work, BatchOptions(), summary, tally)
        touched = {owner[line["custom_id"]].id for line in lines}
        try:
            for entry in load_ledger(work.name).entries:
                if entry.id in touched and entry.state in ("exported", "landing"):
                    runner.land_lines(entry, lines)
                    summary.files += 1
            tally.check()
        except BaseException:
            if audit is not None and summary.generated:
                audit.land_event("failed", summary.generated)
            raise
        done = work.done()
        summary.pending = sum(e.requests for e in load_ledger(work.name).open_entries)
        if audit is not None and summary.generated and not summary.pending and all(work.key(i) in done for i in work.planned):
            audit.land_event("finished", summary.generated)
        return summary


# ----------------------------------------------------------------------------- dora batches


def refresh_ledger(name: str) -> Ledger:
    """``name``'s ledger with the status and counts of its submitted batches asked of the API
    (nothing is landed: the step's next run does that).

    Raises:
        BatchError: the API cannot be reached or refuses. ModelNotAvailableError: no key.
    """
    ledger = load_ledger(name)
    submitted = [e for e in ledger.entries if e.state == "submitted"]
    if not submitted:
        return ledger
    client = _client(ledger, name)
    with updating(name) as fresh:
        for entry in fresh.entries:
            if entry.state == "submitted":
                batch = client.retrieve(entry.batch_id)
                counts = getattr(batch, "request_counts", None)
                entry.status = batch.status
                entry.completed = getattr(counts, "completed", 0) or 0
                entry.failed = getattr(counts, "failed", 0) or 0
                entry.touch()
    return load_ledger(name)


def _client(ledger: Ledger, name: str, client: "BatchClient | None" = None) -> BatchClient:
    """A client of the endpoint ``ledger`` recorded (its base URL and key variable), or ``client``."""
    from types import SimpleNamespace

    if client is not None:
        return client
    meta = ledger.meta
    endpoint = SimpleNamespace(base_urls=[meta["base_url"]] if meta.get("base_url") else [], api_key_env=meta.get("api_key_env") or "OPENAI_API_KEY")
    return BatchClient(endpoint, ledger.step or name)


def cancel_ledger(name: str) -> list[BatchEntry]:
    """Cancel every open batch of ``name`` (``batches.cancel``: the API ends it as
    ``cancelled``; the step's next run lands what ran and sends the rest again) and close its
    entries not yet submitted or exported (their rows go back to the pool).

    Returns:
        The entries acted on.

    Raises:
        BatchError: the API refused or cannot be reached. ModelNotAvailableError: no key.
    """
    ledger = load_ledger(name)
    acted = []
    client = None
    with updating(name) as fresh:
        for entry in fresh.entries:
            found = None
            if entry.state == "uploaded":  # a batch created from the file before its id was recorded?
                client = _client(ledger, name, client)
                found = client.find(entry.file_id)
                if found is not None:
                    entry.batch_id, entry.state, entry.status = found.id, "submitted", found.status
            if entry.state == "submitted" and entry.status not in TERMINAL_STATUSES and entry.status != "cancelling":
                client = _client(ledger, name, client)
                entry.status = client.cancel(entry.batch_id).status
            elif entry.state in ("prepared", "uploaded", "exported"):
                entry.state, entry.error = "closed", f"cancelled by dora batches --cancel ({now_text()})"
                if entry.path and Path(entry.path).parent == files_dir(name):
                    Path(entry.path).unlink(missing_ok=True)
            else:
                continue
            entry.touch()
            acted.append(entry)
    return acted


__all__ = [
    "BatchSummary",
    "cancel_ledger",
    "export_batched",
    "import_batched",
    "refresh_ledger",
    "run_batched",
]
