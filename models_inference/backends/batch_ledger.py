"""The ledger of a step's Batch API work: which rows went into which file and batch.

A batch run (:mod:`models_inference.backends.batch_api`) records every file of requests here
*before* the side effect that would repeat it (upload, batch creation, landing), so a process
killed at any point never submits the same rows twice and lands each batch once:

* ``prepared``: the JSONL file is written (its rows' resume keys are listed here in line order;
  line ``n``'s ``custom_id`` names this ledger, the entry and ``n``:
  :mod:`~models_inference.backends.batch_lines`); nothing was sent. A re-run uploads it.
* ``uploaded``: the file is on the server (``file_id``); a re-run first looks for a batch
  already created from that file (``batches.list``, matched on ``input_file_id``) and
  creates one only if there is none.
* ``submitted``: the batch exists (``batch_id``); a re-run polls it.
* ``landing``: its output is being landed; the keys that had already landed by another way
  are listed (``skip``), so a re-run lands exactly the same rows into the same shard name.
* ``exported``: written for an offline runner (``dora batch export``; vLLM's ``run-batch``);
  ``dora batch import`` lands its output.
* ``closed``: landed (or cancelled, or failed: ``error``; or lost: the API answered 404 for
  its batch or files, ``error`` says which). Its keys are free again: those that did not land
  (failed lines, expired or cancelled requests, a lost batch's) go into the next batch.

A batch that failed because the model's enqueued-token limit was reached
(``token_limit_exceeded``) goes back to ``uploaded`` (its id kept in ``failed_batches``), so its
file is sent again when a slot is free.

A ledger file is read through a pydantic model of its shape: a file cut short or of another
shape is one :class:`~ingestion.errors.BatchError` line naming it, never skipped
(:func:`unreadable_ledgers` lists them for ``dora batches``).

One ledger per step of an audit (``name``: the audit id; the judge's: its model and mode), a
JSON file in ``$DORA_HOME/state/batches/`` written atomically (temporary file, fsync, rename)
under an inter-process lock (:mod:`filelock`), beside a folder holding the JSONL files not yet
closed. The API key is never written: only the name of its environment variable.

Public API: :class:`BatchEntry`, :class:`Ledger`, :func:`load_ledger`, :func:`updating`,
:func:`ledger_names`, :func:`unreadable_ledgers`, :func:`ledger_dir`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from ingestion.errors import BatchError
from ingestion.home import dora_home, safe_path_component

#: Entry states whose keys are in flight (never put into another batch).
OPEN_STATES: tuple[str, ...] = ("prepared", "uploaded", "submitted", "landing", "exported")
#: Every entry state, in the order an entry moves through them.
STATES: tuple[str, ...] = (*OPEN_STATES, "closed")


def now_text() -> str:
    """The time now (UTC), ISO 8601 to the second: the ledger's timestamps."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class BatchEntry:
    """One file of requests and the batch made of it.

    Attributes:
        id: dora's id of the file (``b`` + 16 hex), also the batch's ``metadata.dora_entry`` and
            the middle part of each of its lines' ``custom_id``.
        keys: the resume keys of its requests as JSON, in file order (line ``n``: ``keys[n]``;
            in files of earlier versions also the lines' ``custom_id``).
        endpoint: ``/v1/chat/completions`` or ``/v1/completions``.
        requests, bytes: lines and size of the JSONL file.
        path: the local JSONL file (removed once the entry is closed; for ``exported``: the
            file written for the offline runner).
        state: see the module docstring.
        file_id, batch_id: the server's ids once uploaded / created.
        status: the batch's status last seen (``validating``, ``in_progress``, ``finalizing``,
            ``completed``, ``expired``, ``failed``, ``cancelling``, ``cancelled``).
        completed, failed: the batch's request counts last seen.
        error: why the batch failed as a whole (closed entries only).
        skip: resume keys that had landed by another way when the entry was landed (not landed again).
        landed, not_run: rows landed from it; requests it never ran (expired, cancelled, missing).
        quarantined: lines of its output that were not of the output's shape (landed in
            ``input_quarantine`` with their line number and reason; their requests go back to the pool).
        failed_batches: batches made of its file that failed on the enqueued-token limit (the
            file was queued again; a look-up for its batch skips them).
        created_at, updated_at: ISO 8601 UTC.
    """

    id: str
    keys: list[str]
    endpoint: str
    requests: int
    bytes: int
    path: str | None = None
    state: str = "prepared"
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    completed: int = 0
    failed: int = 0
    error: str | None = None
    skip: list[str] = field(default_factory=list)
    landed: int = 0
    not_run: int = 0
    quarantined: int = 0
    failed_batches: list[str] = field(default_factory=list)
    created_at: str = field(default_factory=now_text)
    updated_at: str = field(default_factory=now_text)

    @property
    def open(self) -> bool:
        """Whether its keys are in flight (:data:`OPEN_STATES`)."""
        return self.state in OPEN_STATES

    def touch(self) -> None:
        self.updated_at = now_text()


