"""T2T probe asset: generate word completions and land them (docs/method.md#2-probes)."""

from types import SimpleNamespace

import dagster as dg

from ingestion.biasdora.templates import curated_t2t_templates, render_t2t_templates
from ingestion.landing import read_landing
from models_inference.backends.text import load_text_backend
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, probe_t2t, select_templates  # noqa: F401
from models_inference.resumable import ResumableSummary, finish_blocks
from orchestration.defs.audits.partitions import audit_partitions
from orchestration.defs.audits.runs import probe_metadata, with_model_version
from orchestration.defs.biasdora.config import AuditConfig
from orchestration.defs.biasdora.target import resolve_audit_run
from orchestration.defs.common import batch_options, block_outputs, same_config, skipped_metadata
from orchestration.instance import MODEL_INFERENCE_POOL


def build_templates(config: AuditConfig) -> list[T2TTemplate]:
    """The (setting, descriptor) prefixes an audit probes, from its descriptor source."""
    if config.descriptor_source == "biasdora":
        templates = curated_t2t_templates()
    elif config.descriptor_source == "crows_pairs":
        table = read_landing("descriptors", filters={"source": "crows_pairs"}, order_by=["bias_dimension", "descriptor"])
        templates = render_t2t_templates(table)
    else:
        raise ValueError(f"descriptor_source must be 'biasdora' or 'crows_pairs', got {config.descriptor_source!r}")
    return select_templates(templates, settings=config.settings, descriptors=config.descriptors, per_dimension=config.per_dimension)


T2T_OPS = ("t2t_blocks", "t2t_block", "t2t_finish")


def _probe_setup(context, config: AuditConfig):
    """The audit run, its templates (every one: the audit id covers them all), the backend
    (deferred: the weights load only if a row is missing, so a finished audit's re-run loads
    nothing) and the probe config."""
    run = resolve_audit_run(context, config)
    templates, backend, probe = probe_parts(run.config, run.model_version, run.backend_kwargs)
    return run, templates, backend, probe


def probe_parts(config: AuditConfig, model_version: str | None = None, backend_kwargs: dict | None = None):
    """The templates, the (deferred) backend and the probe config of a resolved T2T config; the
    backend reports ``model_version`` when given (a registry partition's). Also what
    ``dora batch import`` and the dry run's batch pricing rebuild a T2T step from
    (``orchestration/cli/batch.py``)."""
    templates = build_templates(config)
    extra = {"base_url": config.base_url} if config.backend == "openai" and config.base_url else {}
    if config.backend == "openai":
        extra.update(timeout=config.api_timeout, concurrency=config.api_concurrency, max_retries=config.api_max_retries)
    if config.backend == "transformers":
        extra["batch_size"] = config.batch_size
    backend = load_text_backend(config.model, backend=config.backend, defer=True, **{**extra, **(backend_kwargs or {})})
    if model_version:
        backend = with_model_version(backend, model_version)
    probe = T2TProbeConfig(
        runs=config.runs,
        letters=config.letters,
        prompt_style=config.prompt_style,
        temperature=config.temperature,
        top_p=config.top_p,
        shard_rows=config.t2t_shard_rows,
    )
    return templates, backend, probe


@dg.op(
    ins={"descriptors": dg.In(dg.Nothing)},
    out=dg.DynamicOut(dict),
    description="Split the audit's descriptor x setting templates into blocks of --t2t-block-templates.",
)
def t2t_blocks(context: dg.OpExecutionContext, config: AuditConfig):
    # a partition <target>@<version> audits that registry target (its settings in the run config)
    run = resolve_audit_run(context, config)
    if run.skip:  # one empty block: the fan-in step reports the skip
        yield from block_outputs("templates", 0, 1)
        return
    templates = len(build_templates(run.config))
    # batch mode: one step holds the audit's batches (its ledger), as the model runs at the API
    batched = config.api_batch and run.config.backend == "openai"
    yield from block_outputs("templates", templates, max(1, templates) if batched else config.t2t_block_templates)


