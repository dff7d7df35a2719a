"""Rows of a user's input file that could not be read: kept with their file, line and reason.

A released data file with one odd row must not block its good rows. Each family's file loader
(for example the VLStereoSet CSV) audits the rows it can read and hands the others to this
module as :class:`QuarantinedRow` s; :func:`land_quarantine` lands them in
``landing/input_quarantine`` (one snapshot shard per input file and content, so re-reading the
same file writes nothing), where ``dora query`` and the summary count them. Nothing is dropped.

The families share the reading: :func:`read_input_bytes` (a missing file, a folder or a FIFO is
one :class:`~ingestion.errors.InputFileError` line, never a hang), :func:`decode_text` (UTF-8
with or without BOMs; UTF-16/32 refused by name; other bytes kept so that only the rows
holding them are quarantined, with the file's first bad byte offset, :func:`not_utf8`) and
:func:`read_csv_records` (rows that do not split into the header's fields are quarantined);
each loader then checks its own values. A file with no good row is :func:`no_good_row_error`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from ingestion.errors import InputFileError
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
        line: 1-based line of the file where the row starts; ``None`` for an entry of a folder
            (``source_file`` is then the entry's file name).
        row: 1-based data row number (header excluded), or ``None`` for a file-level problem.
        reason: why the row was set aside, one line (e.g. ``"9 fields, expected 8"``).
        raw: the row's text as read, at most :data:`MAX_RAW_CHARS` characters; bytes that are
            not UTF-8 are shown as ``\\xNN``.
    """

    source_file: str
    line: int | None
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
        [
            {
                "family": family,
                "dataset_id": dataset_id,
                "source_file": r.source_file,
                "source_line": r.line,
                "source_row": r.row,
                "reason": r.reason,
                "raw_text": r.raw,
                "landed_at": now,
            }
            for r in rows
        ],
        partition=dataset_id,
        name=name,
    )
    return len(rows)


# ----------------------------------------------------------------------------- reading text files

#: Longest CSV field accepted, in characters: a longer one is a broken row (e.g. an unclosed
#: quote that swallowed the rest of the file), quarantined by name instead of audited.
MAX_FIELD_CHARS = 10_000
_UNDECODABLE = re.compile("[\udc80-\udcff]")
#: Byte-order marks of encodings that are not UTF-8: named in the error instead of a byte offset
#: (UTF-32 LE first: its mark starts with UTF-16 LE's).
_FOREIGN_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def read_input_bytes(path: str | Path, what: str) -> bytes:
    """The bytes of a user's input file, or one clear error.

    Args:
        path: the file. what: how the user knows it, for the message (``"faces manifest"``).

    Raises:
        InputFileError: no such file, a folder, a FIFO or device (reading it could block
            forever), or a file that cannot be read (permissions).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise InputFileError(f"{what} {path}: no such file")
    if not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        raise InputFileError(f"{what} {path}: {kind}; expected a file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None


def decode_text(raw: bytes, path: str | Path, what: str) -> str:
    """``raw`` as text: UTF-8 with one or more BOMs stripped; bytes that are not UTF-8 are kept
    as surrogate escapes, so the rows holding them can be quarantined one by one
    (:func:`not_utf8`) while the others are read.

    Raises:
        InputFileError: a UTF-16 / UTF-32 file (its byte-order mark says so): every row would be
            unreadable, so the whole file is refused with what to do.
    """
    for bom, name in _FOREIGN_BOMS:
        if raw.startswith(bom):
            raise InputFileError(f"{what} {path}: the file is {name} (byte-order mark at byte offset 0); save it as UTF-8")
    return raw.decode("utf-8", "surrogateescape").lstrip("\ufeff")


def first_bad_byte(raw: bytes) -> int | None:
    """Byte offset of the first byte of ``raw`` that is not UTF-8, or ``None``."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def not_utf8(texts: Sequence[str], raw: bytes) -> str | None:
    """Why these decoded fields are not UTF-8 (their first bad byte and the file's first bad
    byte offset), or ``None`` when they are."""
    for text in texts:
        bad = _UNDECODABLE.search(text)
        if bad:
            byte = ord(bad.group()) - 0xDC00
            offset = first_bad_byte(raw)
            return f"not UTF-8 text: byte 0x{byte:02x}; the file's first one is at byte offset {offset} (save the file as UTF-8)"
    return None


@dataclass(frozen=True)
class CsvRecord:
    """One structurally sound CSV row: ``values`` maps each header column to its stripped text;
    ``ignored``: values under the header's unnamed trailing columns were dropped (only with
    ``read_csv_records(..., ignore_unnamed=True)``)."""

    line: int
    row: int
    values: dict
    raw: str
    ignored: bool = False


