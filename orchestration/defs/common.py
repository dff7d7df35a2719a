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
