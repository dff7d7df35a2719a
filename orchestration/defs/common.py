"""Config fields every probe family shares (Dagster ``Config``), in a module of no family.

Every family's model-calling Config inherits :class:`ErrorShareLimit`. The common
``dora audit`` flags (``--max-error-share``, ``--no-progress``) take their default and help
from :class:`CommonFlags` and set the field of that name on every op config that has it
(``orchestration/cli/flags.py``), whatever the family.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE


class ErrorShareLimit(dg.Config):
    """The failed-call share above which a model-calling step fails (the probes of every
    family, the judge); default :data:`models_inference.error_share.DEFAULT_MAX_ERROR_SHARE`."""

    max_error_share: float = Field(
        DEFAULT_MAX_ERROR_SHARE,
        ge=0.0,
        le=1.0,
        description="a step that calls models (every family's generation step, the judge) ends failed, and the audit "
        "with it, when more than this share of its calls failed ('error' rows; they land and the next Dagster run of the audit retries them)",
    )


class BatchApiOptions(dg.Config):
    """How the steps that call an OpenAI-compatible API in volume (BiasDora T2T, the judge, the
    counterfactual text sets) send their requests: one request per row, or the OpenAI Batch API
    (:mod:`models_inference.backends.batch_api`; docs/operations.md#batch-apis)."""

    api_batch: bool = Field(
        False,
        description="send the API requests of every step that can run in batch mode (backend openai; each family's "
        "batch steps, listed by --dry-run) through the OpenAI Batch API: JSONL files of requests, half price, a separate "
        "rate-limit pool; the same rows and audit id as one request per row",
    )
    api_batch_max_requests: int = Field(
        50_000, ge=1, le=50_000, description="requests per batch file (the Batch API takes at most 50,000 and 200 MB)"
    )
    api_batch_wait: bool = Field(
        False,
        description="with --api-batch: wait until every batch has landed, showing the request counts (otherwise "
        "submit, land the batches that have finished, and return: run the same command again later)",
    )
    api_batch_poll: float = Field(60.0, gt=0, le=3600, description="seconds between two polls of the open batches (--api-batch-wait)")
    api_batch_retries: int = Field(
        3,
        ge=0,
        le=20,
        description="times one Dagster run puts a request that failed or expired into a new batch (the next Dagster run retries the rest)",
    )
    api_batch_max_open: int = Field(
        0,
        ge=0,
        le=1000,
        description="with --api-batch: at most this many batches of the model open at once at the endpoint (every audit "
        "counted; the other files wait their turn, so the model's enqueued-token limit is not hit); 0: no bound",
    )


def batch_options(config, step: str, *, record_config=None, **record):
    """The :class:`~models_inference.backends.batch_requests.BatchOptions` of an op whose Config has
    :class:`BatchApiOptions` and ``--api-batch`` on, else ``None`` (one request per row). The
    ledger records ``step``, the step's config (``record_config``, default ``config``: a
    registry partition passes the resolved one) and ``record`` (model version, target...), so
    ``dora batch import`` rebuilds the step's rows without the original command."""
    if not getattr(config, "api_batch", False):
        return None
    from models_inference.backends.batch_requests import BatchOptions

    return BatchOptions(
        max_requests=config.api_batch_max_requests,
        wait=config.api_batch_wait,
        poll_seconds=config.api_batch_poll,
        retries=config.api_batch_retries,
        max_open=getattr(config, "api_batch_max_open", 0) or None,
        record={"step": step, "config": (record_config or config).model_dump(mode="json"), **record},
    )


class CommonFlags(ErrorShareLimit, BatchApiOptions):
    """The source of the common flags' defaults and help (no op reads this class)."""

    progress: bool = Field(True, description="show the progress bars")


# --- work that can be spread: a probe step as blocks of its keys (mapped Dagster steps) -----
#: Mapping keys of the block steps are ``<what>_<start>_<stop>`` (Dagster allows [A-Za-z0-9_]).
def block_outputs(what: str, units: int, block_size: int, output_name: str = "result", **extra):
    """One ``dagster.DynamicOutput`` per block of ``units`` planned units (T2T templates,
    counterfactual sets...) of at most ``block_size``
    (:func:`models_inference.resumable.block_bounds`): value ``{"start", "stop"}``, mapping key
    ``<what>_<start>_<stop>`` (``extra``: more keys of every block's value). Each becomes one step of the family's graph-backed asset: the
    steps run apart (another process, a Celery worker on another machine), and one that fails
    is re-executed alone (its landed shards are kept; nothing lands twice)."""
    from models_inference.resumable import block_bounds

    for start, stop in block_bounds(units, block_size):
        yield dg.DynamicOutput({"start": start, "stop": stop, **extra}, mapping_key=f"{what}_{start}_{stop}", output_name=output_name)


def same_config(config_class: type[dg.Config], *ops: str) -> dg.ConfigMapping:
    """The config of a graph-backed asset (schema: ``config_class``) passed as is to each of
    its ``ops``, so the run config keeps the shape of a single-op asset (``ops: {<asset>:
    {config: {...}}}``) and the CLI's flags, the sensor and the schedule do not know the asset
    is a graph."""

    def config_fn(config):
        return {op: {"config": config} for op in ops}

    # Dagster reads the schema from the annotation (a Config class), as on an op
    config_fn.__annotations__ = {"config": config_class}
    return dg.ConfigMapping(config_fn=config_fn)


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
    return dg.MaterializeResult(asset_key=asset_key, metadata=skipped_metadata(reason, rows_key=rows_key, **extra))


def skipped_metadata(reason: str, *, rows_key: str | None = "rows_generated", **extra) -> dict:
    """The metadata of :func:`skipped_result`, for a graph-backed asset whose last op yields
    ``dagster.Output(None, ..., metadata=...)`` (the blocked probes)."""
    return {"status": "skipped", "skipped": True, "reason": reason, **({rows_key: 0} if rows_key else {}), **extra}
