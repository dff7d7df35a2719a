"""VLStereoSet assets: ``landing/vlstereoset_items`` -> ``landing/vlstereoset_scores`` -> the
``vlstereoset`` dbt models (``fct_vlstereoset_scores``, ``agg_vlstereoset_metrics``,
``fct_vlstereoset_shifts``). One graph-backed asset (``vlstereoset_probe``) materialises both
landing tables:

1. ``vlstereoset_items``: the CSV (:class:`~orchestration.defs.vlstereoset.config.VLStereoSetConfig`,
   default the shipped SYNTHETIC file) is validated, its images resolved (only when an image
   scorer runs) and the items land as a snapshot; the items are split into blocks;
2. ``vlstereoset_block`` (one step per block, run apart under the executor): each selected
   scorer (the text-only analogue, IDM / BIM / RAM, CLIP, VLM loglik / mcq) scores the block's
   items and conditions through the resumable loop, one audit per scorer;
3. ``vlstereoset_finish``: each audit's ``finished`` event once every block has landed.

Disabled (``dora audit --family`` without ``vlstereoset``): both assets materialise with
``status = skipped`` and land nothing. Registry targets (a partitioned run): the partition of a
target that runs ``vlstereoset`` scores with the target's model as the text prior and its
``options.vlstereoset`` (audits tagged with the target; the text prior's version pinned to the
partition's, which must be the target's current one; CLIP, ITM and the VLM keep their own); a
partition of a target that does not (a BiasDora-only one included) skips the family, saying which
target and families it audits, as every family does for the others.
"""

from collections import Counter

import dagster as dg

from models_inference.backends.text import load_text_backend
from models_inference.backends.vision import load_vision_backend
from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv, paper_item_ids, resolve_images, synthetic_csv_path
from models_inference.probes.vlstereoset.probe import land_items, landed_items, probe_vlstereoset
from models_inference.probes.vlstereoset.scorers import ClipScorer, ItmScorer, McqScorer, ReferenceScorer, TextPriorScorer, VisionLoglikScorer
from models_inference.resumable import finish_blocks
from orchestration.defs.audits.runs import check_current_version, family_skip_reason, target_of_run
from orchestration.defs.common import block_outputs, same_config, skipped_metadata
from orchestration.defs.vlstereoset.config import (
    ASSET_GROUP,
    IMAGE_SCORERS,
    OP_NAME,
    PROBE_NAME,
    REFERENCE_SCORERS,
    TEXT_PRIOR,
    VLStereoSetConfig,
    selected_scorers,
)
from orchestration.instance import MODEL_INFERENCE_POOL

ITEMS_KEY = dg.AssetKey(["landing", "vlstereoset_items"])
SCORES_KEY = dg.AssetKey(["landing", "vlstereoset_scores"])


def build_scorers(config: VLStereoSetConfig, names: list, model_version=None) -> list:
    """Scorer objects for ``names`` (models load here; the embedded text model lazily).
    ``model_version``: a registry partition's pinned version, set on the text prior only: the
    target's model is the text prior's (``target_models``); CLIP, ITM and the VLM are the
    options' models and keep their own versions."""
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
            out.append(
                VisionLoglikScorer(vlm) if name == "loglik" else McqScorer(vlm, shuffles=config.mcq_shuffles, answer_mode=config.mcq_answer_mode)
            )
        if model_version and name == TEXT_PRIOR:
            out[-1].model_version = model_version
    return out


RESPONSE_OPS = ("vlstereoset_items", "vlstereoset_block", "vlstereoset_finish")


def _skip_reason(context, config: VLStereoSetConfig) -> str | None:
    """Why the family does nothing in this run, or None: not selected (``dora audit --family``),
    or a registry partition whose target does not run the family (a target runs only the families it lists)."""
    # a registry partition whose run does not run the family first (its run request turns it off too)
    reason = family_skip_reason(context, PROBE_NAME, config.registry)
    return reason or (None if config.enabled else "--family does not include vlstereoset")


def _scored_items(dataset_id: str, config: VLStereoSetConfig) -> tuple[list[dict], str | None]:
    """The landed items a run scores, in a stable order, and their item set's name (``None``:
    every item; ``paper:<seed>``: the paper's per-category counts, a seeded sample)."""
    items = landed_items(dataset_id)
    if config.items != "paper":
        return items, None
    keep = set(paper_item_ids(items, seed=config.item_seed))
    return [it for it in items if it["item_id"] in keep], f"paper:{config.item_seed}"


