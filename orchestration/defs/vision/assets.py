"""T2I / I2T assets: images -> descriptions -> description words (METHOD.md section 2).

Thin wrappers over :mod:`models_inference.t2i`, :mod:`models_inference.i2t` and
:mod:`ingestion.description_words`. Their keys are the dbt sources ``landing/t2i_images``,
``landing/i2t_descriptions`` and ``landing/description_words``, so the lineage continues
into ``stg_*`` -> ``int_document_words`` -> ``fct_associations``.

Honest defaults: no diffusion or captioning weights ship offline, so each probe runs only
when :class:`~orchestration.defs.config.VisionConfig` names a reachable model (a local
folder, a hub id in the Hugging Face cache, or an API model with its key set). Otherwise the
asset still materialises, lands nothing, logs a warning saying how to enable it, and records
``status = skipped`` with the reason in its metadata.
"""


import dagster as dg

from ingestion.description_words import land_description_words
from ingestion.landing import landing_dir
from models_inference.i2t import I2TProbeConfig, load_vision_backend, run_i2t_probe
from models_inference.t2i import (
    T2IProbeConfig,
    curated_t2i_targets,
    load_image_backend,
    model_reachable,
    run_t2i_probe,
    select_t2i_targets,
)
from models_inference.text_backends import ModelNotAvailableError
from orchestration.defs.config import VisionConfig
from orchestration.defs.ingestion.assets import descriptors

T2I_KEY = dg.AssetKey(["landing", "t2i_images"])
I2T_KEY = dg.AssetKey(["landing", "i2t_descriptions"])
WORDS_KEY = dg.AssetKey(["landing", "description_words"])

ENABLE_T2I = (
    "to run the T2I probe, name a text-to-image model: `dora audit --t2i-model <diffusers folder or cached "
    "hub id>` (paper: Stable Diffusion, add `--t2i-vae stabilityai/sd-vae-ft-mse`) or `dora audit "
    "--t2i-backend openai --t2i-model dall-e-3` with OPENAI_API_KEY set"
)
ENABLE_I2T = (
    "to describe images, name an image-to-text model: `dora audit --i2t-model <transformers folder or cached "
    "hub id>` (paper: LLaVA) or `--i2t-backend openai --i2t-model gpt-4o` with OPENAI_API_KEY set; it "
    "describes the images of this run's T2I probe, or of `--image-audit-id <id>`"
)


def _skipped(context: dg.AssetExecutionContext, probe: str, reason: str, how: str) -> dg.MaterializeResult:
    context.log.warning(f"dora: {probe} skipped: {reason}; {how}")
    return dg.MaterializeResult(metadata={"status": "skipped", "reason": reason, "how_to_enable": how, "rows_generated": 0})


# multi_asset with one spec each: the op names are plain ("t2i_images"), so run config reads
# {"ops": {"t2i_images": {"config": ...}}} like the T2T probe's.
@dg.multi_asset(
    name="t2i_images",
    specs=[
        dg.AssetSpec(
            T2I_KEY,
            deps=[descriptors],
            group_name="probes",
            description="T2I images (BiasDora Section 2.2): 'Generate an image of a/an <descriptor>' (singular) "
            "and '... of <descriptors>' (plural), K images each, PNG stored content-addressed under "
            "$DORA_HOME/images; one metadata row per (audit, model, version, setting, descriptor, image "
            "index). Skipped unless a reachable T2I model is configured.",
        )
    ],
    pool="model_inference",
)
def t2i_images(context: dg.AssetExecutionContext, config: VisionConfig) -> dg.MaterializeResult:
    landing_dir("t2i_images")
    ok, reason = model_reachable(config.t2i_model, config.t2i_backend)
    if not ok:
        return _skipped(context, "T2I probe", reason, ENABLE_T2I)
    targets = select_t2i_targets(
        curated_t2i_targets(config.t2i_settings),
        settings=config.t2i_settings,
        descriptors=config.descriptors,
        per_dimension=config.per_dimension,
    )
    if config.t2i_backend == "openai":
        kwargs = {"base_url": config.t2i_base_url, "size": config.t2i_size, "quality": config.t2i_quality,
                  "styles": tuple(config.t2i_styles)}
    else:
        kwargs = {"vae": config.t2i_vae, "steps": config.t2i_steps, "guidance_scale": config.t2i_guidance_scale,
                  "height": config.t2i_height, "width": config.t2i_width, "batch_size": config.t2i_batch_size}
    try:
        backend = load_image_backend(config.t2i_model, backend=config.t2i_backend, **kwargs)
    except ModelNotAvailableError as exc:
        return _skipped(context, "T2I probe", str(exc), ENABLE_T2I)
    summary = run_t2i_probe(
        targets, backend, T2IProbeConfig(images_per_descriptor=config.images_per_descriptor), progress=config.progress
    )
    context.log.info(f"dora: T2I audit {summary.audit_id}: generated {summary.generated} of {summary.planned} images")
    return dg.MaterializeResult(
        metadata={
            "status": "finished",
            "audit_id": summary.audit_id,
            "model_id": backend.model_id,
            "model_version": backend.model_version,
            "descriptors": len({t.descriptor for t in targets}),
            "rows_planned": summary.planned,
            "rows_already_landed": summary.already_landed,
            "rows_generated": summary.generated,
            "image_status": dg.MetadataValue.json(dict(summary.status)),
        }
    )


