"""The VLStereoSet probe: caption selection scores for every item and condition, landed
resumably (VLStereoSet §3.3-3.5; docs/families/vlstereoset.md#scorers and docs/families/vlstereoset.md#statistics).

For each landed item (``landing/vlstereoset_items``) and each condition the scorer supports
(:data:`.scorers.CONDITION_KINDS`), the scorer gives one score per caption; rows land in
``landing/vlstereoset_scores`` keyed by (dataset_id, scorer, item_id, condition) through the
platform's resumable loop (:func:`models_inference.resumable.land_resumable`): an interrupted
probe resumes, ``error`` / ``no_image`` rows are retried by the next run. Conditions:
``neutral`` / ``blank_neutral`` only for items whose neutral captions exist; image scorers on
an item without an ``ok`` image land ``no_image`` rows for its ``original`` condition, so the
missing images stay visible in the marts. The blank image I' is "completely white" (§3.5), of
I's size (NOT FROM PAPER: the size is undefined), stored in the image store.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from ingestion.contracts.vlstereoset import FAMILY
from ingestion.landing import landing_dir, landing_glob, write_shard
from ingestion.landing_location import register_landing
from ingestion.quarantine import land_quarantine
from models_inference.audit_log import readable_audit_id
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.image_store import image_file, images_dir, store_png
from models_inference.probes.vlstereoset.dataset import ImageOutcome, ResolvedImages, VLStereoSetDataset, item_rows
from models_inference.probes.vlstereoset.scorers import CONDITION_KINDS, CaptionScore, Unit, detail_json
from models_inference.resumable import ResumableTable, land_probe

#: Final statuses: an (item, condition) with such a row is not scored again (``error`` and
#: ``no_image`` are retried).
FINAL_SCORE_STATUSES = ("ok", "na")
VLSTEREOSET_SCORES = ResumableTable(
    "vlstereoset_scores",
    ("dataset_id", "scorer", "item_id", "condition"),
    "status",
    FINAL_SCORE_STATUSES,
    unit="item",
    error_column="error",
)


def landed_items(dataset_id: str) -> list[dict]:
    """The latest landed row of every item of ``dataset_id`` (``landing/vlstereoset_items``), by source row."""
    import duckdb

    landing_dir("vlstereoset_items")
    sql = """
        select * from read_parquet(?, union_by_name = true) where dataset_id = ?
        qualify row_number() over (partition by item_id order by landed_at desc) = 1
        order by source_row
    """
    with duckdb.connect() as con:
        register_landing(con)
        return con.sql(sql, params=[landing_glob("vlstereoset_items"), dataset_id]).to_arrow_table().to_pylist()


def land_items(dataset: VLStereoSetDataset, images: dict[str, ImageOutcome]) -> tuple[int, bool]:
    """Land the dataset's item rows (with image outcomes) as one snapshot shard of
    ``landing/vlstereoset_items``, named by the dataset and a hash of the rows' content: landing
    the same content again writes nothing (its first ``landed_at`` is kept). The file's
    quarantined rows, and those of the image manifest (``images`` from
    :func:`.dataset.resolve_images`), land in ``landing/input_quarantine`` (:func:`ingestion.quarantine.land_quarantine`).

    Returns:
        (rows, whether a new shard was written).
    """
    # the rows that were not read: the CSV's and the image folder's manifest's
    land_quarantine("vlstereoset", dataset.dataset_id, [*dataset.quarantined, *(images.quarantined if isinstance(images, ResolvedImages) else ())])
    rows = item_rows(dataset, images, datetime.now(timezone.utc))
    content = json.dumps([{k: v for k, v in r.items() if k != "landed_at"} for r in rows], sort_keys=True, default=str)
    name = f"{dataset.dataset_id}-{hashlib.sha256(content.encode()).hexdigest()[:12]}"
    if (landing_dir("vlstereoset_items") / "items" / f"{name}.parquet").exists():
        return len(rows), False
    write_shard("vlstereoset_items", rows, partition="items", name=name)
    return len(rows), True


_BLANKS: dict[tuple[str, int, int], str] = {}


def blank_image(width: int, height: int) -> str:
    """Image-store path of a completely white RGB image of ``width`` x ``height`` (§3.5's I')."""
    import io

    from PIL import Image

    key = (str(images_dir()), width, height)  # per DORA_HOME: the store may move between calls
    if key not in _BLANKS or not image_file(_BLANKS[key]).exists():
        buf = io.BytesIO()
        Image.new("RGB", (width, height), (255, 255, 255)).save(buf, format="PNG")
        _BLANKS[key] = store_png(buf.getvalue()).path
    return _BLANKS[key]


def plan_units(items: list[dict], scorer) -> list[Unit]:
    """The (item, condition) units a scorer scores (see the module docstring)."""
    units = []
    for it in items:
        captions = {"stereotype": it["caption_stereotype"], "anti-stereotype": it["caption_anti_stereotype"], "unrelated": it["caption_unrelated"]}
        neutral = {"stereotype": it["neutral_stereotype"], "anti-stereotype": it["neutral_anti_stereotype"]}
        has_image = it["image_status"] == "ok" and it["image_path"]
        for cond in scorer.conditions:
            if cond in ("neutral", "blank_neutral") and it["neutral_status"] != "ok":
                continue
            image = None
            if scorer.needs_image:
                if not has_image:
                    if cond == "original":
                        units.append(Unit(it["item_id"], cond, captions, None, it["y"], it["category"]))
                    continue
                image = image_file(blank_image(it["image_width"], it["image_height"]) if cond == "blank_neutral" else it["image_path"])
            texts = captions if cond in ("original", "pair") else neutral
            units.append(Unit(it["item_id"], cond, {k: texts[k] for k in CONDITION_KINDS[cond]}, image, it["y"], it["category"]))
    return units


@dataclass
class VLStereoSetRunSummary:
    """What a probe run did: units planned / already landed / scored, rows by status."""

    audit_id: str
    scorer: str
    planned: int = 0
    already_landed: int = 0
    generated: int = 0
    status: Counter = field(default_factory=Counter)


def vlstereoset_audit_id(dataset_id: str, scorer, item_set: str | None = None) -> str:
    """``vlstereoset-<scorer>-<model>-<hash8>``; the hash covers dataset, scorer, backend, model,
    version, config and, for a sub-sample, the item set (``paper:<seed>``): the paper's item set
    is another audit than the whole file (ids of whole-file audits are unchanged)."""
    payload = {
        "dataset": dataset_id,
        "scorer": scorer.name,
        "backend": scorer.backend_name,
        "model": scorer.model_id,
        "version": scorer.model_version,
        "config": scorer.config(),
    }
    if item_set is not None:
        payload["item_set"] = item_set
    short = {"vlstereo_text_caption_prior": "textprior"}.get(scorer.name, scorer.name)
    return readable_audit_id(f"vlstereoset-{short}", [(str(scorer.model_id).rstrip("/").split("/")[-1], 24)], payload)


def probe_vlstereoset(
    items: list[dict],
    scorer,
    *,
    audit_id: str | None = None,
    target: str | None = None,
    shard_rows: int = 32,
    progress: bool = True,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
    item_set: str | None = None,
    block: tuple[int, int] | None = None,
) -> VLStereoSetRunSummary:
    """Score every planned unit of ``items`` not landed yet for this audit, in shards.

    Args:
        items: landed item rows (:func:`landed_items`), all of one dataset.
        scorer: a scorer of :mod:`.scorers` (``name``, ``variants``, ``conditions``, ``score``, ...).
        audit_id: override :func:`vlstereoset_audit_id`. target: registry target (or None).
        shard_rows: units per landed shard.
        item_set: ``None`` for every item of the file, else the sub-sample's name (``paper:<seed>``,
            :func:`.dataset.paper_item_ids`): part of the audit id and recorded in its config.
        max_error_share: share of this run's score rows that may fail (``error``; ``no_image``
            and ``na`` are not failures) before the audit ends ``failed``; ``None``: no limit.
        block: ``(start, stop)``: score only ``items[start:stop]`` (one Dagster step of a blocked
            run; the audit's id and config still describe every item); its ``finished`` event is
            left to :func:`models_inference.resumable.finish_blocks` once every block has landed.

    Returns:
        A :class:`VLStereoSetRunSummary` (rows by status: ok / na / no_image / error).

    Raises:
        ValueError: no item, items of several datasets, ``shard_rows < 1``.
        Whatever the scorer raises, after a ``failed`` audit event (landed shards are kept).
        AuditFailedError: more than ``max_error_share`` of the rows failed (rows landed first).
    """
    if not items:
        raise ValueError("no VLStereoSet item to score")
    datasets = {it["dataset_id"] for it in items}
    if len(datasets) != 1:
        raise ValueError(f"items of several datasets given: {sorted(datasets)}")
    dataset_id = datasets.pop()
    audit_id = audit_id or vlstereoset_audit_id(dataset_id, scorer, item_set)

    def generate(chunk: list[Unit], advance: Callable[[int], None]) -> list[dict]:
        rows = _score_rows(chunk, scorer, dataset_id)
        advance(len(chunk))
        return rows

    config = {
        "dataset_id": dataset_id,
        "scorer": scorer.name,
        "variants": list(scorer.variants),
        "from_paper": scorer.from_paper,
        **scorer.config(),
        "item_set": item_set or "all",
        "items": len(items),
    }
    units = plan_units(items if block is None else items[block[0] : block[1]], scorer)
    key = lambda u: (dataset_id, scorer.name, u.item_id, u.condition)  # noqa: E731
    res = land_probe(
        units,
        key,
        generate,
        table=VLSTEREOSET_SCORES,
        backend=scorer,
        audit_id=audit_id,
        modality="vlstereoset",
        config=config,
        family=FAMILY,
        target=target,
        shard_rows=shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step=f"VLStereoSet {scorer.name}",
        block=None if block is None else f"items-{block[0]}-{block[1]}",
        time_column="scored_at",
    )
    return VLStereoSetRunSummary(audit_id, scorer.name, res.planned, res.already_landed, res.generated, res.statuses)


def _score_rows(chunk: list[Unit], scorer, dataset_id: str) -> list[dict]:
    """The landed ``vlstereoset_scores`` rows of a chunk of units: one per (unit, caption,
    variant); a unit without the image its scorer needs gets ``no_image`` rows, no call."""
    ready = [u for u in chunk if not (scorer.needs_image and u.image_path is None)]
    scored = dict(zip(map(id, ready), scorer.score(ready), strict=True)) if ready else {}
    rows = []
    for u in chunk:
        if id(u) in scored:
            scores = scored[id(u)]
        else:
            scores = [
                CaptionScore(k, v, None, "no_image", error="the item has no image with status ok")
                for k in CONDITION_KINDS[u.condition]
                for v in scorer.variants
            ]
        for s in scores:
            rows.append(
                {
                    "scorer": scorer.name,
                    "scorer_variant": s.variant,
                    "from_paper": scorer.from_paper,
                    "score_kind": scorer.score_kind,
                    "dataset_id": dataset_id,
                    "item_id": u.item_id,
                    "condition": u.condition,
                    "caption_kind": s.caption_kind,
                    "caption_text": u.captions[s.caption_kind],
                    "score": s.score if s.status == "ok" else None,
                    "n_tokens": s.n_tokens,
                    "status": s.status,
                    "error": s.error,
                    "detail_json": detail_json(s),
                }
            )
    return rows


__all__ = [
    "FINAL_SCORE_STATUSES",
    "VLSTEREOSET_SCORES",
    "VLStereoSetRunSummary",
    "blank_image",
    "land_items",
    "landed_items",
    "plan_units",
    "probe_vlstereoset",
    "vlstereoset_audit_id",
]
