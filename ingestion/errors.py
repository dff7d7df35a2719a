"""Every shared error type of dora, in one module at the ground floor.

A :class:`DoraError`'s message is a complete one-line diagnosis (the cause and the fix); the
``dora`` command prints it as ``dora <command>: <message>`` and exits non-zero, without a
traceback. Every layer may raise these (``ingestion`` imports nothing of ours, so all can),
and keeping them all here has two uses: the CLI knows every user-facing error by walking
:class:`DoraError`'s subclasses after importing this one module, and no two modules import
each other only to share an exception type (``model_ref`` and the OpenAI backend once did).
A probe family's own kind of bad input subclasses :class:`InputFileError` in its probe package
(``models_inference/probes/<family>/errors.py``) and is listed by its record
(``ProbeFamily.errors``), so the CLI knows it once the family records are imported.
"""

from __future__ import annotations

from pathlib import Path


class DoraError(Exception):
    """An error whose message tells the user what went wrong and what to do (one line)."""


# ----------------------------------------------------------------------------- warehouse


class WarehouseCorruptError(DoraError):
    """``$DORA_HOME/warehouse.duckdb`` exists but is not a DuckDB database file."""


class DagsterStorageError(DoraError):
    """A file of the Dagster instance storage (``$DAGSTER_HOME/**/*.db``) is not a usable
    SQLite database (truncated, overwritten, a disk error)."""


class WarehouseBusyError(DoraError, RuntimeError):
    """Another process holds the warehouse's write lock (an audit is building)."""


class WarehouseMissingError(DoraError, FileNotFoundError):
    """No warehouse yet: run ``dora audit`` first."""


class QueryRefusedError(DoraError, ValueError):
    """The SQL would modify the warehouse or its connection; nothing was run."""


# ----------------------------------------------------------------------------- audits


class QueryTimeoutError(DoraError, TimeoutError):
    """``dora query`` stopped a query at its time limit (``--timeout``)."""


class UnknownRelationError(DoraError, LookupError):
    """``dora tables NAME``: no dbt model of that name is documented (the message suggests close names)."""


class ReparseError(DoraError, ValueError):
    """``dora reparse``: nothing to re-parse for the given family / audit (the message says why)."""


class DiffError(DoraError, ValueError):
    """``dora diff``: an unknown or ambiguous target / audit reference, a pair out of order, or
    two audits with no probe row in common (the message names what differs)."""


class ReportPageSkipped(DoraError, LookupError):
    """``dora report``: a family's page (or a version page) left unwritten, and so not linked: the
    family's marts are not built, or the warehouse holds no audit of the family (the message
    says which). The command prints it as one line and writes the other pages."""


class LandingContractError(DoraError, ValueError):
    """A landing contract module (``ingestion/contracts/``, or one given to
    ``ingestion.contracts.register_contract``) that cannot join ``SCHEMAS``: a table another
    contract declares, a table name that is not a lower-case identifier, a value that is not a
    ``pyarrow.Schema``, or no ``FAMILY`` / ``SCHEMAS``."""


class FamilyModuleError(DoraError, ImportError):
    """A probe family module (``orchestration/families.py``: the shipped ones and those named in
    ``$DORA_FAMILIES``) that cannot be imported, declares no ``FAMILY`` record, or declares a
    family another module already declared."""


class AuditFailedError(DoraError):
    """An audit finished with too many failed calls (or was refused); it is marked ``failed``."""


class AuditIdentityError(DoraError):
    """An audit id names an existing audit of another model / version / backend / config."""


class RegistryError(DoraError, ValueError):
    """The registry file is missing, not YAML, or has invalid fields.

    Attributes:
        path: the registry file. problems: one ``"<field path>: <message>"`` line per bad field.
    """

    def __init__(self, path: Path | str, problems: list[str]):
        self.path, self.problems = str(path), problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid audit registry {path}:\n{lines}")


class UnknownTargetError(DoraError, KeyError):
    """``--target NAME`` (or a partition) names no target of the registry; the message lists the
    registered names. A ``KeyError`` for the callers that catch one, printed without its quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TargetConfigError(DoraError, ValueError):
    """A registry target's family, options or probe settings are refused by the checks its
    flags would get (unknown family or option, wrong type, out of range, missing input path,
    a plan over the row cap); one line naming the target, the option and the reason."""


# ----------------------------------------------------------------------------- models


class ModelNotAvailableError(DoraError, RuntimeError):
    """The requested model cannot be loaded here (not installed, not cached, no network)."""


class VersionError(DoraError, RuntimeError):
    """A model's current version cannot be read (file missing, not cached, API down)."""


class CompletionsUnsupportedError(ModelNotAvailableError):
    """The endpoint has no ``/v1/completions``: the completion prompt style cannot run on it."""


class PromptLogprobsUnsupportedError(ModelNotAvailableError):
    """The endpoint returns no log-probabilities of prompt tokens (it ignores or declines both
    ``echo=True`` with ``logprobs`` and vLLM's ``prompt_logprobs``), so it cannot give the
    log-likelihood of a given text; the one-line message names the endpoint and the model."""


class CircuitOpenError(RuntimeError):
    """Raised instead of calling a server that failed too many calls in a row.

    Not a :class:`DoraError`: it is one call's failure, landed as that row's error text; the
    audit's failure share turns it into an :class:`AuditFailedError` when too many fail.

    Attributes:
        last_error: the last failure that counted (its text is the row's error text, so the
            failed audit's message groups the calls not sent with the ones that failed).
    """

    def __init__(self, message: str, last_error: BaseException | None):
        super().__init__(message)
        self.last_error = last_error