@dg.op(
    out={"items": dg.Out(dg.Nothing), "blocks": dg.DynamicOut(dict)},
    description="Validate the CSV, resolve the images, land the items; split them into blocks of --vlstereoset-block-items.",
)
def vlstereoset_items(context: dg.OpExecutionContext, config: VLStereoSetConfig):
    reason = _skip_reason(context, config)
    if reason:  # one empty block: the fan-in step reports the skip
        yield dg.Output(None, "items", metadata=skipped_metadata(reason, rows_key=None))
        yield from block_outputs("items", 0, 1, output_name="blocks")
        return
    names = selected_scorers(config)
    dataset = load_vlstereoset_csv(config.csv or synthetic_csv_path())
    images = resolve_images(dataset.items, config.images, download=config.download_images, fetch=any(n in IMAGE_SCORERS for n in names))
    n_items, new = land_items(dataset, images)
    for warning in dataset.warnings:
        context.log.warning(warning)
    quarantined = [*dataset.quarantined, *images.quarantined]
    for q in quarantined[:20]:
        context.log.warning(f"{q.source_file}, line {q.line} (row {q.row}) quarantined: {q.reason}")
    statuses = Counter(o.status for o in images.values())
    yield dg.Output(
        None,
        "items",
        metadata={
            "dataset_id": dataset.dataset_id,
            "csv": str(dataset.path),
            "is_synthetic": dataset.is_synthetic,
            "items": n_items,
            "rows_quarantined": len(quarantined),
            "new_snapshot": new,
            **{f"images_{k}": v for k, v in sorted(statuses.items())},
        },
    )
    items, item_set = _scored_items(dataset.dataset_id, config)
    if item_set:
        context.log.info(f"vlstereoset: the paper's item set, {len(items)} items (seed {config.item_seed})")
    if not items:
        raise ValueError("no VLStereoSet item to score")
    yield from block_outputs("items", len(items), config.block_items, output_name="blocks", dataset_id=dataset.dataset_id)


@dg.op(pool=MODEL_INFERENCE_POOL, description="Score the items of one block with every selected scorer (one audit each).")
def vlstereoset_block(context: dg.OpExecutionContext, config: VLStereoSetConfig, block: dict) -> dict:
    if block["stop"] == block["start"]:
        return {"scored": []}
    run = target_of_run(context, config.registry)  # a vlstereoset target's partition: its version and name on the audits
    names = selected_scorers(config)
    if run is not None and TEXT_PRIOR in names:  # the target's model scores: only its current version can
        check_current_version(run.target, run.model_version)
    items, item_set = _scored_items(block["dataset_id"], config)
    # scorers first: an endpoint that cannot score (no prompt log-probs) fails before any score lands
    scorers = build_scorers(config, names, run.model_version if run else None)
    scored = []
    for scorer in scorers:
        summary = probe_vlstereoset(
            items,
            scorer,
            target=run.target.name if run else None,
            shard_rows=config.shard_rows,
            progress=config.progress,
            max_error_share=config.max_error_share,
            item_set=item_set,
            block=(block["start"], block["stop"]),
        )
        context.log.info(
            f"vlstereoset {scorer.name}, items {block['start']}-{block['stop']}: audit {summary.audit_id}, "
            f"{summary.generated} rows, {dict(summary.status)}"
        )
        scored.append({"audit_id": summary.audit_id, "generated": summary.generated, "status": dict(summary.status)})
    return {"scored": scored, "dataset_id": block["dataset_id"], "item_set": item_set or "all", "items": len(items)}


@dg.op(
    ins={"items": dg.In(dg.Nothing)},
    out=dg.Out(dg.Nothing),
    description="Once every block has landed: each scorer audit's finished event, the metadata.",
)
def vlstereoset_finish(context: dg.OpExecutionContext, config: VLStereoSetConfig, blocks: list[dict]):
    reason = _skip_reason(context, config)
    if reason:
        context.log.info(f"dora: VLStereoSet skipped: {reason}")
        yield dg.Output(None, metadata=skipped_metadata(reason))
        return
    audits: dict[str, int] = {}  # audit id -> rows generated over the blocks, in scorer order
    rows: Counter = Counter()
    for b in blocks:
        for s in b["scored"]:
            audits[s["audit_id"]] = audits.get(s["audit_id"], 0) + s["generated"]
            rows.update(s["status"])
    for audit_id, generated in audits.items():
        finish_blocks(audit_id, generated)
    done = next(b for b in blocks if "dataset_id" in b)  # every block that had items (with or without scorers)
    yield dg.Output(
        None,
        metadata={
            "dataset_id": done["dataset_id"],
            "item_set": done["item_set"],
            "items_scored": done["items"],
            "scorers": ",".join(selected_scorers(config)),
            "audit_ids": ",".join(audits),
            "blocks": len(blocks),
            "rows_generated": sum(rows.values()),
            **{f"rows_{k}": v for k, v in sorted(rows.items())},
        },
    )


@dg.graph(name=OP_NAME, out={"items": dg.GraphOut(), "scores": dg.GraphOut()}, config=same_config(VLStereoSetConfig, *RESPONSE_OPS))
def _vlstereoset_graph():
    items, blocks = vlstereoset_items()
    # the items output is an input of the fan-in step, so the scores wait for the items to land
    return {"items": items, "scores": vlstereoset_finish(blocks=blocks.map(vlstereoset_block).collect(), items=items)}


# from_graph rather than @graph_multi_asset: it states that the scores asset is downstream of the
# items asset (the lineage the UI shows), which Dagster does not infer inside one graph
vlstereoset_probe = dg.AssetsDefinition.from_graph(
    _vlstereoset_graph,
    keys_by_output_name={"items": ITEMS_KEY, "scores": SCORES_KEY},
    internal_asset_deps={"items": set(), "scores": {ITEMS_KEY}},
    group_name=ASSET_GROUP,
    descriptions_by_output_name={
        "items": "Validated VLStereoSet items with image statuses and neutral captions.",
        "scores": "Caption scores per item, condition and scorer variant (VLStereoSet probe), in blocks of items (one step each).",
    },
)

vlstereoset_assets = [vlstereoset_probe]
