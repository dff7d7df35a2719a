"""T2T probe asset: generate word completions and land them (docs/method.md#2-probes)."""


import dagster as dg

from ingestion.landing import read_landing
from ingestion.templates import curated_t2t_templates, render_t2t_templates
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTarget, run_t2t_probe, select_targets  # noqa: F401
from models_inference.backends.text import load_text_backend
from orchestration.defs.audits.partitions import audit_partitions
from orchestration.defs.audits.runs import probe_metadata, resolve_audit_run, with_model_version
from orchestration.defs.biasdora.config import AuditConfig
from orchestration.defs.biasdora.ingestion.assets import descriptors
from orchestration.instance import MODEL_INFERENCE_POOL


def build_targets(config: AuditConfig) -> list[T2TTarget]:
    """The (setting, descriptor) prefixes an audit probes, from its descriptor source."""
    if config.descriptor_source == "biasdora":
        templates = curated_t2t_templates()
    elif config.descriptor_source == "crows_pairs":
        table = read_landing("descriptors", filters={"source": "crows_pairs"}, order_by=["bias_dimension", "descriptor"])
        templates = render_t2t_templates(table)
    else:
        raise ValueError(f"descriptor_source must be 'biasdora' or 'crows_pairs', got {config.descriptor_source!r}")
    return select_targets(
        templates, settings=config.settings, descriptors=config.descriptors, per_dimension=config.per_dimension
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            ["landing", "t2t_completions"],
            deps=[descriptors],
            group_name="biasdora", tags={"dora/layer": "probes"},
            description="T2T word completions: one row per (audit, model, version, setting, descriptor, "
            "letter, run) with raw output, parsed word and parse status. Append-only Parquet shards. "
            "Partitioned by registry target and model version (keys `target@version`); audit runs "
            "without a partition are ad hoc.",
        ),
        dg.AssetSpec(
            ["landing", "audits"],
            deps=[descriptors],
            group_name="biasdora", tags={"dora/layer": "probes"},
            description="Audit events (started / finished / failed) with model version and config hash.",
        ),
    ],
    pool=MODEL_INFERENCE_POOL,
    partitions_def=audit_partitions,
)
def t2t_completions(context: dg.AssetExecutionContext, config: AuditConfig):
    # a partition <target>@<version> audits that registry target (settings from the registry)
    run = resolve_audit_run(context, config)
    config = run.config
    if run.modality != "t2t" or run.family != "biasdora":
        context.log.warning(f"target {run.target!r} is {run.modality} of family {run.family}: the T2T probe has nothing to generate")
        skipped = {"target": run.target, "modality": run.modality, "rows_generated": 0}
        yield dg.MaterializeResult(asset_key=["landing", "t2t_completions"], metadata=skipped)
        yield dg.MaterializeResult(asset_key=["landing", "audits"], metadata=skipped)
        return
    targets = build_targets(config)
    extra = {"base_url": config.base_url} if config.backend == "openai" and config.base_url else {}
    if config.backend == "openai":
        extra.update(timeout=config.api_timeout, concurrency=config.api_concurrency, max_retries=config.api_max_retries)
    if config.backend == "transformers":
        extra["batch_size"] = config.batch_size
    # deferred: the weights load only if a row is missing (a finished audit's re-run loads nothing)
    backend = load_text_backend(config.model, backend=config.backend, defer=True, **{**extra, **run.backend_kwargs})
    if run.model_version:
        backend = with_model_version(backend, run.model_version)
    probe = T2TProbeConfig(
        runs=config.runs, letters=config.letters, prompt_style=config.prompt_style,
        temperature=config.temperature, top_p=config.top_p,
    )
    summary = run_t2t_probe(
        targets, backend, probe, audit_id=config.audit_id, progress=config.progress, target=run.target,
        max_error_share=config.max_error_share,
    )
    meta = probe_metadata(
        summary, backend, run.target, "parse_status",
        descriptors=len({t.descriptor for t in targets}), parse_rate=dg.MetadataValue.float(round(summary.parse_rate, 4)),
    )
    context.log.info(f"audit {summary.audit_id}: generated {summary.generated} of {summary.planned} rows")
    yield dg.MaterializeResult(asset_key=["landing", "t2t_completions"], metadata=meta)
    yield dg.MaterializeResult(
        asset_key=["landing", "audits"],
        metadata={"audit_id": summary.audit_id, "target": run.target or "(ad hoc)", "status": "finished"},
    )


t2t_assets = [t2t_completions]