def read_csv_records(
    path: str | Path, columns: Sequence[str], what: str, *, any_of: Sequence[str] = (), ignore_unnamed: bool = False
) -> tuple[list[CsvRecord], list[QuarantinedRow], bytes]:
    """A user's CSV file read row by row: the rows that split into the header's fields, and
    the ones that do not, quarantined with their line and reason.

    A row is quarantined when it cannot be split (``csv.Error``), holds bytes that are not
    UTF-8, has more or fewer fields than the header (trailing empty fields are tolerated), or
    a field over :data:`MAX_FIELD_CHARS` characters. Blank lines are skipped. The caller
    checks the values of the returned records and quarantines the bad ones itself.

    Args:
        path: the file. columns: columns the header must hold (any order; other columns are
            kept in ``values``). what: the file's role, for messages. any_of: the header must
            also hold at least one of these (e.g. the key columns of an image manifest).
            ignore_unnamed: values under the header's unnamed trailing columns (a header
            ending in empty names, as the released VLStereoSet file) are dropped and the record
            marked ``ignored``, instead of quarantining the row for its field count.

    Returns:
        (records, quarantined rows, the file's bytes: hash them for a dataset id).

    Raises:
        InputFileError: see :func:`read_input_bytes` and :func:`decode_text`; an empty file; a
            header without a required column (and, when its bytes are not UTF-8, their offset).
    """
    path = Path(path).expanduser()
    raw = read_input_bytes(path, what)
    text = decode_text(raw, path, what)
    csv.field_size_limit(max(csv.field_size_limit(), 64 << 20))  # long fields are quarantined below, by name
    reader = csv.reader(io.StringIO(text, newline=""))
    names, unnamed = _header_names(reader, raw, path, columns, what, any_of)
    records: list[CsvRecord] = []
    quarantined: list[QuarantinedRow] = []
    row_no = 0
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a NUL byte: the row cannot be split into fields
            row_no += 1
            quarantined.append(QuarantinedRow(path.name, start, row_no, f"not a CSV row: {exc}", ""))
            continue
        if not any(f.strip() for f in fields):
            continue  # a blank line (e.g. at the end of the file)
        row_no += 1
        rowtext = shown(",".join(fields))
        fields, ignored, why = _split_row(fields, names, unnamed, ignore_unnamed, raw)
        if why:
            quarantined.append(QuarantinedRow(path.name, start, row_no, why, rowtext))
            continue
        records.append(CsvRecord(start, row_no, dict(zip(names, (f.strip() for f in fields), strict=True)), rowtext, ignored))
    return records, quarantined, raw


def _header_names(reader, raw: bytes, path: Path, columns: Sequence[str], what: str, any_of: Sequence[str]) -> tuple[list[str], int]:
    """(the header's column names, without its unnamed trailing ones; how many of those there
    were). Raises InputFileError: an empty file, a header that is not a CSV row or lacks a
    required column."""
    try:
        header = next(reader)
    except StopIteration:
        raise InputFileError(f"{what} {path}: empty file, expected a header with {', '.join(columns)}") from None
    except csv.Error as exc:
        raise InputFileError(f"{what} {path}, line 1: the header is not a CSV row ({exc})") from None
    names = [h.strip().lstrip("\ufeff") for h in header]
    unnamed = 0
    while names and names[-1] == "":
        names.pop()
        unnamed += 1
    missing = [c for c in columns if c not in names]
    if any_of and not set(any_of) & set(names):
        missing.append(" or ".join(any_of))
    if missing:
        why = not_utf8(header, raw)
        raise InputFileError(
            f"{what} {path}, line 1: missing column(s) {missing} in the header {names}; expected {list(columns)}"
            + (f" and one of {list(any_of)}" if any_of else "")
            + (f"; {why}" if why else "")
        )
    return names, unnamed


def _split_row(fields: list[str], names: list[str], unnamed: int, ignore_unnamed: bool, raw: bytes) -> tuple[list[str], bool, str | None]:
    """(the row's fields, whether values under unnamed columns were dropped, why the row is
    quarantined or None): bytes that are not UTF-8, a field count other than the header's
    (trailing empty fields tolerated), a field over MAX_FIELD_CHARS characters."""
    ignored = False
    if ignore_unnamed and len(names) < len(fields) <= len(names) + unnamed:
        ignored = any(f.strip() for f in fields[len(names) :])
        fields = fields[: len(names)]
    while len(fields) > len(names) and fields[-1].strip() == "":
        fields = fields[:-1]
    why = not_utf8(fields, raw)
    if why is None and len(fields) != len(names):
        why = f"{len(fields)} fields, expected {len(names)} ({', '.join(names)})"
    if why is None:
        long = [(n, len(v)) for n, v in zip(names, fields, strict=True) if len(v) > MAX_FIELD_CHARS]
        if long:
            why = f"field {long[0][0]}: {long[0][1]:,} characters, more than {MAX_FIELD_CHARS:,} (a broken row?)"
    return fields, ignored, why


def no_good_row_error(path: str | Path, what: str, quarantined: Sequence[QuarantinedRow], unit: str = "data rows") -> InputFileError:
    """The one-line error of a file that yielded nothing to audit: the count and the first reasons."""
    if not quarantined:
        return InputFileError(f"{what} {path}: no {unit} after the header")
    first = "; ".join(f"{'line ' + str(q.line) if q.line else q.source_file}: {q.reason}" for q in quarantined[:3])
    return InputFileError(f"{what} {path}: none of its {len(quarantined)} {unit} can be audited ({first})")


__all__ = [
    "MAX_FIELD_CHARS",
    "MAX_RAW_CHARS",
    "QUARANTINE_TABLE",
    "CsvRecord",
    "QuarantinedRow",
    "decode_text",
    "first_bad_byte",
    "land_quarantine",
    "no_good_row_error",
    "not_utf8",
    "read_csv_records",
    "read_input_bytes",
    "shown",
]
