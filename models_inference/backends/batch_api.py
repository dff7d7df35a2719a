"""Batch mode of the API steps that carry the volume: the OpenAI Batch API, and the same JSONL
format for offline runners (vLLM's ``vllm run-batch``).

Against a hosted model, one request per row means hours of rate limits at full price; the
OpenAI Batch API takes the same requests as JSONL files (one line per request:
``{"custom_id", "method": "POST", "url", "body"}``; at most :data:`MAX_REQUESTS_PER_FILE`
requests and :data:`MAX_FILE_BYTES` per file; endpoints ``/v1/chat/completions`` and
``/v1/completions`` here; completion window ``24h``), at half price in a separate rate-limit
pool. vLLM's ``run-batch`` reads and writes the same line format offline.

A step's batch run (:func:`execute_batched`), for its planned rows not yet landed:

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
   once). Output lines are read through pydantic models of their shape
   (:mod:`models_inference.backends.batch_lines`): a line of another shape (cut short, a
   ``custom_id`` that is not a string...) is quarantined with its line number and the rest
   lands. Requests that failed (an HTTP error, an error object, a reply that is not a
   completion) land as ``error`` rows; requests that never ran (``batch_expired`` /
   ``batch_cancelled`` lines, or missing from an expired or cancelled batch's files) land
   nothing; both go into the next batch (at most ``retries`` times per row in one run; the next
   run retries the rest). A batch or file the API no longer has (HTTP 404) closes its entry as
   lost and its rows go into a new batch. Batches the API failed as a whole (a bad file, over a
   limit) are each named, in one line, once the others have landed
   (:class:`~ingestion.errors.BatchError`); one that failed on the model's enqueued-token
   limit (``token_limit_exceeded``) is queued again instead. At most ``max_open`` batches of a
   model are open at once.

Requests carry what the live backend would send (:func:`request_body`: the same fields as
:class:`~models_inference.backends.openai_chat.OpenAIChatBackend`), and replies are read the same way
(:func:`result_of`), so a row is the same whichever way it was generated; the audit id does not
depend on the mode. Offline engines and ``dora batches`` are in
:mod:`models_inference.backends.batch_tools`; :func:`land_open_batches` is one pass for the
batch sensor (skipped while a run of the same audit holds its landing lock).

Public API: :class:`BatchSummary`, :func:`execute_batched`, :func:`land_open_batches`,
:func:`check_endpoint`. The line format, the step's work and options and the file plan are in
:mod:`models_inference.backends.batch_requests`; the API calls in
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

from ingestion.errors import BatchError, BatchLostError, CompletionsUnsupportedError
from ingestion.landing import write_shard
from models_inference.audit_log import AuditInfo, audit_events, check_audit_identity
from models_inference.backends.batch_client import BatchClient
from models_inference.backends.batch_ledger import (
    BatchEntry,
    Ledger,
    atomic_write_text,
    files_dir,
    ledger_names,
    load_ledger,
    updating,
)
from models_inference.backends.batch_lines import MAX_RAW, BadLine, OutputLine, ledger_tag, parse_custom_id, read_output
from models_inference.backends.batch_requests import (
    TERMINAL_STATUSES,
    BatchOptions,
    BatchWork,
    custom_id,
    plan_files,
    result_of,
)
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
        not_run: requests that never ran (expired, cancelled, lost), put back for the next batch.
        quarantined: output lines not of the output's shape (landed in ``input_quarantine``).
        lost: one line per batch whose batch or files the API no longer has (HTTP 404), closed
            as lost (its requests went back to the pool).
        requeued: batches that failed on the enqueued-token limit, their files queued again.
    """

    files: int = 0
    submitted: int = 0
    batches: list[str] = field(default_factory=list)
    pending: int = 0
    not_run: int = 0
    quarantined: int = 0
    lost: list[str] = field(default_factory=list)
    requeued: int = 0


def _failure_cause(batch) -> str:
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    parts = []
    for err in errors[:3]:
        where = f" (line {err.line})" if getattr(err, "line", None) is not None else ""
        parts.append(f"{err.code}: {err.message}{where}")
    return "; ".join(parts) or f"status {batch.status} without an error message"


def _failure_codes(batch) -> set:
    return {getattr(err, "code", None) for err in (getattr(getattr(batch, "errors", None), "data", None) or [])}


#: The failure code of a batch refused because the model's enqueued tokens are over the
#: organisation's limit: nothing is wrong with the file, it is sent again later.
TOKEN_LIMIT_CODE = "token_limit_exceeded"