def _this_run_image_audit(context: dg.AssetExecutionContext):
    """The image audit the T2I asset materialised in this run, if it ran (not skipped)."""
    event = context.instance.get_latest_materialization_event(T2I_KEY)
    if event is None or event.run_id != context.run_id or event.asset_materialization is None:
        return None
    md = event.asset_materialization.metadata
    value = md.get("audit_id")
    return value.value if value is not None else None


@dg.multi_asset(
    name="i2t_descriptions",
    specs=[
        dg.AssetSpec(
            I2T_KEY,
            deps=[T2I_KEY],
            group_name="probes",
            description="Image descriptions (BiasDora Sections 2.2-2.3): each image described with the "
            "objective prompt (-> T2I associations) and the 4 subjective prompts (-> I2T associations), "
            "temperature 0.7, top_p 0.95, at most 200 tokens. Skipped unless a reachable I2T model is configured.",
        )
    ],
    pool="model_inference",
)
def i2t_descriptions(context: dg.AssetExecutionContext, config: VisionConfig) -> dg.MaterializeResult:
    landing_dir("i2t_descriptions")
    image_audit = config.image_audit_id or _this_run_image_audit(context)
    ok, reason = model_reachable(config.i2t_model, config.i2t_backend)
    if not ok:
        return _skipped(context, "I2T probe", reason, ENABLE_I2T)
    if not image_audit:
        return _skipped(context, "I2T probe", "no images to describe (the T2I probe did not run)", ENABLE_T2I)
    if config.i2t_backend == "openai":
        kwargs = {"base_url": config.i2t_base_url}
    else:
        kwargs = {"batch_size": config.i2t_batch_size}
    try:
        backend = load_vision_backend(config.i2t_model, backend=config.i2t_backend, **kwargs)
    except ModelNotAvailableError as exc:
        return _skipped(context, "I2T probe", str(exc), ENABLE_I2T)
    probe = I2TProbeConfig(
        settings=tuple(config.i2t_settings), max_new_tokens=config.i2t_max_new_tokens,
        temperature=config.i2t_temperature, top_p=config.i2t_top_p,
    )
    summary = run_i2t_probe(image_audit, backend, probe, progress=config.progress)
    context.log.info(f"dora: I2T audit {summary.audit_id}: generated {summary.generated} of {summary.planned} descriptions")
    return dg.MaterializeResult(
        metadata={
            "status": "finished",
            "audit_id": summary.audit_id,
            "image_audit_id": image_audit,
            "model_id": backend.model_id,
            "model_version": backend.model_version,
            "images": summary.images,
            "rows_planned": summary.planned,
            "rows_already_landed": summary.already_landed,
            "rows_generated": summary.generated,
            "description_status": dg.MetadataValue.json(dict(summary.status)),
        }
    )


@dg.multi_asset(
    name="description_words",
    specs=[
        dg.AssetSpec(
            WORDS_KEY,
            deps=[I2T_KEY],
            group_name="probes",
            description="Description words (METHOD.md section 3): every landed description not yet tokenised, "
            "tokenised with spaCy into lower-cased lemmas with POS; stop words, punctuation, numbers and the "
            "descriptor's own words are kept as rows with their drop reason.",
        )
    ],
)
def description_words(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    landing_dir("description_words")
    summary = land_description_words()
    return dg.MaterializeResult(
        metadata={
            "descriptions_tokenised": summary["descriptions"],
            "tokens": summary["tokens"],
            "words": summary["words"],
            "dropped": dg.MetadataValue.json(summary["dropped"]),
        }
    )


vision_assets = [t2i_images, i2t_descriptions, description_words]
