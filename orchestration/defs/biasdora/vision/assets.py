"""T2I / I2T assets: images -> descriptions -> description words (docs/method.md#2-probes).

Thin wrappers over :mod:`models_inference.probes.biasdora.t2i`, :mod:`models_inference.probes.biasdora.i2t` and
:mod:`ingestion.biasdora.description_words`. Their keys are the dbt sources ``landing/t2i_images``,
``landing/i2t_descriptions`` and ``landing/description_words``, so the lineage continues
into ``stg_*`` -> ``int_document_words`` -> ``fct_associations``.

Honest defaults: no diffusion or captioning weights ship offline, so in an ad-hoc run each
probe runs only when :class:`~orchestration.defs.biasdora.config.VisionConfig` names a reachable model
(a local folder, a hub id in the Hugging Face cache, or an API model with its key set).
Otherwise the asset still materialises, lands nothing, logs a warning saying how to enable
it, and records ``status = skipped`` with the reason in its metadata.

Registry targets (a partitioned run ``<target>@<version>``, read through
:func:`orchestration.defs.audits.runs.target_of_run`, the one code path of every asset; the
target's model and ``probe`` settings are in the run config, set when the run was requested:
``orchestration/defs/biasdora/target.py``):

* ``t2i`` target: the T2I probe draws with the target's backend / model (its version pinned
  to the partition's; images per descriptor = ``probe.runs``), then the run's describer
  (``VisionConfig.i2t_*``) describes those images with the objective prompts only (T2I
  associations, attributed to the image model);
* ``i2t`` target: the target's backend / model (version pinned) describes the images of
  ``image_audit_id`` or of this run's T2I probe (ad-hoc ``t2i_*`` config) with the subjective
  prompts (``probe.settings`` to choose);
* ``t2t`` target: both vision assets skip, saying so.

The description audit holding a target's associations gets one more ``landing/audits``
event carrying the target (and the model / version / modality its associations are
attributed to), so ``stg_audits`` / ``dim_audits`` and the partition's scorers find it.
Unreachable models of a registry target fail the step (an audit was asked for) rather
than skip.
"""

import dagster as dg

from ingestion.biasdora.description_words import land_description_words
from ingestion.errors import ModelNotAvailableError
from ingestion.landing import landing_dir
from ingestion.vocabulary import DEFAULT_I2T_SETTINGS
from models_inference.audit_log import record_audit_target
from models_inference.backends.image import load_image_backend
from models_inference.backends.vision import load_vision_backend
from models_inference.model_ref import model_reachable
from models_inference.probes.biasdora.i2t import I2TProbeConfig, probe_i2t
from models_inference.probes.biasdora.prompts import description_kind
from models_inference.probes.biasdora.t2i import (
    T2IProbeConfig,
    curated_t2i_templates,
    probe_t2i,
    select_t2i_templates,
)
from orchestration.defs.audits.runs import (
    TargetRun,
    check_current_version,
    probe_metadata,
    target_of_run,
    with_model_version,
)
from orchestration.defs.biasdora.config import DescriptionWordsConfig, VisionConfig
from orchestration.defs.biasdora.ingestion.assets import descriptors
from orchestration.defs.common import skipped_result
from orchestration.instance import MODEL_INFERENCE_POOL

T2I_KEY = dg.AssetKey(["landing", "t2i_images"])
I2T_KEY = dg.AssetKey(["landing", "i2t_descriptions"])
WORDS_KEY = dg.AssetKey(["landing", "description_words"])
#: Objective description prompts a t2i target's images get when the run config lists none
#: (the one the paper kept, BiasDora Section 2.2).
DEFAULT_OBJECTIVE_SETTINGS = tuple(s for s in DEFAULT_I2T_SETTINGS if description_kind(s) == "objective")

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
ENABLE_TARGET = (
    "a t2t registry target's partition runs the T2T probe only; register a target with modality t2i "
    "(its model draws) or i2t (its model describes) to audit a vision model"
)


def _skipped(context: dg.AssetExecutionContext, probe: str, reason: str, how: str, target: str | None = None) -> dg.MaterializeResult:
    context.log.info(f"dora: {probe} skipped: {reason}; {how}")
    extra = {"target": target} if target else {}
    return skipped_result(reason, how_to_enable=how, **extra)


def _other_modality(context: dg.AssetExecutionContext, probe: str, run: TargetRun) -> dg.MaterializeResult:
    reason = f"partition {run.partition_key} audits {run.target.modality} target {run.target.name!r}"
    return _skipped(context, probe, reason, ENABLE_TARGET, run.target.name)


