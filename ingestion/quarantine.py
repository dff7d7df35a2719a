"""Rows of a user's input file that could not be read: kept with their file, line and reason.

A released data file with one odd row must not block its good rows. Each family's file loader
(for example the VLStereoSet CSV) audits the rows it can read and hands the others to this
module as :class:`QuarantinedRow` s; :func:`land_quarantine` lands them in
``landing/input_quarantine`` (one snapshot shard per input file and content, so re-reading the
same file writes nothing), where ``dora query`` and the summary count them. Nothing is dropped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from ingestion.landing import landing_dir, write_shard

#: The landing table of quarantined input rows (its schema is ``SCHEMAS["input_quarantine"]``).
QUARANTINE_TABLE = "input_quarantine"
#: Characters of a quarantined row's text that are kept (a row can be one huge field).
MAX_RAW_CHARS = 2000


@dataclass(frozen=True)
class QuarantinedRow:
    """One input row that was not audited.

    Attributes:
        source_file: the file's name as given by the user.
        line: 1-based line of the file where the row starts.
        row: 1-based data row number (header excluded), or ``None`` for a file-level problem.
        reason: why the row was set aside, one line (e.g. ``"9 fields, expected 8"``).
        raw: the row's text as read, at most :data:`MAX_RAW_CHARS` characters; bytes that are
            not UTF-8 are shown as ``\\xNN``.
    """

    source_file: str
    line: int
    row: int | None
    reason: str
    raw: str


def shown(text: str) -> str:
    """``text`` with undecodable bytes (surrogate escapes) as ``\\xNN``, cut to :data:`MAX_RAW_CHARS`."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text if len(text) <= MAX_RAW_CHARS else text[:MAX_RAW_CHARS] + "..."


def land_quarantine(family: str, dataset_id: str, rows: list[QuarantinedRow]) -> int:
    """Land the quarantined rows of one input file in ``landing/input_quarantine``.

    Args:
        family: the probe family that read the file (e.g. ``vlstereoset``).
        dataset_id: the input's id (e.g. ``vls-<sha256 prefix>``), the shard's partition.
        rows: the file's quarantined rows (may be empty: nothing is written).

    Returns:
        The number of rows in the snapshot (landing the same rows again writes nothing new).
    """
    if not rows:
        return 0
    payload = [asdict(r) for r in rows]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]
    name = f"{family}-{digest}"
    if (landing_dir(QUARANTINE_TABLE) / dataset_id / f"{name}.parquet").exists():
        return len(rows)
    now = datetime.now(timezone.utc)
    write_shard(
        QUARANTINE_TABLE,
        [{"family": family, "dataset_id": dataset_id, "source_file": r.source_file, "source_line": r.line,
          "source_row": r.row, "reason": r.reason, "raw_text": r.raw, "landed_at": now} for r in rows],
        partition=dataset_id, name=name,
    )
    return len(rows)


__all__ = ["MAX_RAW_CHARS", "QUARANTINE_TABLE", "QuarantinedRow", "land_quarantine", "shown"]
