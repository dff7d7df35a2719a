"""ModSCAN asset: land the text-analogue queries (seed 000; docs/families/modscan.md#text-only-use).

``landing/modscan_responses`` is the source of ``dbt_project/models/*/modscan/``
(``stg_modscan_responses`` -> ``fct_modscan_responses`` -> ``agg_modscan_selection`` ->
``agg_modscan_bias_scores``), built by the shared ``@dbt_assets``.

A partitioned run (a registry target: ``dora audit --target``, the sensor, the schedule) runs
the probe when the target's families include ``modscan``: the text analogues on the target's
model with its version pinned to the partition's (only the current version can be generated:
:func:`orchestration.defs.audits.runs.target_of_run` with ``require_current``) and, on an API,
the key of the target's ``api_key_env``; every audit of the run (text, vision, language) tagged
with the target; another family's target skips it.
"""

from collections import Counter

import dagster as dg

from ingestion.landing import landing_dir
from models_inference.backends.image import load_image_backend
from models_inference.backends.text import load_text_backend
from models_inference.backends.vision import load_vision_backend
from models_inference.probes.modscan.faces import read_faces
from models_inference.probes.modscan.language import LanguageProbeConfig, probe_language
from models_inference.probes.modscan.text import TextProbeConfig, plan_text_queries, probe_text_analogues
from models_inference.probes.modscan.vision import VisionProbeConfig, probe_vision
from models_inference.resumable import finish_blocks
from orchestration.defs.audits.runs import family_skip_reason, target_of_run, with_model_version
from orchestration.defs.common import block_outputs, same_config, skipped_metadata
from orchestration.defs.modscan.config import ModscanConfig
from orchestration.instance import MODEL_INFERENCE_POOL

MODSCAN_KEY = dg.AssetKey(["landing", "modscan_responses"])
RESPONSE_OPS = ("modscan_queries", "modscan_text_block", "modscan_finish")


def _skip_reason(context, config: ModscanConfig) -> str | None:
    # a registry partition whose run does not run the family first (its run request turns it off too)
    reason = family_skip_reason(context, "modscan")
    return reason or (None if config.enabled else "not selected by --family")


def text_probe_config(config: ModscanConfig) -> TextProbeConfig:
    """The text analogues' probe config of a run config."""
    return TextProbeConfig(
        probes=config.probes,
        attributes=config.attributes,
        scenarios=config.scenarios,
        conditions=config.conditions,
        prefixes=config.prefixes,
        runs=config.runs,
        instances_per_scenario=config.instances_per_scenario,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        answer_mode=config.answer_mode,
    )


@dg.op(out=dg.DynamicOut(dict), description="Split the text-analogue queries into blocks of --modscan-block-queries.")
def modscan_queries(context: dg.OpExecutionContext, config: ModscanConfig):
    landing_dir("modscan_responses")
    if _skip_reason(context, config) or not config.probes:  # one empty block: the fan-in step reports it
        yield from block_outputs("queries", 0, 1)
        return
    # the plan's length does not depend on the audit id (only the queries' seeds do)
    yield from block_outputs("queries", len(plan_text_queries(text_probe_config(config), "")), config.block_queries)


@dg.op(pool=MODEL_INFERENCE_POOL, description="Generate and land the missing text-analogue queries of one block.")
def modscan_text_block(context: dg.OpExecutionContext, config: ModscanConfig, block: dict) -> dict:
    if block["stop"] == block["start"]:
        return {"generated": 0}
    extra = {"base_url": config.base_url} if config.backend == "openai" and config.base_url else {}
    if config.backend == "transformers":
        extra["batch_size"] = config.batch_size
    run = target_of_run(context, require_current=True)  # a registry partition of a ModSCAN target
    if run is not None and config.backend == "openai":  # the target's model is the text analogues': its key
        extra["api_key_env"] = run.target.api_key_env
    # deferred: the weights load only if a query is missing (a finished audit's re-run loads nothing)
    backend = load_text_backend(config.model, backend=config.backend, defer=True, **extra)
    if run is not None:  # ... and the partition's version
        backend = with_model_version(backend, run.model_version)
    summary = probe_text_analogues(
        backend,
        text_probe_config(config),
        audit_id=config.audit_id,
        progress=config.progress,
        max_error_share=config.max_error_share,
        block=(block["start"], block["stop"]),
        target=run and run.target.name,
    )
    result = summary.result
    context.log.info(
        f"ModSCAN text audit {summary.audit_id}, queries {block['start']}-{block['stop']}: generated {result.generated} of {result.planned}"
    )
    return {
        "audit_id": summary.audit_id,
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "planned": result.planned,
        "already_landed": result.already_landed,
        "generated": result.generated,
        "statuses": dict(result.statuses),
    }


@dg.op(
    pool=MODEL_INFERENCE_POOL,
    out=dg.Out(dg.Nothing),
    description="Once every text block has landed: the audit's finished event, the vision and language "
    "modalities (one step each when named), the asset metadata.",
)
def modscan_finish(context: dg.OpExecutionContext, config: ModscanConfig, blocks: list[dict]):
    reason = _skip_reason(context, config)
    if reason:
        context.log.info(f"dora: ModSCAN skipped: {reason}")
        yield dg.Output(None, metadata=skipped_metadata(reason))
        return
    run = target_of_run(context)
    target = run and run.target.name  # the vision and language audits run the options' models: the target's name only
    metadata = {
        **_text(config, [b for b in blocks if "audit_id" in b]),
        **_vision(context, config, target),
        **_language(config, target),
        "status": "finished",
    }
    yield dg.Output(None, metadata=metadata)


