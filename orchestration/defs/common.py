"""Config fields every probe family shares (Dagster ``Config``), in a module of no family.

Every family's model-calling Config inherits :class:`ErrorShareLimit`. The common
``dora audit`` flags (``--max-error-share``, ``--no-progress``) take their default and help
from :class:`CommonFlags` and set the field of that name on every op config that has it
(``orchestration/cli/flags.py``), whatever the family.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from models_inference.resumable import DEFAULT_MAX_ERROR_SHARE


class ErrorShareLimit(dg.Config):
    """The failed-call share above which a model-calling step fails (the probes of every
    family, the judge); default :data:`models_inference.resumable.DEFAULT_MAX_ERROR_SHARE`."""

    max_error_share: float = Field(
        DEFAULT_MAX_ERROR_SHARE, ge=0.0, le=1.0,
        description="a step that calls models (every family's generation step, the judge) ends failed, and the audit "
        "with it, when more than this share of its calls failed ('error' rows; they land and the next run retries them)",
    )


class CommonFlags(ErrorShareLimit):
    """The source of the common flags' defaults and help (no op reads this class)."""

    progress: bool = Field(True, description="show the progress bars")


def skipped_result(reason: str, *, asset_key=None, rows_key: str = "rows_generated", **extra) -> dg.MaterializeResult:
    """The materialisation of a probe asset that did not run (no model configured, another
    family selected, a registry target of another modality): dora's one convention for it.

    Dagster has no "skipped" state for an asset a run selected: an asset that emits no output
    makes Dagster skip every step downstream of it, and the dbt build of every family is one
    step downstream of each probe. So a skipped probe still materialises, with metadata that
    says so first: ``status = "skipped"``, ``skipped = True``, ``reason`` (one sentence, also
    logged by the caller), ``<rows_key> = 0`` and ``extra`` (``how_to_enable``, ``target``, ...).

    Args:
        reason: why the probe did not run.
        asset_key: for a multi-asset step that yields several keys.
        rows_key: the row-count name of the asset (``rows_scored``, ``answers``); ``None`` for none.

    Returns:
        A ``MaterializeResult`` to return or yield.
    """
    metadata = {"status": "skipped", "skipped": True, "reason": reason, **({rows_key: 0} if rows_key else {}), **extra}
    return dg.MaterializeResult(asset_key=asset_key, metadata=metadata)