@dataclass
class Ledger:
    """A step's batch ledger.

    Attributes:
        name: the ledger's name (the audit id; ``judge--<backend>--<model>--<version>--<mode>``).
        step: the step named in messages (``BiasDora T2T``, ``judge gpt-4o``...).
        meta: what a tool needs to reach the batches again and rebuild the step's rows
            without the original command: ``base_url``, ``api_key_env`` (the variable's
            name, never the key), ``model``, ``record`` (the step's kind and run config).
        entries: every file of the step, oldest first.
    """

    name: str
    step: str = ""
    meta: dict = field(default_factory=dict)
    entries: list[BatchEntry] = field(default_factory=list)

    def entry(self, entry_id: str) -> BatchEntry:
        """The entry of that id.

        Raises:
            KeyError: no such entry.
        """
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)

    @property
    def open_entries(self) -> list[BatchEntry]:
        return [e for e in self.entries if e.open]

    def in_flight(self) -> set[str]:
        """The resume keys (JSON) of every open entry (not to be put into another batch)."""
        return {k for e in self.open_entries for k in e.keys}

    def as_json(self) -> dict:
        return {"name": self.name, "step": self.step, "meta": self.meta, "entries": [asdict(e) for e in self.entries]}


def _file_stem(name: str) -> str:
    """A path-safe, collision-free stem for ``name`` (its readable part is cut at 80 characters)."""
    return f"{safe_path_component(name)[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def ledger_dir() -> Path:
    """``$DORA_HOME/state/batches`` (created)."""
    folder = dora_home() / "state" / "batches"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def ledger_path(name: str) -> Path:
    """The ledger file of ``name``."""
    return ledger_dir() / f"{_file_stem(name)}.json"


def files_dir(name: str) -> Path:
    """The folder of ``name``'s JSONL files not yet closed (created)."""
    folder = ledger_dir() / _file_stem(name)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _LedgerFile(BaseModel):
    """The shape of a ledger file (entries checked field by field as :class:`BatchEntry`;
    fields this version does not know are ignored)."""

    model_config = ConfigDict(extra="ignore")

    name: StrictStr
    step: str = ""
    meta: dict = {}
    entries: list[BatchEntry] = []


_RESTORE = "it records which rows were submitted: restore it from a backup before running the step again"


def read_ledger_file(path: Path) -> Ledger:
    """The ledger stored in ``path``.

    Raises:
        BatchError: the file cannot be read, is not JSON (e.g. cut short) or not of a ledger's
            shape (one line naming the file and the first problem).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"the batch ledger {path} cannot be read ({exc}); {_RESTORE}") from None
    try:
        data = _LedgerFile.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the file"
        what = "is not JSON (cut short?)" if first.get("type") == "json_invalid" else "is not a ledger"
        raise BatchError(f"the batch ledger {path} {what} ({where}: {first.get('msg')}); {_RESTORE}") from None
    return Ledger(data.name, data.step, dict(data.meta), list(data.entries))


def load_ledger(name: str) -> Ledger:
    """``name``'s ledger (empty when it has none yet).

    Raises:
        BatchError: the ledger file exists but cannot be read.
    """
    path = ledger_path(name)
    if not path.exists():
        return Ledger(name)
    return read_ledger_file(path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file beside it, fsync, rename, fsync
    of the folder (a reader sees the old file or the new one, never a part)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every file system can fsync a folder
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_ledger(ledger: Ledger) -> None:
    """Write ``ledger`` atomically (:func:`atomic_write_text`). Callers hold its lock (:func:`updating`)."""
    atomic_write_text(ledger_path(ledger.name), json.dumps(ledger.as_json(), separators=(",", ":")))


def ledger_lock(name: str):
    """The inter-process lock of ``name``'s ledger (``<ledger>.json.lock``)."""
    from filelock import FileLock

    return FileLock(str(ledger_path(name)) + ".lock")


@contextlib.contextmanager
def updating(name: str) -> Iterator[Ledger]:
    """Read ``name``'s ledger under its lock, yield it, and save it when the block ends without
    an exception (read-modify-write; an exception leaves the file as it was).

    Raises:
        BatchError: the ledger file exists but cannot be read.
    """
    with ledger_lock(name):
        ledger = load_ledger(name)
        yield ledger
        save_ledger(ledger)


def ledger_names() -> list[str]:
    """The name of every readable ledger in this ``$DORA_HOME``, sorted (those that cannot be
    read are :func:`unreadable_ledgers`, which callers name)."""
    names = []
    for path in sorted(ledger_dir().glob("*.json")):
        try:
            names.append(read_ledger_file(path).name)
        except BatchError:
            continue
    return sorted(names)


def unreadable_ledgers() -> list[str]:
    """One line per ledger file of this ``$DORA_HOME`` that cannot be read (cut short, not a
    ledger): the :class:`~ingestion.errors.BatchError` message naming it."""
    problems = []
    for path in sorted(ledger_dir().glob("*.json")):
        try:
            read_ledger_file(path)
        except BatchError as exc:
            problems.append(str(exc))
    return problems


__all__ = [
    "OPEN_STATES",
    "STATES",
    "BatchEntry",
    "Ledger",
    "atomic_write_text",
    "files_dir",
    "ledger_dir",
    "ledger_lock",
    "ledger_names",
    "ledger_path",
    "load_ledger",
    "read_ledger_file",
    "save_ledger",
    "unreadable_ledgers",
    "updating",
]