@dg.op(pool=MODEL_INFERENCE_POOL, description="Generate and land the missing completions of one block of templates.")
def t2t_block(context: dg.OpExecutionContext, config: AuditConfig, block: dict) -> dict:
    if block["stop"] == block["start"]:
        return {"generated": 0}
    run, templates, backend, probe = _probe_setup(context, config)
    batch = (
        batch_options(config, "t2t", record_config=run.config, model_version=backend.model_version, target=run.target)
        if run.config.backend == "openai"
        else None
    )
    summary = probe_t2t(
        templates,
        backend,
        probe,
        audit_id=run.config.audit_id,
        progress=config.progress,
        target=run.target,
        max_error_share=config.max_error_share,
        block=(block["start"], block["stop"]),
        batch=batch,
    )
    pending = getattr(summary, "pending", 0)
    context.log.info(
        f"audit {summary.audit_id}, templates {block['start']}-{block['stop']}: generated "
        f"{summary.generated} of {summary.planned} rows" + (f"; {pending} requests in open batches" if pending else "")
    )
    return {
        "audit_id": summary.audit_id,
        "planned": summary.planned,
        "already_landed": summary.already_landed,
        "generated": summary.generated,
        "statuses": dict(summary.statuses),
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "descriptors": len({t.descriptor for t in templates}),
        "pending": pending,
    }


@dg.op(out={"t2t_completions": dg.Out(dg.Nothing)}, description="Once every block has landed: the audit's finished event and the asset metadata.")
def t2t_finish(context: dg.OpExecutionContext, config: AuditConfig, blocks: list[dict]):
    done = [b for b in blocks if "audit_id" in b]
    if not done:
        run = resolve_audit_run(context, config)
        if run.skip:
            context.log.warning(f"dora: the T2T probe has nothing to generate: {run.skip}")
        reason = run.skip or "no descriptor x setting template selected"
        yield dg.Output(None, "t2t_completions", metadata=skipped_metadata(reason, target=run.target, modality=run.modality))
        return
    first = done[0]
    summary = ResumableSummary(first["audit_id"])
    for b in done:
        summary.planned += b["planned"]
        summary.already_landed += b["already_landed"]
        summary.generated += b["generated"]
        summary.statuses.update(b["statuses"])
    pending = sum(b.get("pending", 0) for b in done)
    if not pending:  # (batch mode) an audit with open batches is not finished
        finish_blocks(summary.audit_id, summary.generated)
    target = resolve_audit_run(context, config).target
    model = SimpleNamespace(model_id=first["model_id"], model_version=first["model_version"])
    meta = probe_metadata(
        summary,
        model,
        target,
        "parse_status",
        descriptors=first["descriptors"],
        blocks=len(done),
        parse_rate=dg.MetadataValue.float(round(summary.parse_rate, 4)),
        **({"batch_pending": pending} if pending else {}),
    )
    context.log.info(f"audit {summary.audit_id}: generated {summary.generated} of {summary.planned} rows in {len(done)} block(s)")
    yield dg.Output(None, "t2t_completions", metadata=meta)


@dg.graph_multi_asset(
    group_name="biasdora",
    name="t2t_completions",
    outs={
        "t2t_completions": dg.AssetOut(
            key=["landing", "t2t_completions"],
            description="T2T word completions (BiasDora Section 2.1): one row per (audit, model, version, setting, "
            "descriptor, letter, run) with the raw output, the parsed word and its parse status. Partitioned by "
            "the audited model version: `<target>@<version>` for a registry target, `adhoc:<model>@<version>` for "
            "`dora audit`. Generated in blocks of templates (one step each).",
        ),
    },
    ins={"descriptors": dg.AssetIn(key=["landing", "descriptors"], dagster_type=dg.Nothing)},
    partitions_def=audit_partitions,
    config=same_config(AuditConfig, *T2T_OPS),
)
def t2t_completions(descriptors):
    blocks = t2t_blocks(descriptors).map(t2t_block).collect()
    return t2t_finish(blocks)


t2t_assets = [t2t_completions]