T2I_DESCRIPTION = (
    "T2I images (BiasDora Section 2.2): 'Generate an image of a/an <descriptor>' (singular) "
    "and '... of <descriptors>' (plural), K images each, PNG stored content-addressed under "
    "$DORA_HOME/images; one metadata row per (audit, model, version, setting, descriptor, image "
    "index). Skipped unless a reachable T2I model is configured, or the run's partition is a t2i "
    "registry target (its model draws, version pinned to the partition's)."
)
I2T_DESCRIPTION = (
    "Image descriptions (BiasDora Sections 2.2-2.3): each image described with the "
    "objective prompt (-> T2I associations) and the 4 subjective prompts (-> I2T associations), "
    "temperature 0.7, top_p 0.95, at most 200 tokens. Skipped unless a reachable I2T model is configured. "
    "A t2i registry target's images get the objective prompts; an i2t target's model describes "
    "(subjective prompts, version pinned to the partition's)."
)


def _probe_asset(key: dg.AssetKey, deps: list, description: str, pool: str | None = MODEL_INFERENCE_POOL):
    """A multi_asset with one spec in group ``biasdora``: the op name is the table name
    (``t2i_images``), so run config reads ``{"ops": {"t2i_images": {"config": ...}}}`` like the T2T probe's."""
    return dg.multi_asset(
        name=key.path[-1],
        specs=[dg.AssetSpec(key, deps=deps, group_name="biasdora", description=description)],
        pool=pool,
    )


def _start(context, key: dg.AssetKey, config: VisionConfig) -> TargetRun | None:
    """Create the landing folder (dbt's glob must exist even when nothing lands); the run's target."""
    landing_dir(key.path[-1])
    return target_of_run(context, config.registry)


def _unreachable(context, probe: str, reason: str, how: str, run: TargetRun | None, audited: bool) -> dg.MaterializeResult:
    """An unreachable model: an error when the registry target asked for this probe, else a skip."""
    if audited:
        raise ModelNotAvailableError(f"registry target {run.target.name!r} ({run.partition_key}): {reason}")
    return _skipped(context, probe, reason, how, run.target.name if run else None)


@_probe_asset(T2I_KEY, [descriptors], T2I_DESCRIPTION)
def t2i_images(context: dg.AssetExecutionContext, config: VisionConfig) -> dg.MaterializeResult:
    run = _start(context, T2I_KEY, config)
    if run is not None and run.target.modality == "t2t":
        return _other_modality(context, "T2I probe", run)
    audited = run is not None and run.target.modality == "t2i"  # else ad hoc (also for an i2t target's images)
    api_key_env = "OPENAI_API_KEY"
    if audited:
        check_current_version(run.target, run.model_version)
        api_key_env = run.target.api_key_env
    ok, reason = model_reachable(config.t2i_model, config.t2i_backend, api_key_env=api_key_env)
    if not ok:
        return _unreachable(context, "T2I probe", reason, ENABLE_T2I, run if audited else None, audited)
    templates = select_t2i_templates(
        curated_t2i_templates(config.t2i_settings),
        settings=config.t2i_settings,
        descriptors=config.descriptors,
        per_dimension=config.per_dimension,
    )
    if config.t2i_backend == "openai":
        kwargs = {
            "base_url": config.t2i_base_url,
            "size": config.t2i_size,
            "quality": config.t2i_quality,
            "styles": tuple(config.t2i_styles),
            "api_key_env": api_key_env,
        }
    else:
        kwargs = {
            "vae": config.t2i_vae,
            "steps": config.t2i_steps,
            "guidance_scale": config.t2i_guidance_scale,
            "height": config.t2i_height,
            "width": config.t2i_width,
            "batch_size": config.t2i_batch_size,
            "prompt_suffix": config.t2i_prompt_suffix,
        }
    try:
        backend = load_image_backend(config.t2i_model, backend=config.t2i_backend, **kwargs)
    except ModelNotAvailableError as exc:
        if audited:
            raise
        return _skipped(context, "T2I probe", str(exc), ENABLE_T2I)
    if audited:
        backend = with_model_version(backend, run.model_version)
    summary = probe_t2i(
        templates,
        backend,
        T2IProbeConfig(images_per_descriptor=config.images_per_descriptor),
        progress=config.progress,
        max_error_share=config.max_error_share,
    )
    context.log.info(f"dora: T2I audit {summary.audit_id}: generated {summary.generated} of {summary.planned} images")
    return dg.MaterializeResult(
        metadata=probe_metadata(
            summary,
            backend,
            run.target.name if audited else None,
            "image_status",
            descriptors=len({t.descriptor for t in templates}),
        )
    )


def _this_run_images(context: dg.AssetExecutionContext) -> dict | None:
    """Metadata (audit_id, model_id, ...) of the T2I materialisation of this run, if it drew (not skipped)."""
    event = context.instance.get_latest_materialization_event(T2I_KEY)
    if event is None or event.run_id != context.run.run_id or event.asset_materialization is None:
        return None
    md = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    return md if md.get("audit_id") else None


