"""VLStereoSet assets: ``landing/vlstereoset_items`` -> ``landing/vlstereoset_scores`` -> the
``vlstereoset`` dbt folder (``fct_vlstereoset_scores``, ``agg_vlstereoset_metrics``,
``fct_vlstereoset_shifts``). One op (``vlstereoset_probe``) materialises both landing tables:

1. the CSV (:class:`~orchestration.defs.vlstereoset.config.VLStereoSetConfig`, default the
   shipped SYNTHETIC file) is validated, its images resolved (only when an image scorer runs)
   and the items land as a snapshot;
2. each selected scorer (the text-only analogue, IDM / BIM / RAM, CLIP, VLM loglik / mcq)
   scores every item and condition through the resumable loop, one audit per scorer.

Disabled (``dora audit --probe`` without ``vlstereoset``): both assets materialise with
``status = skipped`` and land nothing. Registry targets (a partitioned run): a t2t target's
model is scored by the text-only analogue (locally, or over an OpenAI-compatible endpoint that
returns prompt log-probs), an i2t target's by mcq / loglik (version
pinned to the partition's, audits tagged with the target); other targets skip, saying why.
"""


from collections import Counter

import dagster as dg

from models_inference.backends.text import load_text_backend
from models_inference.backends.vision import load_vision_backend
from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv, paper_item_ids, resolve_images, synthetic_csv_path
from models_inference.probes.vlstereoset.probe import land_items, landed_items, run_vlstereoset_probe
from models_inference.probes.vlstereoset.scorers import ClipScorer, ItmScorer, McqScorer, ReferenceScorer, TextPriorScorer, VisionLoglikScorer
from orchestration.defs.common import skipped_result
from orchestration.defs.audits.runs import target_of_run
from orchestration.defs.vlstereoset.config import (
    ASSET_GROUP, IMAGE_SCORERS, OP_NAME, REFERENCE_SCORERS, TEXT_PRIOR, VLStereoSetConfig, config_for_target, selected_scorers,
)

ITEMS_KEY = dg.AssetKey(["landing", "vlstereoset_items"])
SCORES_KEY = dg.AssetKey(["landing", "vlstereoset_scores"])


def build_scorers(config: VLStereoSetConfig, names: list, model_version=None) -> list:
    """Scorer objects for ``names`` (models load here; the embedded text model lazily).
    ``model_version``: a registry partition's pinned version, set on the model scorers."""
    out, vlm = [], None
    for name in names:
        if name in REFERENCE_SCORERS:
            out.append(ReferenceScorer(name))
        elif name == TEXT_PRIOR:
            kwargs = {"base_url": config.text_base_url} if config.text_backend == "openai" else {}
            out.append(TextPriorScorer(load_text_backend(config.text_model, backend=config.text_backend, defer=True, **kwargs)))
        elif name == "clip":
            out.append(ClipScorer(config.clip_model, logit_scale=config.clip_logit_scale))
        elif name == "itm":
            out.append(ItmScorer(config.itm_model))
        else:
            if vlm is None:
                kwargs = {"base_url": config.vlm_base_url} if config.vlm_backend == "openai" else {}
                vlm = load_vision_backend(config.vlm_model, backend=config.vlm_backend, **kwargs)
            out.append(VisionLoglikScorer(vlm) if name == "loglik" else McqScorer(vlm, shuffles=config.mcq_shuffles))
        if model_version and name not in REFERENCE_SCORERS:
            out[-1].model_version = model_version
    return out


@dg.multi_asset(
    name=OP_NAME,
    specs=[
        dg.AssetSpec(ITEMS_KEY, group_name=ASSET_GROUP, description="Validated VLStereoSet items with image statuses and neutral captions."),
        dg.AssetSpec(SCORES_KEY, group_name=ASSET_GROUP, deps=[ITEMS_KEY],
                     description="Caption scores per item, condition and scorer variant (VLStereoSet probe)."),
    ],
)
def vlstereoset_probe(context: dg.AssetExecutionContext, config: VLStereoSetConfig):
    """Land the VLStereoSet items, then score them with every selected scorer (one audit each)."""
    run = target_of_run(context, config.registry)
    reason = None if config.enabled else "--probe does not include vlstereoset"
    if run is not None and reason is None and run.target.family != "vlstereoset":  # its own targets: options as given
        t = run.target
        if t.family == "biasdora":  # a BiasDora target's model, scored by the family's scorer for its modality
            config, reason = config_for_target(config, t.modality, t.backend, t.model, t.base_url)
        else:
            reason = f"partition {run.partition_key} audits registry target {t.name!r} of family {t.family!r}"
    if reason:
        for key in (ITEMS_KEY, SCORES_KEY):
            yield skipped_result(reason, asset_key=key, rows_key=None)
        return
    names = selected_scorers(config)
    dataset = load_vlstereoset_csv(config.csv or synthetic_csv_path())
    # scorers first: an endpoint that cannot score (no prompt log-probs) fails before any row lands
    scorers = build_scorers(config, names, run.model_version if run else None)
    images = resolve_images(dataset.items, config.images, download=config.download_images,
                            fetch=any(n in IMAGE_SCORERS for n in names))
    n_items, new = land_items(dataset, images)
    for warning in dataset.warnings:
        context.log.warning(warning)
    quarantined = [*dataset.quarantined, *images.quarantined]
    for q in quarantined[:20]:
        context.log.warning(f"{q.source_file}, line {q.line} (row {q.row}) quarantined: {q.reason}")
    statuses = Counter(o.status for o in images.values())
    yield dg.MaterializeResult(asset_key=ITEMS_KEY, metadata={
        "dataset_id": dataset.dataset_id, "csv": str(dataset.path), "is_synthetic": dataset.is_synthetic, "items": n_items,
        "rows_quarantined": len(quarantined), "new_snapshot": new, **{f"images_{k}": v for k, v in sorted(statuses.items())},
    })
    items = landed_items(dataset.dataset_id)
    item_set = None
    if config.items == "paper":  # the paper's per-category counts, a seeded sample of the pool
        keep = set(paper_item_ids(items, seed=config.item_seed))
        items = [it for it in items if it["item_id"] in keep]
        item_set = f"paper:{config.item_seed}"
        context.log.info(f"vlstereoset: the paper's item set, {len(items)} items (seed {config.item_seed})")
    audits, rows = [], Counter()
    for scorer in scorers:
        summary = run_vlstereoset_probe(items, scorer, target=run.target.name if run else None,
                                        shard_rows=config.shard_rows, progress=config.progress,
                                        max_error_share=config.max_error_share, item_set=item_set)
        context.log.info(f"vlstereoset {scorer.name}: audit {summary.audit_id}, {summary.generated} rows, {dict(summary.status)}")
        audits.append(summary.audit_id)
        rows.update(summary.status)
    yield dg.MaterializeResult(asset_key=SCORES_KEY, metadata={
        "dataset_id": dataset.dataset_id, "item_set": item_set or "all", "items_scored": len(items), "scorers": ",".join(names), "audit_ids": ",".join(audits),
        "rows_generated": sum(rows.values()), **{f"rows_{k}": v for k, v in sorted(rows.items())},
    })


vlstereoset_assets = [vlstereoset_probe]
