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

from ingestion.landing import dora_home, set_aside_corrupt_warehouse, warehouse_path, warehouse_problem


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
                    listing.append(f"{key[len(root.path):].lstrip('/')}\t{info.get('size')}\t{info.get('ETag') or info.get('mtime')}")
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
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "fingerprint": digest,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "metadata": dict(metadata or {}),
    }
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(payload, sort_keys=True, default=str))
    os.replace(tmp, path)
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
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"fingerprint": None, "full_refresh": True,
               "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(payload, sort_keys=True))
    os.replace(tmp, path)
    return path


def full_refresh_requested(step: str) -> bool:
    """True when :func:`request_full_refresh` asked for ``step``'s next run to rebuild everything."""
    return bool((load_state(step) or {}).get("full_refresh"))


def recover_warehouse(warehouse_steps: Sequence[str], *, rebuild: bool = False) -> list[str]:
    """Make the next build of the warehouse rebuild what is gone; returns one-line notices.

    The landing zone is the source of truth, so the warehouse may be lost at any time:

    - a corrupt warehouse (:func:`ingestion.landing.warehouse_problem`: not DuckDB, cut short,
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
