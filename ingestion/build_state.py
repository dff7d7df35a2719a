"""Input fingerprints of dora's derived steps, so a re-run with nothing new skips them.

Two steps of an audit cost seconds even when nothing has changed: descriptor extraction
(spaCy over every CrowS-Pairs pair) and the ``dbt build`` of the warehouse. Each records,
after it succeeds, a fingerprint of everything it read; the next run compares and skips the
step when the fingerprint is the same ("a re-run of a finished audit makes no model
calls and finishes in seconds").

A fingerprint is a SHA-256 over named parts: file contents (small inputs such as the
CrowS-Pairs CSV), file listings (the landing zone: relative path, size and mtime of every
Parquet shard, never their contents, so it stays cheap at paper scale) and plain values
(code versions, dbt selections). State files live in ``$DORA_HOME/state/<step>.json`` and
are written atomically; deleting one forces the step to run again.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion.home import dora_home
from ingestion.warehouse import set_aside_corrupt_warehouse, warehouse_path, warehouse_problem

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Fingerprint:
    """An incremental SHA-256 over the inputs of one step.

    Each ``add_*`` call mixes a labelled part into the digest, so the same bytes under a
    different label give a different fingerprint.
    """

    _hash: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    parts: list[str] = field(default_factory=list)

    def _mix(self, label: str, payload: bytes) -> "Fingerprint":
        self._hash.update(len(label).to_bytes(4, "big") + label.encode())
        self._hash.update(len(payload).to_bytes(8, "big") + payload)
        self.parts.append(label)
        return self

    def add_value(self, label: str, value: object) -> "Fingerprint":
        """Mix a JSON-serialisable value (sorted keys) into the digest."""
        return self._mix(f"value:{label}", json.dumps(value, sort_keys=True, default=str).encode())

    def add_file(self, path: str | Path, label: str | None = None) -> "Fingerprint":
        """Mix a file's whole contents (for small inputs) under ``label`` (default: the file
        name); a missing file counts as the marker ``<missing>``."""
        p = Path(path)
        data = p.read_bytes() if p.is_file() else b"<missing>"
        return self._mix(f"file:{label or p.name}", hashlib.sha256(data).digest())

    def add_tree(self, root: str | Path, pattern: str = "*.parquet") -> "Fingerprint":
        """Mix a listing of ``root`` (relative path, size in bytes, mtime in ns of every file
        matching ``pattern``, recursively; on object storage, a ``upath.UPath``: key, size and
        ETag). Cheap: no file is read."""
        listing = []
        if not isinstance(root, (str, Path)):  # a landing folder on object storage (upath.UPath)
            # key, size and ETag of every object: a new or rewritten shard changes the listing
            found = root.fs.find(root.path, detail=True) if root.fs.exists(root.path) else {}
            for key, info in sorted(found.items()):
                if fnmatch.fnmatch(key.rsplit("/", 1)[-1], pattern):
                    listing.append(f"{key[len(root.path) :].lstrip('/')}\t{info.get('size')}\t{info.get('ETag') or info.get('mtime')}")
            return self._mix(f"tree:{root.name}", "\n".join(listing).encode())
        base = Path(root)
        if base.is_dir():
            for p in sorted(base.rglob(pattern)):
                if p.is_file():
                    st = p.stat()
                    listing.append(f"{p.relative_to(base).as_posix()}\t{st.st_size}\t{st.st_mtime_ns}")
        return self._mix(f"tree:{base.name}", "\n".join(listing).encode())

    def hexdigest(self) -> str:
        """The fingerprint, 64 hex characters."""
        return self._hash.hexdigest()


def _write_json_atomic(path: Path, payload) -> None:
    """Write ``payload`` as JSON to ``path`` whole or not at all (a temporary file renamed into
    place): a reader never sees half a state or cache file. Raises OSError (the temporary file
    is removed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(json.dumps(payload, sort_keys=True, default=str))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def cache_root() -> Path:
    """dora's cache shared by every home of this user: ``$DORA_CACHE`` (default
    ``~/.cache/dora``). It holds only what can be recomputed from shipped inputs (the
    dequantised GGUF weights, the descriptor tables), keyed by their fingerprints, so deleting
    it is always safe; read at call time."""
    return Path(os.environ.get("DORA_CACHE") or Path.home() / ".cache" / "dora").expanduser()


def _cache_entry(step: str, fingerprint: Fingerprint | str) -> Path:
    digest = fingerprint if isinstance(fingerprint, str) else fingerprint.hexdigest()
    return cache_root() / step / digest


def cached_tables(step: str, fingerprint: Fingerprint | str) -> tuple[dict[str, "pa.Table"], dict] | None:
    """Tables and metadata another home's ``step`` computed from the same inputs, or ``None``.

    A step whose outputs depend only on shipped inputs (descriptor extraction: spaCy over every
    CrowS-Pairs pair, ~10 s of CPU) computes them once per machine instead of once per home;
    :func:`cache_tables` stores them under the inputs' fingerprint. An entry that cannot be
    read (removed meanwhile, cut short) counts as absent.

    Returns:
        (table name -> ``pa.Table`` read from its Parquet file, the metadata recorded with
        them), or ``None``.
    """
    import pyarrow.parquet as pq

    entry = _cache_entry(step, fingerprint)
    try:
        meta = json.loads((entry / "meta.json").read_text())
        tables = {name: pq.read_table(entry / f"{name}.parquet") for name in meta["tables"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return tables, meta.get("metadata", {})


def cache_tables(step: str, fingerprint: Fingerprint | str, tables: Mapping[str, "pa.Table"], metadata: Mapping) -> None:
    """Store ``step``'s output tables and metadata under its inputs' fingerprint (see
    :func:`cached_tables`), atomically: written into a temporary folder and renamed into place;
    a process that stored the same entry first wins. A cache that cannot be written (read-only
    home folder, full disk) only costs the next home the computation again."""
    import shutil

    import pyarrow.parquet as pq

    entry = _cache_entry(step, fingerprint)
    tmp = entry.with_name(f".{entry.name}.{uuid.uuid4().hex}")
    try:
        tmp.mkdir(parents=True)
        for name, table in tables.items():
            pq.write_table(table, tmp / f"{name}.parquet")
        (tmp / "meta.json").write_text(json.dumps({"tables": list(tables), "metadata": dict(metadata)}, default=str))
        os.replace(tmp, entry)
    except OSError:  # an entry stored meanwhile (rename onto a non-empty folder) or no space
        shutil.rmtree(tmp, ignore_errors=True)


def cached_json(step: str, fingerprint: Fingerprint | str):
    """A JSON value another home's ``step`` computed from the same inputs (see
    :func:`cache_json`), or ``None`` when there is none or it cannot be read."""
    try:
        return json.loads(_cache_entry(step, fingerprint).with_suffix(".json").read_text())["value"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cache_json(step: str, fingerprint: Fingerprint | str, value) -> None:
    """Store a JSON-serialisable ``value`` under ``step`` and its inputs' fingerprint, in
    :func:`cache_root` (atomic write); a cache that cannot be written only costs the next
    home the computation again."""
    try:
        _write_json_atomic(_cache_entry(step, fingerprint).with_suffix(".json"), {"value": value})
    except OSError:
        pass


def _state_path(step: str) -> Path:
    return dora_home() / "state" / f"{step}.json"


def load_state(step: str) -> dict | None:
    """The state recorded by the last successful run of ``step``, or ``None``.

    An unreadable state file counts as absent (the step then simply runs again).
    """
    try:
        state = json.loads(_state_path(step).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None  # e.g. a file holding [1]


def is_unchanged(step: str, fingerprint: Fingerprint | str, *, outputs: Iterable[str | Path] = ()) -> dict | None:
    """The recorded state when ``step`` last succeeded on exactly these inputs, else ``None``.

    Args:
        step: step name (e.g. ``descriptors``, ``dbt_dora_dbt_models``).
        fingerprint: the current inputs' fingerprint.
        outputs: files the step produced; if any is missing the step must run again.
    """
    digest = fingerprint if isinstance(fingerprint, str) else fingerprint.hexdigest()
    state = load_state(step)
    if not state or state.get("fingerprint") != digest:
        return None
    if any(not Path(p).exists() for p in outputs):
        return None
    return state


def record_success(step: str, fingerprint: Fingerprint | str, metadata: Mapping | None = None) -> Path:
    """Record that ``step`` succeeded on ``fingerprint`` (atomic write), with its metadata.

    Returns:
        The state file path (``$DORA_HOME/state/<step>.json``).
    """
    digest = fingerprint if isinstance(fingerprint, str) else fingerprint.hexdigest()
    path = _state_path(step)
    payload = {
        "fingerprint": digest,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "metadata": dict(metadata or {}),
    }
    _write_json_atomic(path, payload)
    return path


def forget(step: str) -> None:
    """Drop the recorded state of ``step`` (its next run is never skipped)."""
    _state_path(step).unlink(missing_ok=True)


def request_full_refresh(step: str) -> Path:
    """Make the next run of ``step`` rebuild everything from landing (``dbt build
    --full-refresh``) instead of skipping or building incrementally.

    The request is the step's state itself (no fingerprint, so the step cannot be skipped):
    it stays until a run of the step succeeds and records its new state, so a rebuild
    interrupted halfway is completed by the next run, whichever command starts it.
    """
    path = _state_path(step)
    _write_json_atomic(path, {"fingerprint": None, "full_refresh": True, "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    return path


def full_refresh_requested(step: str) -> bool:
    """True when :func:`request_full_refresh` asked for ``step``'s next run to rebuild everything."""
    return bool((load_state(step) or {}).get("full_refresh"))


def recover_warehouse(warehouse_steps: Sequence[str], *, rebuild: bool = False) -> list[str]:
    """Make the next build of the warehouse rebuild what is gone; returns one-line notices.

    The landing zone is the source of truth, so the warehouse may be lost at any time:

    - a corrupt warehouse (:func:`ingestion.warehouse.warehouse_problem`: not DuckDB, cut short,
      unreadable catalog) is moved aside (never deleted) and the steps that build it forget
      their state, so they build a new one;
    - a missing warehouse after an earlier build (deleted by hand: the README says that is
      safe) makes those steps forget their state too: their fingerprints describe the
      landing zone, not a warehouse that no longer exists;
    - ``rebuild`` (``dora audit --rebuild``) asks each step for a full refresh
      (:func:`request_full_refresh`): every incremental model is recomputed from landing,
      also rows whose timestamps are older than a mart's watermark.

    Args:
        warehouse_steps: the build-state step names of the builds that write the warehouse,
            in build order.

    Returns:
        What was recovered, one line each (empty when the warehouse was fine).
    """
    notices = []
    path = warehouse_path()
    problem = warehouse_problem(path)
    if problem:
        aside = set_aside_corrupt_warehouse(path, problem)
        notices.append(f"the warehouse {path} was corrupt: {problem}; moved to {aside}, rebuilding it from the landing zone")
    elif not path.exists() and any(load_state(step) for step in warehouse_steps):
        notices.append(f"the warehouse {path} is missing: rebuilding it from the landing zone (the source of truth)")
    if notices:
        for step in warehouse_steps:
            forget(step)
    if rebuild:
        for step in warehouse_steps:
            request_full_refresh(step)
    return notices