@dg.graph_multi_asset(
    name="modscan_responses",
    group_name="modscan",
    outs={
        "result": dg.AssetOut(
            key=MODSCAN_KEY,
            description="ModSCAN queries (seed 000), one row per query with scenario, instance, attribute, the "
            "shuffled term order or left/right pair, model, version, raw answer, parsed choice and status (N/A "
            "reasons kept apart). Default audit: the text-only analogues modscan_text_persona / modscan_text_faces "
            "(NOT FROM PAPER, docs/families/modscan.md#text-only-use) on the embedded SmolLM2-135M, in blocks of "
            "queries (one step each). Append-only Parquet shards, resumable.",
        )
    },
    config=same_config(ModscanConfig, *RESPONSE_OPS),
)
def modscan_responses():
    return modscan_finish(modscan_queries().map(modscan_text_block).collect())


def _text(config: ModscanConfig, done: list[dict]) -> dict:
    """The text analogues' metadata (docs/families/modscan.md#text-only-use, NOT FROM PAPER) over
    the blocks that ran, after the audit's ``finished`` event once all have landed."""
    if not config.probes:
        return {"text": "skipped: no text analogue selected (--modscan-probes)"}
    if not done:  # nothing planned (an empty selection of scenarios or instances)
        return {"text": "no text-analogue query planned", "rows_generated": 0}
    statuses: Counter = Counter()
    for b in done:
        statuses.update(b["statuses"])
    total = {k: sum(b[k] for b in done) for k in ("planned", "already_landed", "generated")}
    finish_blocks(done[0]["audit_id"], total["generated"])
    ok = statuses.get("ok", 0)
    return {
        "audit_id": done[0]["audit_id"],
        "model_id": done[0]["model_id"],
        "model_version": done[0]["model_version"],
        "probes": ", ".join(config.probes),
        "answer_mode": config.answer_mode,  # requested; each row stores the mode it was answered in
        "blocks": len(done),
        "rows_planned": total["planned"],
        "rows_already_landed": total["already_landed"],
        "rows_generated": total["generated"],
        "answer_rate": dg.MetadataValue.float(round(ok / total["generated"], 4) if total["generated"] else 0.0),
        "status_counts": dg.MetadataValue.json(dict(statuses)),
    }


def _vision(context: dg.OpExecutionContext, config: ModscanConfig, target: str | None = None) -> dict:
    """Run the vision modality when a faces source and a VLM are named; metadata either way."""
    if not (config.faces and config.vision_model):
        return {"vision": "skipped: name a faces folder or manifest (--faces) and a VLM (--modscan-vision-model)"}
    faces = read_faces(config.faces)
    for problem in faces.problems:  # every bad file / row, by name
        context.log.warning(f"dora: ModSCAN faces: {problem.source}: {problem.problem}")
    extra = {"base_url": config.vision_base_url} if config.vision_backend == "openai" and config.vision_base_url else {}
    backend = load_vision_backend(config.vision_model, backend=config.vision_backend, **extra)
    probe = VisionProbeConfig(
        attributes=config.attributes,
        scenarios=config.scenarios,
        prefixes=config.prefixes,
        instances_per_scenario=config.vision_instances_per_scenario,
        per_group=config.pairs_per_group,
        seed=config.pair_seed,
        temperature=config.temperature,
        top_p=config.top_p,
    )
    audit_id, result = probe_vision(backend, faces, probe, progress=config.progress, max_error_share=config.max_error_share, target=target)
    return {
        "vision": f"audit {audit_id}: {result.generated} generated, {result.already_landed} already landed",
        "vision_audit_id": audit_id,
        "faces_kept": len(faces.faces),
        "faces_invalid": len(faces.problems),
        "rows_quarantined": len(faces.problems),  # landed in landing/input_quarantine by the probe
        "faces_filtered": dg.MetadataValue.json(dict(faces.filtered)),
        "vision_status_counts": dg.MetadataValue.json(dict(result.statuses)),
    }


def _language(config: ModscanConfig, target: str | None = None) -> dict:
    """Run the language modality when a T2I model and a VLM are named; metadata either way."""
    if not (config.t2i_model and config.vision_model):
        return {"language": "skipped: name a T2I model (--modscan-t2i-model) and a VLM (--modscan-vision-model)"}
    # validated first: counts that plan too many queries fail here, before either model loads
    probe = LanguageProbeConfig(
        attributes=config.attributes,
        prefixes=config.prefixes,
        instances_per_scenario=config.vision_instances_per_scenario,
        images_per_trait=config.images_per_trait,
        person_check=config.person_check,
        temperature=config.temperature,
        top_p=config.top_p,
    ).validate()
    extra = {"base_url": config.t2i_base_url} if config.t2i_backend == "openai" and config.t2i_base_url else {}
    images = load_image_backend(config.t2i_model, backend=config.t2i_backend, **extra)
    extra = {"base_url": config.vision_base_url} if config.vision_backend == "openai" and config.vision_base_url else {}
    vision = load_vision_backend(config.vision_model, backend=config.vision_backend, **extra)
    audit_id, result, counts = probe_language(images, vision, probe, progress=config.progress, max_error_share=config.max_error_share, target=target)
    return {
        "language": f"audit {audit_id}: {result.generated} generated, {result.already_landed} already landed",
        "language_audit_id": audit_id,
        "scene_images": dg.MetadataValue.json(counts),
        "language_status_counts": dg.MetadataValue.json(dict(result.statuses)),
    }


modscan_assets = [modscan_responses]