def open_batches_of(meta: Mapping) -> int:
    """Batches of ``meta``'s model at ``meta``'s endpoint open at the API in any ledger of this
    ``$DORA_HOME`` (entries ``submitted`` or ``landing``): what ``--api-batch-max-open`` bounds."""
    count = 0
    for name in ledger_names():
        try:
            ledger = load_ledger(name)
        except BatchError:  # named by `dora batches`; it holds no slot this run can see
            continue
        if ledger.meta.get("model") == meta.get("model") and ledger.meta.get("base_url") == meta.get("base_url"):
            count += sum(1 for e in ledger.entries if e.state in ("submitted", "landing"))
    return count


def quarantine_lines(family: str | None, entry_id: str, source: str, bad: Sequence[BadLine]) -> int:
    """Land ``bad`` output lines of file ``entry_id`` in ``landing/input_quarantine`` (partition
    ``batch-<entry id>``, with their line numbers and reasons); returns how many."""
    from ingestion.quarantine import QuarantinedRow, land_quarantine

    rows = [QuarantinedRow(source, b.line, None, b.reason, b.raw) for b in bad]
    return land_quarantine(family or "batch", f"batch-{entry_id}", rows)


class _Runner:
    """One batch run of a step (see :func:`execute_batched`)."""

    def __init__(self, work: BatchWork, options: BatchOptions, summary: BatchSummary, tally: ErrorShare | None):
        self.work, self.options, self.summary, self.tally = work, options, summary, tally
        self.items = {}
        for item in work.planned:
            self.items.setdefault(custom_id(work.key(item)), item)
        self.tag = ledger_tag(work.name)
        self._client: BatchClient | None = None
        self.bar = None
        self.ended = 0  # requests of the batches this run landed (the progress bar's done part)
        self.failures: list[str] = []  # batches failed as a whole: every one is reported at the end
        self.held: set[str] = set()  # their keys: not sent again by this run (the cause needs fixing first)

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
                entry = BatchEntry(plan.id, plan.keys, plan.endpoint, plan.requests, plan.bytes, state=state)
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
            metadata = {"dora_entry": entry.id, "dora_audit": self.tag, "dora_ledger": self.work.name[:500]}
            batch = self.client.create(entry.file_id, entry.endpoint, metadata, skip=entry.failed_batches)
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

    def lose(self, entry: BatchEntry, exc: BatchLostError) -> BatchEntry:
        """Close ``entry`` as lost (its batch or a file of it is gone at the API): its rows go
        back to the pool, and the one-line cause is kept in the ledger and the summary."""
        what = f"{exc}; file {entry.id}.jsonl ({entry.requests:,} requests) closed as lost: its requests go into a new batch"
        entry = self._save(entry.id, state="closed", error=f"lost: {exc}", not_run=entry.requests)
        self.summary.lost.append(what)
        self.summary.not_run += entry.requests
        print(f"dora: {what}", file=sys.stderr, flush=True)
        return entry

    def land(self, entry: BatchEntry, batch) -> BatchEntry:
        """Land an ended batch's output and error files. A batch failed as a whole on the
        enqueued-token limit is queued again (at most ``retries`` times); any other is closed and its cause kept for the
        run's end (:attr:`failures`), its rows not sent again by this run."""
        if batch.status == "failed" and not getattr(batch, "output_file_id", None):
            cause = _failure_cause(batch)
            # queued again while the limit is the only cause, up to `retries` times: a file over the limit on its own would loop for ever
            if TOKEN_LIMIT_CODE in _failure_codes(batch) and len(entry.failed_batches) <= self.options.retries:
                self.summary.requeued += 1
                return self._save(
                    entry.id, state="uploaded", batch_id=None, status="requeued", failed_batches=[*entry.failed_batches, batch.id], error=cause
                )
            self.held.update(entry.keys)
            self.failures.append(f"batch {batch.id} ({entry.requests:,} requests, file {entry.id}.jsonl) failed as a whole: {cause}")
            return self._save(entry.id, state="closed", error=cause)
        good, bad = [], []
        for file_id in (getattr(batch, "output_file_id", None), getattr(batch, "error_file_id", None)):
            if file_id:
                lines, wrong = read_output(self.client.content(file_id))
                good += lines
                bad += [dataclasses.replace(b, reason=f"{file_id}: {b.reason}") for b in wrong]
        return self.land_lines(entry, good, bad, source=batch.id)

    def keyed(self, entry: BatchEntry, lines: Sequence[tuple[int, OutputLine]]) -> tuple[dict, list[BadLine]]:
        """``{resume key as JSON: line}`` of ``entry``'s lines (the first of a key counts), and the
        lines that name another file or ledger, or a line past its file's end, as bad lines."""
        own, foreign = {}, []
        legacy = set(entry.keys)
        for n, line in lines:
            parsed = parse_custom_id(line.custom_id)
            if parsed is not None and parsed[:2] == (self.tag, entry.id) and parsed[2] < len(entry.keys):
                key = entry.keys[parsed[2]]
            elif parsed is None and line.custom_id in legacy:  # a file written before ids named their file
                key = line.custom_id
            else:
                why = f"custom_id {line.custom_id[:80]!r} names no line of file {entry.id} of {self.work.name}"
                foreign.append(BadLine(n, why, line.model_dump_json()[:MAX_RAW]))
                continue
            own.setdefault(key, line)
        return own, foreign

    def land_lines(self, entry: BatchEntry, lines: Sequence[tuple[int, OutputLine]], bad: Sequence[BadLine] = (), source: str = "") -> BatchEntry:
        """Land the rows of ``entry``'s requests found in ``lines`` (one shard named after the
        entry: landing it again rewrites that shard), quarantine ``bad`` lines, close the entry
        and count the rows. Requests without a line (missing, on a bad line) go back to the pool."""
        by_key, foreign = self.keyed(entry, lines)
        bad = [*bad, *foreign]
        if entry.state != "landing":  # the keys landed by another way meanwhile are left out, once and for all
            done = self.work.done()
            skip = [c for c in entry.keys if c in by_key and c in self.items and self.work.key(self.items[c]) in done]
            entry = self._save(entry.id, state="landing", skip=skip)
        skip = set(entry.skip)
        items, results, not_run = [], [], 0
        key = getattr(self._client, "key", None)
        for cid in entry.keys:
            line = by_key.get(cid)
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
        quarantined = quarantine_lines(getattr(self.work.audit, "family", None), entry.id, source or entry.id, bad) if bad else 0
        write_shard(self.work.table, rows, partition=self.work.partition, name=f"batch-{entry.id}")
        if entry.path and Path(entry.path).parent == files_dir(self.work.name):
            Path(entry.path).unlink(missing_ok=True)
        entry = self._save(entry.id, state="closed", landed=len(rows), not_run=not_run, quarantined=quarantined)
        self.summary.generated += len(rows)
        self.summary.not_run += not_run
        self.summary.quarantined += quarantined
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
        """Poll what is submitted and land what ended, then submit what is prepared (at most
        ``max_open`` batches of the model open at once); returns the entries still open at the
        API (``exported`` ones wait for ``dora batch import``, not for a poll). An entry whose
        batch or files are gone (HTTP 404) is closed as lost (:meth:`lose`)."""
        for entry in load_ledger(self.work.name).open_entries:
            try:
                if entry.state == "landing" and entry.batch_id:  # killed while landing: land the same rows again
                    self.land(entry, self.client.retrieve(entry.batch_id))
                elif entry.state == "submitted":
                    self.poll(entry)
            except BatchLostError as exc:
                self.lose(entry, exc)
        waiting = [e for e in load_ledger(self.work.name).open_entries if e.state in ("prepared", "uploaded")]
        if waiting:
            bound = self.options.max_open
            slots = len(waiting) if bound is None else max(0, bound - open_batches_of(self.work.meta(self.options)))
            for entry in waiting[:slots]:
                try:
                    entry = self.submit(entry)
                    if entry.state == "submitted":  # a first look at once: a batch refused at validation ends here
                        self.poll(entry)
                except BatchLostError as exc:
                    self.lose(entry, exc)
        return _api_open(load_ledger(self.work.name))

    def todo(self, attempts: Counter) -> list:
        """The planned items to put into new batches: not landed, not in an open entry, not in
        a batch this run saw fail as a whole, and sent fewer than ``1 + retries`` times by this run."""
        done = self.work.done()
        flying = load_ledger(self.work.name).in_flight()
        return [
            item
            for cid, item in self.items.items()
            if cid not in flying and cid not in self.held and self.work.key(item) not in done and attempts[cid] <= self.options.retries
        ]

    def raise_failures(self) -> None:
        """One :class:`BatchError` naming every batch of this run that failed as a whole."""
        if self.failures:
            whose = "its" if len(self.failures) == 1 else "their"
            raise BatchError(
                f"{self.work.step}: {'; '.join(self.failures)}; none of {whose} requests ran: fix the cause, then run the same command again"
            )


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


