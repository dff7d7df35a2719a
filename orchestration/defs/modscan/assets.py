"""ModSCAN asset: land the text-analogue queries (seed 000; docs/families/modscan.md#text-only-use).

``landing/modscan_responses`` is the source of ``dbt_project/models/modscan/``
(``stg_modscan_responses`` -> ``fct_modscan_responses`` -> ``agg_modscan_selection`` ->
``agg_modscan_bias_scores``), built by the shared ``@dbt_assets``.
"""

import dagster as dg

from models_inference.backends.image import load_image_backend
from models_inference.backends.text import load_text_backend
from models_inference.backends.vision import load_vision_backend
from models_inference.probes.modscan.faces import read_faces
from models_inference.probes.modscan.language import LanguageProbeConfig, run_language_probe
from models_inference.probes.modscan.text import TextProbeConfig, run_text_probe
from models_inference.probes.modscan.vision import VisionProbeConfig, run_vision_probe
from orchestration.defs.common import skipped_result
from orchestration.defs.audits.runs import target_of_run
from orchestration.defs.modscan.config import ModscanConfig

MODSCAN_KEY = dg.AssetKey(["landing", "modscan_responses"])


# multi_asset with one spec: the op name is plain ("modscan_responses"), so run config reads
# {"ops": {"modscan_responses": {"config": ...}}} like the other probes'.
@dg.multi_asset(
    name="modscan_responses",
    specs=[
        dg.AssetSpec(
            MODSCAN_KEY,
            group_name="modscan",
            description="ModSCAN queries (seed 000), one row per query with scenario, instance, attribute, the "
            "shuffled term order or left/right pair, model, version, raw answer, parsed choice and status (N/A "
            "reasons kept apart). Default audit: the text-only analogues modscan_text_persona / modscan_text_faces "
            "(NOT FROM PAPER, docs/families/modscan.md#text-only-use) on the embedded SmolLM2-135M. Append-only Parquet shards, resumable.",
        )
    ],
    pool="model_inference",
)
def modscan_responses(context: dg.AssetExecutionContext, config: ModscanConfig) -> dg.MaterializeResult:
    if not config.enabled:
        reason = "not selected by --probe"
        context.log.info(f"dora: ModSCAN skipped: {reason}")
        return skipped_result(reason)
    run = target_of_run(context)
    if run is not None and run.target.family != "modscan":  # a partition of another family's target
        reason = f"partition {run.partition_key} audits registry target {run.target.name!r} of family {run.target.family!r}"
        context.log.info(f"dora: ModSCAN skipped: {reason}")
        return skipped_result(reason)
    text = _text(config) if config.probes else {"text": "skipped: no text analogue selected (--modscan-probes)"}
    metadata = {**text, **_vision(context, config), **_language(config), "status": "finished"}
    return dg.MaterializeResult(metadata=metadata)


def text_probe_config(config: ModscanConfig) -> TextProbeConfig:
    """The text analogues' probe config of a run config."""
    return TextProbeConfig(
        probes=config.probes, attributes=config.attributes, scenarios=config.scenarios, conditions=config.conditions,
        prefixes=config.prefixes, samples=config.samples, instances_per_scenario=config.instances_per_scenario,
        max_new_tokens=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
    )


def _text(config: ModscanConfig) -> dict:
    """Run the text-only analogues (docs/families/modscan.md#text-only-use, NOT FROM PAPER) on the configured text model."""
    extra = {"base_url": config.base_url} if config.backend == "openai" and config.base_url else {}
    if config.backend == "transformers":
        extra["batch_size"] = config.batch_size
    # deferred: the weights load only if a query is missing (a finished audit's re-run loads nothing)
    backend = load_text_backend(config.model, backend=config.backend, defer=True, **extra)
    probe = text_probe_config(config)
    summary = run_text_probe(backend, probe, audit_id=config.audit_id, progress=config.progress,
                             max_error_share=config.max_error_share)
    result = summary.result
    ok = result.statuses.get("ok", 0)
    return {
        "audit_id": summary.audit_id,
        "model_id": backend.model_id,
        "model_version": backend.model_version,
        "probes": ", ".join(config.probes),
        "rows_planned": result.planned,
        "rows_already_landed": result.already_landed,
        "rows_generated": result.generated,
        "answer_rate": dg.MetadataValue.float(round(ok / result.generated, 4) if result.generated else 0.0),
        "status_counts": dg.MetadataValue.json(dict(result.statuses)),
    }


def _vision(context: dg.AssetExecutionContext, config: ModscanConfig) -> dict:
    """Run the vision modality when a faces source and a VLM are named; metadata either way."""
    if not (config.faces and config.vision_model):
        return {"vision": "skipped: name a faces folder or manifest (--faces) and a VLM (--modscan-vision-model)"}
    faces = read_faces(config.faces)
    for problem in faces.problems:  # every bad file / row, by name
        context.log.warning(f"dora: ModSCAN faces: {problem.source}: {problem.problem}")
    extra = {"base_url": config.vision_base_url} if config.vision_backend == "openai" and config.vision_base_url else {}
    backend = load_vision_backend(config.vision_model, backend=config.vision_backend, **extra)
    probe = VisionProbeConfig(
        attributes=config.attributes, scenarios=config.scenarios, prefixes=config.prefixes,
        instances_per_scenario=config.vision_instances_per_scenario, per_group=config.pairs_per_group,
        seed=config.pair_seed, temperature=config.temperature, top_p=config.top_p,
    )
    audit_id, result = run_vision_probe(backend, faces, probe, progress=config.progress, max_error_share=config.max_error_share)
    return {
        "vision": f"audit {audit_id}: {result.generated} generated, {result.already_landed} already landed",
        "vision_audit_id": audit_id,
        "faces_kept": len(faces.faces),
        "faces_invalid": len(faces.problems),
        "rows_quarantined": len(faces.problems),  # landed in landing/input_quarantine by the probe
        "faces_filtered": dg.MetadataValue.json(dict(faces.filtered)),
        "vision_status_counts": dg.MetadataValue.json(dict(result.statuses)),
    }


def _language(config: ModscanConfig) -> dict:
    """Run the language modality when a T2I model and a VLM are named; metadata either way."""
    if not (config.t2i_model and config.vision_model):
        return {"language": "skipped: name a T2I model (--modscan-t2i-model) and a VLM (--modscan-vision-model)"}
    # validated first: counts that plan too many queries fail here, before either model loads
    probe = LanguageProbeConfig(
        attributes=config.attributes, prefixes=config.prefixes, instances_per_scenario=config.vision_instances_per_scenario,
        images_per_trait=config.images_per_trait, person_check=config.person_check,
        temperature=config.temperature, top_p=config.top_p,
    ).validate()
    extra = {"base_url": config.t2i_base_url} if config.t2i_backend == "openai" and config.t2i_base_url else {}
    images = load_image_backend(config.t2i_model, backend=config.t2i_backend, **extra)
    extra = {"base_url": config.vision_base_url} if config.vision_backend == "openai" and config.vision_base_url else {}
    vision = load_vision_backend(config.vision_model, backend=config.vision_backend, **extra)
    audit_id, result, counts = run_language_probe(images, vision, probe, progress=config.progress,
                                                  max_error_share=config.max_error_share)
    return {
        "language": f"audit {audit_id}: {result.generated} generated, {result.already_landed} already landed",
        "language_audit_id": audit_id,
        "scene_images": dg.MetadataValue.json(counts),
        "language_status_counts": dg.MetadataValue.json(dict(result.statuses)),
    }


modscan_assets = [modscan_responses]
