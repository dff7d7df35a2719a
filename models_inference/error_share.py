"""Failing audits fail loudly: the share of a run's calls that may fail, and the one-line message.

Every loop that lands model calls (:func:`models_inference.resumable.land_resumable`, the judge,
the counterfactual stereotype filter, the Batch API runs) counts its landed rows in an
:class:`ErrorShare` and stops with :class:`~ingestion.errors.AuditFailedError` past
``--max-error-share`` (docs/operations.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ingestion.errors import AuditFailedError

#: Default share of a run's calls that may fail before the audit ends ``failed``.
DEFAULT_MAX_ERROR_SHARE = 0.1


def failure_message(errors: Counter, total: int, untried: int = 0, *, step: str | None = None, max_error_share: float | None = None) -> str:
    """``"<step>: 412 of 468 calls failed (88% > --max-error-share 0.1): <most common error>. ..."``
    (one line): the step, the count and share, the cause (redacted of key-shaped tokens,
    :func:`models_inference.backends.openai_api.redact`), and that the next Dagster run retries the
    failed rows. ``untried``: rows not tried because a whole batch failed."""
    from models_inference.backends.openai_api import redact

    n = sum(errors.values())
    cause = errors.most_common(1)[0][0] if errors else "unknown error"
    cause = redact(" ".join(str(cause).split()))[:300]
    if untried:
        why = f"every call of a batch failed; stopped with {untried} more rows not tried"
    elif max_error_share is not None and total:
        why = f"{n / total:.0%} > --max-error-share {max_error_share:g}"
    else:
        why = f"{n / total:.0%}" if total else ""
    head = f"{step}: " if step else ""
    return (
        f"{head}{n} of {total} calls failed ({why}): {cause}. The failed rows landed as 'error' and the next "
        "Dagster run retries them: fix the cause, then re-run the same command"
    )


@dataclass
class ErrorShare:
    """The failed calls of one run of a step, against ``--max-error-share``.

    Every loop that lands model calls (:func:`land_resumable`, the judge, the counterfactual
    stereotype filter) counts its landed rows here, shard by shard, after landing them (so
    nothing is lost), and raises :class:`~ingestion.errors.AuditFailedError` when more than
    ``max_error_share`` of the rows of this run failed, or when every row of a shard of 8 or
    more failed (the rest would too; not with a limit of 1). ``max_error_share=None`` or ``1``
    never raises.

    Attributes:
        step: the step's name in the message (``"counterfactual text sets"``, ``"judge"``...).
        max_error_share: the limit, a share in [0, 1]; ``None``: no limit.
        total: rows counted so far. errors: their error texts, counted.
    """

    step: str
    max_error_share: float | None
    total: int = 0
    errors: Counter = field(default_factory=Counter)

    def add(
        self, rows: Sequence[Mapping], status_column: str, error_column: str | None = None, error_status: str = "error", *, untried: int = 0
    ) -> None:
        """Count a landed shard's rows (those with ``status_column == error_status`` failed;
        their text is ``error_column``); raise at once if every row of a shard of 8+ failed
        (``untried``: rows of the run left after this shard, named in the message).

        Raises:
            AuditFailedError: the whole shard failed and a limit is set.
        """
        failed = [r for r in rows if r[status_column] == error_status]
        self.total += len(rows)
        self.errors.update(str((r.get(error_column) if error_column else None) or error_status) for r in failed)
        if self.max_error_share is not None and self.max_error_share < 1 and len(rows) >= 8 and len(failed) == len(rows):
            self._raise(untried=untried)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def check(self) -> None:
        """Raise when more than ``max_error_share`` of the counted rows failed.

        Raises:
            AuditFailedError: the share is above the limit (names step, share and cause).
        """
        if self.max_error_share is not None and self.total and self.failed / self.total > self.max_error_share:
            self._raise()

    def _raise(self, untried: int = 0):
        raise AuditFailedError(failure_message(self.errors, self.total, untried, step=self.step, max_error_share=self.max_error_share))