def check_endpoint(work: BatchWork, items: Sequence) -> None:
    """Refuse, before anything is uploaded, completion-style requests to an endpoint without
    text completions (a chat-only model), as the live path refuses them at its first request:
    the backend's capability probe (:mod:`~models_inference.backends.server_caps`) says so.

    Raises:
        CompletionsUnsupportedError: ``items`` hold completion-style requests and the endpoint
            has no ``/completions`` for the model.
    """
    caps = getattr(work.backend, "capabilities", None)
    if caps is None or not any(work.request(i).prompt.style == "completion" for i in items):
        return
    found = caps()
    if found is not None and not found.completions:  # None: not reachable now; its requests fail in their own words
        raise CompletionsUnsupportedError(
            f"{work.step}: {getattr(work.backend, 'base_url', None) or 'the OpenAI API'} has no text-completions endpoint for model "
            f"{getattr(work.backend, 'model_id', '?')!r} (its capability probe); the completion prompt style needs it: use "
            "--prompt-style chat (nothing was uploaded)"
        )


def execute_batched(
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
        options: limits, waiting, retries, pacing (:class:`BatchOptions`).
        progress: show the requests landed so far (tqdm on stderr) while waiting.
        max_error_share: as :func:`~models_inference.resumable.land_resumable`: more than this
            share of the rows landed by this run with ``error_status`` fails the step.
        finish: land the audit's ``finished`` event once nothing is missing or open (not for
            one block of a spread audit, whose last step does).
        sleep: the wait between polls (tests pass a fake).

    Returns:
        A :class:`BatchSummary`; ``pending`` > 0 when batches are still open (no ``wait``).
        Audit events (``work.audit``): ``started`` when anything is missing, ``finished`` when
        nothing is open at the end, ``failed`` (then re-raised) on any exception.

    Raises:
        BatchError: batches failed as a whole (every one named, after the others landed), the
            API refused a call, the ledger is unreadable.
        CompletionsUnsupportedError: completion-style requests to a chat-only endpoint.
        ModelNotAvailableError: the key variable is unset. AuditIdentityError: as
            :func:`~models_inference.audit_log.check_audit_identity`.
        AuditFailedError: too many failed requests.
    """
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        return _run_locked(work, options, progress=progress, max_error_share=max_error_share, finish=finish, sleep=sleep)


def land_open_batches(work: BatchWork, options: BatchOptions, *, send: bool = True) -> BatchSummary | None:
    """One pass of :func:`execute_batched` without waiting (land the batches that ended, send what
    is missing again, ``finished`` when nothing is left) if the step's landing lock is free;
    ``None`` when another process holds it (a ``dora audit`` of the same audit is landing:
    its rows land once, by that process). What the batch sensor calls on every tick.

    Args:
        send: put the missing rows into new batches (``False``: only poll and land, e.g. for an
            audit whose batches were cancelled by hand).

    Raises:
        As :func:`execute_batched`.
    """
    from filelock import Timeout

    lock = landing_lock(work.lock or work.name)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    try:
        return _run_locked(
            work, dataclasses.replace(options, wait=False), progress=False, max_error_share=None, finish=True, sleep=time.sleep, send=send
        )
    finally:
        lock.release()


def _run_locked(work: BatchWork, options: BatchOptions, *, progress, max_error_share, finish, sleep, send: bool = True) -> BatchSummary:
    audit = _checked_audit(work)
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
    checked = False
    try:
        from tqdm.auto import tqdm

        open_entries = runner.step_once()  # batches of earlier runs first: their rows may be all that is missing
        while True:
            todo = runner.todo(attempts) if send else []
            if todo:
                if not checked:
                    check_endpoint(work, todo)
                    checked = True
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
        runner.raise_failures()
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
    complete = send or all(work.key(i) in work.done() for i in work.planned)  # a pass that sent nothing may leave rows missing
    if audit is not None and finish and not open_entries and complete:
        audit.land_event("finished", summary.generated)
    return summary


__all__ = [
    "BatchSummary",
    "TOKEN_LIMIT_CODE",
    "check_endpoint",
    "land_open_batches",
    "open_batches_of",
    "quarantine_lines",
    "execute_batched",
]