def _this_run_image_audit(context: dg.AssetExecutionContext):
    """The image audit the T2I asset materialised in this run, if it ran (not skipped)."""
    md = _this_run_images(context)
    return md["audit_id"] if md else None


@_probe_asset(I2T_KEY, [T2I_KEY], I2T_DESCRIPTION)
def i2t_descriptions(context: dg.AssetExecutionContext, config: VisionConfig) -> dg.MaterializeResult:
    run = _start(context, I2T_KEY, config)
    modality = run.target.modality if run is not None else None
    if modality == "t2t":
        return _other_modality(context, "I2T probe", run)
    api_key_env = "OPENAI_API_KEY"
    how = ENABLE_I2T
    if modality == "t2i":  # the target's images of this run, described objectively by the run's describer
        images = _this_run_images(context)
        image_audit = images["audit_id"] if images else None
        objective = [s for s in config.i2t_settings if description_kind(s) == "objective"]
        config = config.model_copy(update={"i2t_settings": objective or list(DEFAULT_OBJECTIVE_SETTINGS)})
        how = f"the T2I associations of t2i target {run.target.name!r} need objective descriptions of its images: " + ENABLE_I2T
    elif modality == "i2t":
        check_current_version(run.target, run.model_version)
        api_key_env = run.target.api_key_env
        image_audit = config.image_audit_id or _this_run_image_audit(context)
    else:
        image_audit = config.image_audit_id or _this_run_image_audit(context)
    ok, reason = model_reachable(config.i2t_model, config.i2t_backend, api_key_env=api_key_env)
    if not ok:
        return _unreachable(context, "I2T probe", reason, how, run, modality == "i2t")
    if not image_audit:
        if modality == "i2t":
            return _skipped(
                context,
                "I2T probe",
                f"no images for i2t target {run.target.name!r} to describe",
                "name them with `dora audit --target <i2t target> --image-audit-id <T2I audit id>`, or draw them in the same run with `--t2i-model`",
                run.target.name,
            )
        return _skipped(context, "I2T probe", "no images to describe (the T2I probe did not run)", ENABLE_T2I, run.target.name if run else None)
    if config.i2t_backend == "openai":
        kwargs = {"base_url": config.i2t_base_url, "api_key_env": api_key_env}
    else:
        kwargs = {
            "batch_size": config.i2t_batch_size,
            "system_prompt": config.i2t_system_prompt,
            "image_size": tuple(config.i2t_image_size) if config.i2t_image_size else None,
        }
    try:
        backend = load_vision_backend(config.i2t_model, backend=config.i2t_backend, **kwargs)
    except ModelNotAvailableError as exc:
        if modality == "i2t":
            raise
        return _skipped(context, "I2T probe", str(exc), how, run.target.name if run else None)
    if modality == "i2t":
        backend = with_model_version(backend, run.model_version)
    probe = I2TProbeConfig(
        settings=tuple(config.i2t_settings),
        max_new_tokens=config.i2t_max_new_tokens,
        temperature=config.i2t_temperature,
        top_p=config.i2t_top_p,
    )
    summary = probe_i2t(image_audit, backend, probe, progress=config.progress, max_error_share=config.max_error_share)
    context.log.info(f"dora: I2T audit {summary.audit_id}: generated {summary.generated} of {summary.planned} descriptions")
    if modality == "t2i":
        record_audit_target(summary.audit_id, run.target.name, images["model_id"], run.model_version, "t2i")
    elif modality == "i2t":
        record_audit_target(summary.audit_id, run.target.name, backend.model_id, run.model_version, "i2t")
    return dg.MaterializeResult(
        metadata=probe_metadata(
            summary,
            backend,
            run.target.name if run is not None else None,
            "description_status",
            image_audit_id=image_audit,
            settings=dg.MetadataValue.json(list(config.i2t_settings)),
            images=summary.images,
        )
    )


@_probe_asset(
    WORDS_KEY,
    [I2T_KEY],
    "Description words (docs/method.md#3-associations): every landed description not yet tokenised, "
    "tokenised with spaCy into lower-cased lemmas with POS; stop words (NLTK's English list by default), "
    "punctuation, numbers (and, as an option, the descriptor's own words) are kept as rows with their drop reason.",
    pool=None,
)
def description_words(context: dg.AssetExecutionContext, config: DescriptionWordsConfig) -> dg.MaterializeResult:
    landing_dir("description_words")
    summary = land_description_words(stop_list=config.stop_list, drop_descriptor_words=config.drop_descriptor_words)
    return dg.MaterializeResult(
        metadata={
            "descriptions_tokenised": summary["descriptions"],
            "tokens": summary["tokens"],
            "words": summary["words"],
            "dropped": dg.MetadataValue.json(summary["dropped"]),
        }
    )


vision_assets = [t2i_images, i2t_descriptions, description_words]
