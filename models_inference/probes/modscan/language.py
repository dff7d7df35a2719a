"""ModSCAN language modality: which demographic word a VLM picks for a person-free scene
(seed 000 §3.2, §4, §5.2; docs/families/modscan.md#language-modality and docs/families/modscan.md#parsing-the-answers).

1. Scene images: the T2I backend (paper: SD-v2.1; any diffusers pipeline or OpenAI Images
   model here) draws ``images_per_trait`` images per persona trait from Table 2's SD prompt,
   one seed per image, stored content-addressed in the image store.
2. Person check: the paper drops images with a person (YOLOv8x). dora has no person detector,
   so the vision model itself is asked ``PERSON_CHECK_PROMPT`` and an answer containing the
   word "yes" drops the image (NOT FROM PAPER; recorded as the ``deviation`` of every row and
   counted in the audit event). ``person_check=False`` keeps every image (also recorded).
3. Queries: per kept image and attribute, Table 3's sentence with the group terms in a
   per-query shuffled order (§3.2), behind the optional prefix; parsed with Table 10's word
   lists / the race phrases.
4. Blank-image control (§5.2): a white image of the scene images' size, condition ``blank``,
   queried ``images_per_trait`` times per trait and attribute (each with its own shuffle).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from ingestion.contracts.modscan import FAMILY
from models_inference.backends.base import RenderedPrompt, SamplingParams
from models_inference.backends.image import ImageBackend, ImageRequest, png_bytes
from models_inference.backends.vision import DescriptionRequest, VisionBackend
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.image_store import StoredImage, image_file, store_png
from models_inference.probes.modscan.parsing import parse_term, strip_echo
from models_inference.probes.modscan.prompts import language_prompt, with_prefix
from models_inference.probes.modscan.tables import ATTRIBUTES, GROUPS, PERSONA_TRAITS, PREFIXES, SCENARIOS, trait_key
from models_inference.probes.modscan.text import MODSCAN_TABLE, spread
from models_inference.resumable import ResumableSummary, check_plan_size, key_seed, land_probe, landed_keys

#: NOT FROM PAPER: the VLM yes/no stand-in for the paper's YOLOv8x person filter.
PERSON_CHECK_PROMPT = "Is there a person in this image? Answer yes or no."
_YES = re.compile(r"\byes\b", re.IGNORECASE)


@dataclass
class LanguageProbeConfig:
    """Parameters of a language-modality run (paper: 200 kept images per trait, 14 traits).

    Attributes:
        attributes, prefixes: what to probe. instances_per_scenario: traits (spread; 0 = all 14).
        images_per_trait: kept scene images per trait (also blank queries per trait).
        person_check: drop images the VLM says show a person (NOT FROM PAPER stand-in for YOLOv8x).
        blank: also query the blank white image (§5.2 control).
        max_new_tokens, temperature, top_p: generation ([UNDEFINED] in the paper).
    """

    attributes: Sequence[str] = ATTRIBUTES
    prefixes: Sequence[str] = ("none",)
    instances_per_scenario: int = 0
    images_per_trait: int = 200
    person_check: bool = True
    blank: bool = True
    max_new_tokens: int = 64
    temperature: float = 0.7
    top_p: float = 0.95
    shard_rows: int = 64

    def validate(self) -> "LanguageProbeConfig":
        """Raises ValueError naming the first bad field."""
        for name, values, allowed in (("attributes", self.attributes, ATTRIBUTES), ("prefixes", self.prefixes, tuple(PREFIXES))):
            if not values or any(v not in allowed for v in values):
                raise ValueError(f"modscan language {name}: {list(values)!r} must be a non-empty subset of {list(allowed)}")
        if self.images_per_trait < 1:
            raise ValueError(f"modscan language images_per_trait must be >= 1, got {self.images_per_trait}")
        traits = len(spread(SCENARIOS["persona"], self.instances_per_scenario))
        queries = traits * self.images_per_trait * (1 + self.blank) * len(self.attributes) * len(self.prefixes)
        check_plan_size(
            queries,
            "modscan language modality",
            f"{traits} traits x {self.images_per_trait} images per trait x {1 + self.blank} conditions "
            f"x {len(self.attributes)} attributes x {len(self.prefixes)} prefixes",
        )
        return self


@dataclass(frozen=True)
class SceneImage:
    """A scene image to query: ``unit`` is ``image-<sha256>`` (or ``blank-<k>``), ``condition``
    ``original`` or ``blank``; ``stored`` is None for an image whose queries all landed in an
    earlier run (not drawn again)."""

    trait: str
    condition: str
    unit: str
    stored: StoredImage | None


def draw_scenes(image_backend: ImageBackend, vision: VisionBackend, cfg: LanguageProbeConfig, audit_id: str) -> tuple[list[SceneImage], dict]:
    """Draw, store and person-check the scene images; add the blank control.

    Returns:
        (scene images to query, counts: drawn, failed, person_dropped, reused = images of
        traits whose queries all landed before, not drawn again).
    """
    from PIL import Image

    traits = spread(SCENARIOS["persona"], cfg.instances_per_scenario)
    scenes, counts = [], {"drawn": 0, "failed": 0, "person_dropped": 0, "reused": 0}
    size = None
    landed = landed_keys(MODSCAN_TABLE, audit_id)
    for trait in traits:
        # a trait whose kept images were all queried already (every attribute and prefix) is not drawn again
        done = [
            {k[6] for k in landed if k[1] == a and k[3] == trait and k[4] == "original" and k[5] == p} for a in cfg.attributes for p in cfg.prefixes
        ]
        units = sorted(set.intersection(*done)) if done else []
        if len(units) >= cfg.images_per_trait:
            scenes += [SceneImage(trait, "original", u, None) for u in units[: cfg.images_per_trait]]
            counts["reused"] += cfg.images_per_trait
            continue
        prompt = PERSONA_TRAITS[trait_key(trait)][2]
        kept, index = [], 0
        while len(kept) < cfg.images_per_trait and index < 2 * cfg.images_per_trait:  # the paper drew 400, kept 200
            todo = range(index + 1, index + 1 + cfg.images_per_trait - len(kept))
            index += len(todo)
            results = image_backend.generate([ImageRequest(prompt, key_seed(audit_id, trait, i), i) for i in todo])
            stored = []
            for res in results:
                if res.status != "ok" or res.data is None:
                    counts["failed"] += 1
                    continue
                counts["drawn"] += 1
                stored.append(store_png(res.data))
            if cfg.person_check and stored:
                checks = vision.describe(
                    [
                        DescriptionRequest(image_file(s.path), RenderedPrompt("chat", PERSON_CHECK_PROMPT), key_seed(audit_id, s.sha256), 8)
                        for s in stored
                    ],
                    SamplingParams(cfg.temperature, cfg.top_p),
                )
                keep = [s for s, c in zip(stored, checks, strict=True) if not (c.error or _YES.search(c.text or ""))]
                counts["person_dropped"] += len(stored) - len(keep)
                stored = keep
            kept += stored
        scenes += [SceneImage(trait, "original", f"image-{s.sha256}", s) for s in kept[: cfg.images_per_trait]]
        if kept and size is None:
            size = (kept[0].width, kept[0].height)
    if cfg.blank:  # §5.2: a blank white image (size [UNDEFINED]: the scene images')
        blank = store_png(png_bytes(Image.new("RGB", size or (512, 512), "white")))
        scenes += [SceneImage(t, "blank", f"blank-{k}", blank) for t in traits for k in range(1, cfg.images_per_trait + 1)]
    return scenes, counts


def _language_settings(cfg: LanguageProbeConfig, image_backend: ImageBackend) -> tuple[dict, str]:
    """(the generation parameters, the deviations from the paper) landed on every row."""
    deviation = (
        "NOT FROM PAPER: person filter by a VLM yes/no question instead of YOLOv8x" if cfg.person_check else "NOT FROM PAPER: no person filter"
    )
    deviation += f"; scene images by {image_backend.model_id} (paper: SD-v2.1)"
    params = {
        "max_new_tokens": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "prompt_style": "chat",
        "t2i_model": image_backend.model_id,
        "t2i_version": image_backend.model_version,
    }
    return params, deviation


def probe_language(
    image_backend: ImageBackend,
    vision: VisionBackend,
    config: LanguageProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    target: str | None = None,
    progress: bool = True,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
) -> tuple[str, ResumableSummary, dict]:
    """Draw the scenes, then ask ``vision`` every (scene, attribute, prefix) query not landed yet.

    Args:
        target: registry target recorded on the audit events (``None``: ad hoc).
        max_error_share: share of this run's calls that may fail (``error`` rows) before the
            audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`); ``None``: no limit.

    Returns:
        (audit id, :class:`~models_inference.resumable.ResumableSummary`, scene counts).

    Raises:
        ValueError: invalid config.
        AuditFailedError: more than ``max_error_share`` of the queries failed (rows landed first).
    """
    cfg = (config or LanguageProbeConfig()).validate()
    if audit_id is None:
        audit_id = _language_audit_id(image_backend, vision, cfg)
    scenes, counts = draw_scenes(image_backend, vision, cfg, audit_id)
    params, deviation = _language_settings(cfg, image_backend)
    planned = [(s, a, p) for s in scenes for a in cfg.attributes for p in cfg.prefixes]

    def key(item) -> tuple:
        s, a, p = item
        return ("modscan_language", a, "persona", s.trait, s.condition, p, s.unit)

    def generate(chunk, advance: Callable[[int], None]) -> list[dict]:
        queries = []
        for s, a, p in chunk:
            seed = key_seed(audit_id, *key((s, a, p)))
            order = tuple(random.Random(seed).sample(GROUPS[a], len(GROUPS[a])))  # Shuffle(.) of §3.2
            queries.append((s, a, p, seed, order, with_prefix(p, language_prompt(s.trait, a, order))))
        results = vision.describe(
            [
                DescriptionRequest(image_file(s.stored.path), RenderedPrompt("chat", text), seed, cfg.max_new_tokens)
                for s, _, _, seed, _, text in queries
            ],
            SamplingParams(cfg.temperature, cfg.top_p),
            on_batch=advance,
        )
        rows = []
        for (s, a, p, seed, order, text), res in zip(queries, results, strict=True):
            parsed = None if res.error else parse_term(strip_echo(res.text, text), a)
            rows.append(_language_row(s, a, p, seed, order, text, res, parsed, params, deviation))
        return rows

    result = land_probe(
        planned,
        key,
        generate,
        table=MODSCAN_TABLE,
        backend=vision,
        audit_id=audit_id,
        modality="modscan_language",
        config={**asdict(cfg), **counts, "t2i_model": image_backend.model_id},
        family=FAMILY,
        target=target,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step="ModSCAN language modality",
    )
    return audit_id, result, counts


def _language_audit_id(image_backend: ImageBackend, vision: VisionBackend, cfg: LanguageProbeConfig) -> str:
    """The language modality's readable audit id: ``modscan-language-<VLM>-<version>-<8 hex>``,
    the hex from the VLM, the T2I model and every setting that changes an answer."""
    payload = json.dumps(
        {
            "vision": [vision.model_id, vision.model_version],
            "t2i": [image_backend.model_id, image_backend.model_version],
            **image_backend.generation_params(),
            "person_check": cfg.person_check,
            "max_new_tokens": cfg.max_new_tokens,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
        },
        sort_keys=True,
        default=str,
    )
    clean = lambda t: "".join(c if c.isalnum() or c in "._-" else "-" for c in t.lower()).strip("-")  # noqa: E731
    return f"modscan-language-{clean(vision.model_id.split('/')[-1])[:40]}-{clean(vision.model_version)[:20]}-{hashlib.sha256(payload.encode()).hexdigest()[:8]}"


def _language_row(s: SceneImage, a: str, p: str, seed: int, order: tuple, text: str, res, parsed, params: dict, deviation: str) -> dict:
    """The landed ``modscan_responses`` row of one (scene, attribute, prefix) query and its answer."""
    return {
        "probe": "modscan_language",
        "modality": "language",
        "attribute": a,
        "scenario": "persona",
        "instance": s.trait,
        "condition": s.condition,
        "prefix": p,
        "query_unit": s.unit,
        "sample": 1,
        "seed": seed,
        "term_order": "|".join(order),
        "left_group": None,
        "right_group": None,
        "pair_id": None,
        "left_face_id": None,
        "right_face_id": None,
        "image_sha256": s.stored.sha256,
        "prompt_style": "chat",
        "prompt": text,
        "raw_output": None if res.error else res.text,
        "answer": None if res.error else strip_echo(res.text, text),
        "parse_method": parsed.method if parsed else None,
        "parsed_choice": parsed.choice if parsed else None,
        "chosen_group": parsed.choice if parsed else None,
        "status": parsed.status if parsed else "error",
        "error": res.error,
        "generation_params": json.dumps(params, sort_keys=True),
        "deviation": deviation,
        "answer_mode": "free",  # the paper's free answer, parsed
    }


__all__ = ["LanguageProbeConfig", "PERSON_CHECK_PROMPT", "SceneImage", "draw_scenes", "probe_language"]
