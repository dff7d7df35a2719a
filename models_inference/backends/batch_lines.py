"""The shape of a batch output file's lines and of the ``custom_id`` s dora writes, checked with
pydantic models instead of hand checks (:mod:`models_inference.backends.batch_api` reads
downloaded outputs with them, ``dora batch import`` a runner's output file).

One output line (the OpenAI Batch API's format, which vLLM's ``run-batch`` writes too) is
``{"id", "custom_id": str, "response": {"status_code": int, "request_id", "body"} | null,
"error": {...} | str | null}`` (:class:`OutputLine`). A line of any other shape (a
``custom_id`` that is a list, a number or null; a ``response`` that is a string; a line cut
short by a runner killed mid-write) is not fatal: :func:`read_output` returns it as a
:class:`BadLine` with its 1-based line number and reason, to be quarantined, and every good
line lands. Lines are split on ``\\n`` only: U+2028, U+0085 and the other characters that
``str.splitlines`` breaks on are legal inside JSON strings, and a model may answer with them.

Every line of a file dora writes carries its ledger and its file in its ``custom_id``
(:func:`entry_custom_id`: ``<ledger tag>-<entry id>-<line>``, 34 characters at most, under the
64 some OpenAI-compatible batch hosts allow), so an output names the one audit and the one
file it answers, and the row's resume key is read back from the ledger
(``entry.keys[line]``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError, model_validator

#: Characters of a bad line kept with its reason.
MAX_RAW = 2000


class LineError(BaseModel):
    """A line's ``error`` object: OpenAI's ``{"code", "message"}``, vLLM's older flat
    ``{"object": "error", "message", "type", "code"}`` or its nested ``{"error": {...}}``."""

    model_config = ConfigDict(extra="allow")

    code: Union[StrictStr, StrictInt, None] = None
    message: Optional[StrictStr] = None
    type: Optional[StrictStr] = None
    error: Optional["LineError"] = None

    def innermost(self) -> "LineError":
        """The deepest nested error object (where vLLM keeps the message)."""
        err = self
        while err.error is not None and err.message is None:
            err = err.error
        return err


class LineResponse(BaseModel):
    """A line's ``response``: the HTTP status of the request and the reply's JSON ``body``
    (vLLM writes ``body: null`` beside an ``error`` object)."""

    model_config = ConfigDict(extra="allow")

    status_code: StrictInt
    request_id: Optional[StrictStr] = None
    body: Any = None


class OutputLine(BaseModel):
    """One line of a batch output or error file (see the module docstring).

    Raises (``model_validate``):
        pydantic.ValidationError: a ``custom_id`` that is not a string, a ``response`` that is
            not an object with an integer ``status_code``, neither ``response`` nor ``error``.
    """

    model_config = ConfigDict(extra="allow")

    custom_id: StrictStr
    id: Optional[StrictStr] = None
    response: Optional[LineResponse] = None
    error: Union[LineError, StrictStr, None] = None

    @model_validator(mode="after")
    def _answers_something(self):
        if isinstance(self.error, LineError) and not self.error.model_dump(exclude_none=True):
            self.error = None  # an empty error object beside a response: no error
        if self.response is None and self.error is None:
            raise ValueError("neither a response nor an error")
        return self

    def error_code(self) -> str | int | None:
        """The code of the line's error object (innermost), else ``None``."""
        return self.error.innermost().code if isinstance(self.error, LineError) else None

    def error_text(self) -> str | None:
        """The line's error as ``<code>: <message>`` (a nested object's innermost message;
        parts that are missing left out), else ``None``."""
        if self.error is None:
            return None
        if isinstance(self.error, str):
            return self.error
        err = self.error.innermost()
        parts = [str(p) for p in (err.code if err.code is not None else err.type, err.message) if p is not None]
        return ": ".join(parts) or json.dumps(self.error.model_dump(exclude_none=True))[:300]

    def model(self) -> str | None:
        """The model named by the reply's body (``response.body.model``), else ``None``."""
        body = self.response.body if self.response is not None else None
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) else None


@dataclass(frozen=True)
class BadLine:
    """A line of an output file that is not an :class:`OutputLine`: its 1-based number, why
    (one line) and its text (at most :data:`MAX_RAW` characters)."""

    line: int
    reason: str
    raw: str


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "line"
    return f"{where}: {first.get('msg', 'invalid')}"


def read_output(text: str) -> tuple[list[tuple[int, OutputLine]], list[BadLine]]:
    """The lines of a batch output file's text, split on ``\\n`` only (blank lines skipped).

    Returns:
        ``(good, bad)``: ``(line number, OutputLine)`` of each line of the expected shape, and a
        :class:`BadLine` for each other one (not JSON, e.g. cut short; not an object; a field of
        the wrong type), numbers 1-based.
    """
    good, bad = [], []
    for n, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            bad.append(BadLine(n, f"not JSON ({exc})", raw[:MAX_RAW]))
            continue
        if not isinstance(value, dict):
            bad.append(BadLine(n, f"a JSON {type(value).__name__}, not an object", raw[:MAX_RAW]))
            continue
        try:
            good.append((n, OutputLine.model_validate(value)))
        except ValidationError as exc:
            bad.append(BadLine(n, _reason(exc), raw[:MAX_RAW]))
    return good, bad


# ----------------------------------------------------------------------------- custom ids

_ENTRY_CID = re.compile(r"^([0-9a-f]{8})-(b[0-9a-f]{16})-(\d{1,7})$")
#: The longest custom id :func:`entry_custom_id` writes (a file holds at most 50,000 lines).
MAX_CUSTOM_ID = 8 + 1 + 17 + 1 + 7


def ledger_tag(name: str) -> str:
    """The 8 hex characters that stand for ledger ``name`` in a custom id (sha256 prefix)."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]


def entry_custom_id(tag: str, entry_id: str, line: int) -> str:
    """The ``custom_id`` of line ``line`` (0-based) of file ``entry_id`` of the ledger tagged ``tag``."""
    return f"{tag}-{entry_id}-{line}"


def parse_custom_id(cid: str) -> tuple[str, str, int] | None:
    """``(ledger tag, entry id, line)`` of a custom id :func:`entry_custom_id` wrote, else
    ``None`` (a file written before ids carried their file: the row's resume key as JSON)."""
    found = _ENTRY_CID.match(cid)
    return (found.group(1), found.group(2), int(found.group(3))) if found else None


__all__ = [
    "MAX_CUSTOM_ID",
    "MAX_RAW",
    "BadLine",
    "LineError",
    "LineResponse",
    "OutputLine",
    "entry_custom_id",
    "ledger_tag",
    "parse_custom_id",
    "read_output",
]
