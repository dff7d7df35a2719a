"""The user-facing error base of dora (no raw tracebacks for a user's mistake).

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


__all__ = ["AuditFailedError", "AuditIdentityError", "DoraError", "WarehouseCorruptError"]
