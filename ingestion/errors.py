"""The user-facing error base of dora (issue 17: no raw tracebacks for a user's mistake).

A :class:`DoraError`'s message is a complete one-line diagnosis (the cause and the fix); the
``dora`` command prints it as ``dora <command>: <message>`` and exits non-zero, without a
traceback. Every layer may raise it (``ingestion`` imports nothing of ours, so all can).
"""

from __future__ import annotations


class DoraError(Exception):
    """An error whose message tells the user what went wrong and what to do (one line)."""


class WarehouseCorruptError(DoraError):
    """``$DORA_HOME/warehouse.duckdb`` exists but is not a DuckDB database file."""


class AuditFailedError(DoraError):
    """An audit finished with too many failed calls (or was refused); it is marked ``failed``."""


class AuditIdentityError(DoraError):
    """An audit id names an existing audit of another model / version / backend / config."""


# ----------------------------------------------------------------------------- input files


class InputFileError(DoraError, ValueError):
    """A user's input file (or folder) that yields nothing to audit: missing, not the expected
    format, not UTF-8 at its header (the byte offset is named), or with no good row. A file with
    some good rows is not an error: its bad rows are quarantined (``ingestion/quarantine.py``)."""


class VLStereoSetFormatError(InputFileError):
    """A VLStereoSet CSV (or image manifest or image folder) that does not fit the format; the
    message names the file, the row (data row number and file line) and the field."""


class CounterfactualInputError(InputFileError):
    """Invalid counterfactual input (a manifest or lexicon with nothing usable, an attribute
    value, an occupation); the message names the file, row and field. A file with some good
    rows is not an error: its bad rows are quarantined."""


class PlanTooLargeError(DoraError, ValueError):
    """The counts asked for (samples, instances, seeds, sets) plan more rows than one run may
    hold; raised while planning, before any model loads. The message names the count and the limit."""


__all__ = [
    "AuditFailedError", "AuditIdentityError", "CounterfactualInputError", "DoraError", "InputFileError", "PlanTooLargeError",
    "VLStereoSetFormatError", "WarehouseCorruptError",
]