class MalformedReplyError(ValueError):
    """An API server answered 200 with a body that is not a usable reply (a JSON string, no
    ``choices`` list, a choice without ``finish_reason``). Like :class:`CircuitOpenError`, one
    call's failure: its message (what was wrong and the start of the body) is the row's error
    text."""


# ----------------------------------------------------------------------------- input files


class InputFileError(DoraError, ValueError):
    """A user's input file (or folder) that yields nothing to audit: missing, not the expected
    format, not UTF-8 at its header (the byte offset is named), or with no good row. A file with
    some good rows is not an error: its bad rows are quarantined (``ingestion/quarantine.py``).
    A family's own kind of input error subclasses it in its probe package
    (``models_inference/probes/<family>/errors.py``) and is declared by its record
    (``ProbeFamily.errors``)."""


class PlanTooLargeError(DoraError, ValueError):
    """The counts asked for (samples, instances, seeds, sets) plan more rows than one run may
    hold; raised while planning, before any model loads. The message names the count and the limit."""


class BrokerError(DoraError, RuntimeError):
    """The Celery broker cannot be reached, or no worker answered on it in time (one line;
    ``orchestration/cluster.py: wait_for_worker``)."""


class CrowsPairsFormatError(InputFileError):
    """A CrowS-Pairs file that cannot be loaded as it is (``ingestion/crows_pairs.py``).

    The message always reads ``<file name> line <n>: <problem>``, where ``n`` is the 1-based
    physical line of the CSV on which the offending record starts (header = line 1).

    Attributes:
        file: the file name (not the full path).
        line: the 1-based line number.
        problem: the problem, without the location.
    """

    def __init__(self, file: str, line: int, problem: str) -> None:
        super().__init__(f"{file} line {line}: {problem}")
        self.file = file
        self.line = line
        self.problem = problem


class CeleryWorkerError(DoraError, RuntimeError):
    """A run on Dagster's Celery executor cannot go on: no worker has answered on the broker
    within the worker timeout while steps waited, or the worker that took a step stopped
    answering (killed, its machine lost); the message names the broker or the worker, the
    steps and the timeout (``orchestration/celery_loop.py``)."""


class LandingLocationError(DoraError, ValueError):
    """``$DORA_LANDING_URL`` is not an object-storage URL (``s3://bucket/prefix``)
    (:func:`ingestion.landing_location.landing_url`)."""


class BatchError(DoraError):
    """A Batch API step cannot go on: a batch the API refused or failed as a whole (a bad
    request, a file over a limit: the message names the batch and the API's cause), a batch
    ledger that cannot be read, or a batch output file whose lines name no request dora
    submitted (:mod:`models_inference.backends.batch_api`)."""


class BatchLostError(BatchError):
    """A batch or one of its files is gone at the API (HTTP 404): the file expired or was
    deleted (OpenAI deletes batch files after 30 days by default), or the batch is unknown to
    this key. The ledger entry is closed as lost and its rows go back to the pool."""


class BatchOwnerError(BatchError):
    """A batch output handed to ``dora batch import`` belongs to another audit or another
    exported file than the one it would land in (its ``custom_id`` s or its answers' model)."""


# ----------------------------------------------------------------------------- message text

#: The most characters of one piece of user input a message repeats (a 100 kB relation name
#: would otherwise come back whole).
MAX_SHOWN = 200


def _escaped(char: str) -> str:
    if "\udc80" <= char <= "\udcff":  # an undecodable byte of an argument (surrogate escape)
        return f"\\x{ord(char) - 0xDC00:02x}"
    return repr(char)[1:-1]


def one_line(text: str) -> str:
    """``text`` with its characters that are not printable escaped (``\\n``, ``\\x1b``, an
    undecodable byte as ``\\xff``): a message built from user input stays one line."""
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def shown(value: object, *, quote: bool = False, limit: int = MAX_SHOWN) -> str:
    """``value`` (a path, a name, an argument) as it may appear inside a one-line message.

    Characters that are not printable (a newline, an escape sequence, a line separator, an
    undecodable byte) are written escaped (``\\n``, ``\\x1b``, ``\\xff``) and the whole is put in
    quotes, so the message stays one line and the reader sees where the value ends; more than
    ``limit`` characters are cut, with ``...``. ``quote=True`` quotes it in any case (where a
    message used ``{value!r}``).
    """
    text = str(value)
    escaped = one_line(text)
    changed = escaped != text
    if len(escaped) > limit:
        escaped = f"{escaped[:limit]}... ({len(text)} characters)"
    return f"'{escaped}'" if quote or changed else escaped


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when the message is empty (a
    library's multi-line error inside a one-line reason)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = [
    "BrokerError",
    "CrowsPairsFormatError",
    "AuditFailedError",
    "BatchError",
    "BatchLostError",
    "BatchOwnerError",
    "AuditIdentityError",
    "CeleryWorkerError",
    "CircuitOpenError",
    "CompletionsUnsupportedError",
    "DagsterStorageError",
    "DiffError",
    "DoraError",
    "FamilyModuleError",
    "InputFileError",
    "LandingLocationError",
    "MAX_SHOWN",
    "ModelNotAvailableError",
    "PlanTooLargeError",
    "PromptLogprobsUnsupportedError",
    "QueryRefusedError",
    "RegistryError",
    "ReportPageSkipped",
    "TargetConfigError",
    "UnknownTargetError",
    "VersionError",
    "WarehouseBusyError",
    "WarehouseCorruptError",
    "WarehouseMissingError",
    "first_line",
    "one_line",
    "shown",
]
