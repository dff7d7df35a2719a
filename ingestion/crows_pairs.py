"""Load and validate CrowS-Pairs, the source of BiasDora's descriptors.

CrowS-Pairs (Nangia et al., EMNLP 2020) holds 1,508 minimal sentence pairs: ``sent_more`` is
the more stereotyping sentence, ``sent_less`` the same sentence about another group, and
``bias_type`` one of nine bias dimensions. BiasDora (seed 004) takes its descriptors from the
phrase in which the two sentences differ (docs/method.md#1-descriptors).

:func:`load_crows_pairs` turns the CSV into an Arrow table with the ``crows_pairs`` landing
schema (:data:`ingestion.contracts.SCHEMAS`). Every problem is reported as a
:class:`CrowsPairsFormatError` that names the file, the 1-based physical line where the
offending record starts (the header is line 1) and the problem, and loading stops at the first
one: a half-valid descriptor source is worse than none.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pyarrow as pa

from ingestion.contracts import SCHEMAS
from ingestion.errors import CrowsPairsFormatError

#: The nine CrowS-Pairs bias types, spelt as in the dataset (Nangia et al. 2020, Table 1;
#: docs/method.md#1-descriptors). BiasDora calls them bias dimensions.
BIAS_DIMENSIONS: tuple[str, ...] = (
    "age",
    "disability",
    "gender",
    "nationality",
    "physical-appearance",
    "race-color",
    "religion",
    "sexual-orientation",
    "socioeconomic",
)

#: Columns a CrowS-Pairs file must have; ``stereo_antistereo`` is optional (null if absent).
REQUIRED_COLUMNS: tuple[str, ...] = ("sent_more", "sent_less", "bias_type")

# Header names under which the unnamed pandas index column may appear.
_INDEX_COLUMNS = ("", "Unnamed: 0")
_SURROGATE = re.compile("[\udc80-\udcff]")


def default_crows_pairs_path() -> Path:
    """Path of the CrowS-Pairs CSV shipped with dora (``ingestion/data/crows_pairs/``).

    Found relative to this module, so it works from any working directory and from an
    installed package (the data is package data, see ``pyproject.toml``).
    """
    return Path(__file__).resolve().parent / "data" / "crows_pairs" / "crows_pairs_anonymized.csv"


def _bad_bytes(text: str) -> str:
    """Describe the undecodable bytes (kept as surrogates) in ``text``, e.g. ``0xff``."""
    found = _SURROGATE.findall(text)
    return ", ".join(f"0x{ord(ch) - 0xDC00:02x}" for ch in found[:3])


def load_crows_pairs(path: str | Path | None = None) -> pa.Table:
    """Read and validate a CrowS-Pairs CSV into the ``crows_pairs`` landing schema.

    The file is read with the :mod:`csv` module (RFC 4180 quoting, quoted fields may span
    lines, CRLF or LF line endings, an optional UTF-8 byte-order mark). Blank lines are
    skipped. Sentences are kept exactly as written in the file; ``bias_type`` is stripped and
    lower-cased before it is checked and stored.

    Args:
        path: the CSV; default :func:`default_crows_pairs_path` (the shipped 1,508 pairs).

    Returns:
        A ``pa.Table`` with schema ``SCHEMAS['crows_pairs']`` and one row per record, in file
        order: ``pair_id`` (the CSV's unnamed index column if it has one, else the 0-based
        record number), ``sent_more``, ``sent_less``, ``stereo_antistereo`` (stripped and
        lower-cased; null when the column is absent or the cell empty), ``bias_type`` (one of
        :data:`BIAS_DIMENSIONS`), ``source_file`` (the file name) and ``source_line`` (the line
        where the record starts). Shape: (number of records, 7).

    Raises:
        FileNotFoundError: ``path`` does not exist (the message names it).
        CrowsPairsFormatError: on the first of these, with file name and line: the file is
            empty or has no record; a required column (:data:`REQUIRED_COLUMNS`) is missing or
            a header name is repeated; bytes that are not UTF-8; a ragged row (a number of
            fields different from the header's, which is also how a file cut off mid-record
            shows); an unterminated quoted field or other bad quoting (truncated file); an
            index that is not an integer or repeats; an empty ``sent_more`` or ``sent_less``;
            a ``bias_type`` outside :data:`BIAS_DIMENSIONS`.
    """
    path = Path(path) if path is not None else default_crows_pairs_path()
    if not path.is_file():
        raise FileNotFoundError(f"CrowS-Pairs file not found: {path}")
    name = path.name

    # Undecodable bytes are kept as lone surrogates so that the error can name the record
    # (and so the line) they are in, instead of a bare byte offset.
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
        reader = csv.reader(fh, strict=True)
        header, index_col, pos = _read_header(reader, name)
        out: dict[str, list] = {f: [] for f in SCHEMAS["crows_pairs"].names}
        seen_ids: dict[int, int] = {}
        record_no = 0
        while True:
            start = reader.line_num + 1  # physical line on which the next record starts
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise CrowsPairsFormatError(name, start, f"bad quoting or truncated record ({exc})") from None
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            _check_record(row, len(header), name, start)
            if index_col is not None:
                pair_id = _index_of(row[index_col], seen_ids, name, start)
            else:
                pair_id = record_no
            sent_more, sent_less, stereo, bias_type = _record_values(row, pos, name, start)
            out["pair_id"].append(pair_id)
            out["sent_more"].append(sent_more)
            out["sent_less"].append(sent_less)
            out["stereo_antistereo"].append(stereo)
            out["bias_type"].append(bias_type)
            out["source_file"].append(name)
            out["source_line"].append(start)
            record_no += 1

    if record_no == 0:
        raise CrowsPairsFormatError(name, 2, "no sentence pair after the header")
    return pa.table(out, schema=SCHEMAS["crows_pairs"])


def _read_header(reader, name: str) -> tuple[list[str], int | None, dict[str, int]]:
    """(header, the index column's position or None, position of each column read) of a
    CrowS-Pairs CSV. Raises CrowsPairsFormatError (line 1): no header, a bad one, bytes that are
    not UTF-8, a required column missing or a column repeated."""
    try:
        header = next(reader)
    except StopIteration:
        raise CrowsPairsFormatError(name, 1, "empty file (no header)") from None
    except csv.Error as exc:
        raise CrowsPairsFormatError(name, 1, f"malformed header ({exc})") from None
    if _SURROGATE.search(",".join(header)):
        raise CrowsPairsFormatError(name, 1, f"not valid UTF-8 (byte {_bad_bytes(','.join(header))})")
    columns = [h.strip() for h in header]
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise CrowsPairsFormatError(name, 1, f"missing required column(s) {', '.join(missing)} (header: {columns})")
    named = [c for c in columns if c not in _INDEX_COLUMNS]
    repeated = sorted({c for c in named if named.count(c) > 1})
    if repeated:
        raise CrowsPairsFormatError(name, 1, f"repeated column(s) {', '.join(repeated)}")
    index_col = 0 if columns[0] in _INDEX_COLUMNS else None
    wanted = (*REQUIRED_COLUMNS, "stereo_antistereo")
    return header, index_col, {c: columns.index(c) for c in wanted if c in columns}


def _check_record(row: list[str], fields: int, name: str, start: int) -> None:
    """Raises CrowsPairsFormatError for a record with bytes that are not UTF-8 or a number of
    fields other than the header's ``fields``."""
    joined = "\x1f".join(row)
    if _SURROGATE.search(joined):
        raise CrowsPairsFormatError(name, start, f"not valid UTF-8 (byte {_bad_bytes(joined)})")
    if len(row) != fields:
        raise CrowsPairsFormatError(
            name,
            start,
            f"ragged row: {len(row)} fields, header has {fields} (truncated or mis-quoted record?)",
        )


def _index_of(cell: str, seen_ids: dict[int, int], name: str, start: int) -> int:
    """The record's index (the CSV's index column), recorded in ``seen_ids`` (index -> line).
    Raises CrowsPairsFormatError: not an integer, or repeated."""
    raw_id = cell.strip()
    try:
        pair_id = int(raw_id)
    except ValueError:
        raise CrowsPairsFormatError(name, start, f"index {raw_id!r} is not an integer") from None
    if pair_id in seen_ids:
        raise CrowsPairsFormatError(name, start, f"index {pair_id} repeats line {seen_ids[pair_id]}")
    seen_ids[pair_id] = start
    return pair_id


def _record_values(row: list[str], pos: dict[str, int], name: str, start: int) -> tuple[str, str, str | None, str]:
    """(sent_more, sent_less, stereo_antistereo or None, bias_type) of a record. Raises
    CrowsPairsFormatError: an empty sentence, a bias_type outside BIAS_DIMENSIONS."""
    sent_more, sent_less = row[pos["sent_more"]], row[pos["sent_less"]]
    for col, value in (("sent_more", sent_more), ("sent_less", sent_less)):
        if not value.strip():
            raise CrowsPairsFormatError(name, start, f"empty {col}")
    bias_type = row[pos["bias_type"]].strip().lower()
    if bias_type not in BIAS_DIMENSIONS:
        raise CrowsPairsFormatError(
            name,
            start,
            f"unknown bias_type {row[pos['bias_type']]!r} (expected one of {', '.join(BIAS_DIMENSIONS)})",
        )
    stereo = None
    if "stereo_antistereo" in pos:
        stereo = row[pos["stereo_antistereo"]].strip().lower() or None
    return sent_more, sent_less, stereo, bias_type
