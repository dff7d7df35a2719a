"""What is done to a step's batches outside its run: offline runners (:func:`export_batched`
writes the JSONL files for ``vllm run-batch``, :func:`import_batched` lands the runner's
output, :func:`output_owner` finds the one audit and file an output answers) and ``dora
batches`` (:func:`refresh_ledger`, :func:`cancel_ledger`).

An output belongs to exactly one ledger entry: each of its lines' ``custom_id`` names the
ledger and the file (:mod:`models_inference.backends.batch_lines`), and its answers name the
model (``response.body.model``). An output naming another audit, several files, or answered by
another model is refused in one line (:class:`~ingestion.errors.BatchOwnerError`); an output
of a file already landed lands nothing (its entry is closed, never re-opened), so importing an
old output never closes a newer export of the same rows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

from ingestion.errors import BatchError, BatchLostError, BatchOwnerError
from models_inference.backends.batch_api import BatchSummary, _checked_audit, _Runner
from models_inference.backends.batch_client import BatchClient
from models_inference.backends.batch_ledger import BatchEntry, Ledger, files_dir, ledger_names, load_ledger, now_text, updating
from models_inference.backends.batch_lines import BadLine, OutputLine, ledger_tag, parse_custom_id
from models_inference.backends.batch_requests import CHAT_URL, COMPLETIONS_URL, RUNNER_ENDPOINTS, TERMINAL_STATUSES, BatchOptions, BatchWork
from models_inference.error_share import ErrorShare
from models_inference.landing_locks import holding_lock, landing_lock

# ----------------------------------------------------------------------------- offline runners


def export_batched(work: BatchWork, options: BatchOptions, folder: str | Path, *, runner: str = "vllm") -> list[BatchEntry]:
    """Write the requests of the step's rows not landed and not in an open batch as JSONL
    files into ``folder`` for an offline runner (``vllm run-batch -i <file> -o <output>``),
    recorded as ``exported`` in the step's ledger (they go into no other batch until
    :func:`import_batched` lands their output or :func:`cancel_ledger` closes them).

    Args:
        runner: the runner the files are for (:data:`~models_inference.backends.batch_requests.RUNNER_ENDPOINTS`:
            ``vllm`` takes chat requests only; ``openai``, any host of the Batch API's format, chat
            and text completions).

    Returns:
        The exported entries (``path``: each file; empty when nothing is missing).

    Raises:
        BatchError: a request larger than a file may hold; requests to an endpoint the runner
            does not take (nothing written); the ledger is unreadable.
    """
    folder = Path(folder).expanduser().resolve()
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        run = _Runner(work, options, BatchSummary(work.name), None)
        todo = run.todo(Counter())
        if not todo:
            return []
        takes = RUNNER_ENDPOINTS[runner]
        urls = {COMPLETIONS_URL if work.request(i).prompt.style == "completion" else CHAT_URL for i in todo}
        refused = sorted(u for u in urls if u not in takes)
        if refused:
            raise BatchError(
                f"{work.step}: {runner} run-batch does not take {', '.join(refused)} requests (it takes {', '.join(takes)}): "
                "export chat requests (--prompt-style chat, for a model with a chat template), or --runner openai for a "
                "host of the Batch API that takes text completions; nothing was written"
            )
        folder.mkdir(parents=True, exist_ok=True)
        entries = run.prepare(todo, state="exported", folder=folder)
        if audit is not None:  # the audit exists (model, version, identity) from its first export on
            audit.land_event("started", 0)
        return entries


def output_owner(lines: Sequence[tuple[int, OutputLine]], *, source: str, audit: str | None = None) -> tuple[Ledger, BatchEntry]:
    """The one ledger and exported file an output's lines answer (each line's ``custom_id``
    names both; a file written before ids named their file is found by its rows' keys, when one
    open entry holds them).

    Args:
        source: the output's name in messages.
        audit: the audit the output is meant for (``dora batch import --audit``), else any.

    Raises:
        BatchOwnerError: lines naming no file written here, several files or another audit than
            ``audit``; answers of another model than the ledger's (one line each).
    """
    ledgers = {}
    for name in ledger_names():
        ledger = load_ledger(name)
        ledgers[ledger.meta.get("tag") or ledger_tag(name)] = ledger
    entries = {(tag, e.id): led.name for tag, led in ledgers.items() for e in led.entries}
    legacy: dict[str, set] | None = None  # resume key -> open entries holding it (files written before ids named their file)
    owners: Counter = Counter()
    unknown = []
    for _, line in lines:
        parsed = parse_custom_id(line.custom_id)
        if parsed is not None and parsed[:2] in entries:
            owners[(entries[parsed[:2]], parsed[1])] += 1
            continue
        if parsed is None and legacy is None:
            legacy = {}
            for led in ledgers.values():
                for e in led.entries:
                    if e.state in ("exported", "landing"):
                        for k in e.keys:
                            legacy.setdefault(k, set()).add((led.name, e.id))
        holders = legacy.get(line.custom_id, set()) if parsed is None else set()
        if len(holders) == 1:
            owners[next(iter(holders))] += 1
        else:
            unknown.append(line.custom_id)
    if unknown:
        raise BatchOwnerError(
            f"{len(unknown)} line(s) of {source} name no request `dora batch export` wrote here (first custom_id: "
            f"{unknown[0][:120]!r}); import it into the DORA_HOME that exported it"
        )
    if len(owners) > 1:
        named = ", ".join(f"{entry} of {name} ({n} lines)" for (name, entry), n in list(owners.items())[:3])
        raise BatchOwnerError(f"{source} holds the answers of {len(owners)} exported files ({named}): import each file's own output")
    ((name, entry_id),) = owners
    ledger = load_ledger(name)
    if audit is not None and name != audit:
        raise BatchOwnerError(f"{source} answers file {entry_id} of audit {name}, not of audit {audit}: it lands only in its own audit")
    model = ledger.meta.get("model")
    for n, line in lines:
        got = line.model()
        if model and got and got != model and not got.startswith(f"{model}-"):
            raise BatchOwnerError(
                f"{source} line {n} was answered by model {got!r}, but file {entry_id} of audit {name} asked {model!r}: "
                "run the runner with --model as exported, then import its output"
            )
    return ledger, ledger.entry(entry_id)


def import_batched(
    work: BatchWork,
    entry_id: str,
    lines: Sequence[tuple[int, OutputLine]],
    bad: Sequence[BadLine] = (),
    *,
    source: str = "",
    max_error_share: float | None = None,
) -> BatchSummary:
    """Land an offline runner's output lines (the Batch API's output format) for file
    ``entry_id`` of the step's ledger: once (an entry already closed lands nothing: ``files``
    is 0); its requests missing from ``lines`` (or on a ``bad`` line, quarantined with its
    number) go back to the pool (the next export or batch run sends them again).

    Returns:
        A :class:`~models_inference.backends.batch_api.BatchSummary` (``generated``: rows
        landed; ``files``: 1 when the file landed, 0 when it had landed already; ``quarantined``).

    Raises:
        AuditFailedError: too many failed requests (the rows landed first).
    """
    audit = _checked_audit(work)
    name = work.lock or work.name
    with holding_lock(landing_lock(name), f"{work.step} ({name})"):
        summary = BatchSummary(work.name, planned=len(work.planned))
        before = work.done()
        summary.already_landed = sum(1 for item in work.planned if work.key(item) in before)
        tally = ErrorShare(work.step, max_error_share)
        run = _Runner(work, BatchOptions(), summary, tally)
        entry = load_ledger(work.name).entry(entry_id)
        try:
            if entry.state in ("exported", "landing"):
                run.land_lines(entry, lines, bad, source=source)
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
    (nothing is landed: the step's next run does that; a batch the API no longer knows keeps
    its last status).

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
                try:
                    batch = client.retrieve(entry.batch_id)
                except BatchLostError:
                    entry.status = "lost"
                    continue
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
    """Cancel every running batch of ``name`` (``batches.cancel``: the API ends it as
    ``cancelled``; the step's next run lands what ran and sends the rest again) and close every
    other open or stuck entry: not yet submitted, exported, stuck while landing, a batch that
    ended but never landed, or one the API no longer knows (HTTP 404, closed as lost). The rows
    of a closed entry go back to the pool.

    Returns:
        The entries acted on.

    Raises:
        BatchError: the API refused or cannot be reached. ModelNotAvailableError: no key.
    """
    ledger = load_ledger(name)
    acted = []
    client = None
    stamp = f"cancelled by dora batches --cancel ({now_text()})"
    with updating(name) as fresh:
        for entry in fresh.entries:
            if not entry.open:
                continue
            if entry.state == "uploaded":  # a batch created from the file before its id was recorded?
                client = _client(ledger, name, client)
                found = client.find(entry.file_id, skip=entry.failed_batches)
                if found is not None:
                    entry.batch_id, entry.state, entry.status = found.id, "submitted", found.status
            if entry.state == "submitted" and entry.status not in TERMINAL_STATUSES:
                if entry.status == "cancelling":
                    continue  # the API ends it; the next run lands what ran
                client = _client(ledger, name, client)
                try:
                    entry.status = client.cancel(entry.batch_id).status
                except BatchLostError as exc:
                    entry.state, entry.error, entry.not_run = "closed", f"lost: {exc}", entry.requests
            else:
                entry.state, entry.error = "closed", stamp
                if entry.path and Path(entry.path).parent == files_dir(name):
                    Path(entry.path).unlink(missing_ok=True)
            entry.touch()
            acted.append(entry)
    return acted


__all__ = [
    "cancel_ledger",
    "export_batched",
    "import_batched",
    "output_owner",
    "refresh_ledger",
]
