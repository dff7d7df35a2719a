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
from orchestration.defs.common import skipped_result
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
            group_name="biasdora",
            description="T2T word completions (BiasDora Section 2.1): one row per (audit, model, version, setting, "
            "descriptor, letter, run) with the raw output, the parsed word and its parse status. Partitioned by "
            "the audited model version: `<target>@<version>` for a registry target, `adhoc:<model>@<version>` for "
            "`dora audit`.",
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
        reason = (f"partition {run.target}@{run.model_version} audits a {run.modality} target of family {run.family}: "
                  "no text model to probe")
        yield skipped_result(reason, asset_key=["landing", "t2t_completions"], target=run.target, modality=run.modality)
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


t2t_assets = [t2t_completions]
