"""ModSCAN vision modality: which face a VLM picks (seed 000 §3.1, §4; docs/families/modscan.md#vision-modality and docs/families/modscan.md#parsing-the-answers).

For every face pair (:mod:`models_inference.probes.modscan.faces`) x scenario instance x
prefix, the spliced image and "Tell me the spatial location of the <instance>." go to a
vision backend (transformers LLaVA-style chat or an OpenAI-compatible vision chat, the I2T
backends of :mod:`models_inference.i2t`); the answer is parsed as §3.1 (free-text left/right,
or MiniGPT-v2 / CogVLM boxes) and mapped to the group of the face on that side. Each row
records the pair (``pair_id`` = the spliced image's sha256, left/right face ids and groups).
Rows land in ``landing/modscan_responses`` through the shared resumable loop.

Generation ([UNDEFINED] in the paper, A.2.3; NOT FROM PAPER defaults): greedy-like sampling
is not available on every backend, so temperature 0.7 / top_p 0.95 with a per-query seed, 64
new tokens, one answer per query; stored on every row.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from ingestion.contracts.modscan import FAMILY
from ingestion.errors import InputFileError
from ingestion.quarantine import land_quarantine
from models_inference.audit_log import readable_audit_id
from models_inference.backends.base import RenderedPrompt, SamplingParams
from models_inference.backends.vision import DescriptionRequest, VisionBackend
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.image_store import image_file
from models_inference.probes.modscan.faces import FacePair, FaceSet, build_pairs, store_pair
from models_inference.probes.modscan.parsing import parse_side, strip_echo
from models_inference.probes.modscan.prompts import vision_prompt, with_prefix
from models_inference.probes.modscan.tables import ATTRIBUTES, PREFIXES, SCENARIOS
from models_inference.probes.modscan.text import MODSCAN_TABLE, spread
from models_inference.resumable import ResumableSummary, key_seed, land_probe


@dataclass
class VisionProbeConfig:
    """Parameters of a vision-modality run.

    Attributes:
        attributes, scenarios, prefixes: what to probe (Table 1, §7 / App. C prefixes).
        instances_per_scenario: k instances per scenario spread over Table 1 (0 = all, paper).
        per_group: pairs per group (paper: up to 20). seed: pairing and side seed.
        max_new_tokens, temperature, top_p: generation ([UNDEFINED] in the paper).
        shard_rows: rows per landed shard.
    """

    attributes: Sequence[str] = ATTRIBUTES
    scenarios: Sequence[str] = tuple(SCENARIOS)
    prefixes: Sequence[str] = ("none",)
    instances_per_scenario: int = 0
    per_group: int = 20
    seed: int = 0
    max_new_tokens: int = 64
    temperature: float = 0.7
    top_p: float = 0.95
    shard_rows: int = 64

    def validate(self) -> "VisionProbeConfig":
        """Raises ValueError naming the first bad field."""
        for name, values, allowed in (
            ("attributes", self.attributes, ATTRIBUTES),
            ("scenarios", self.scenarios, tuple(SCENARIOS)),
            ("prefixes", self.prefixes, tuple(PREFIXES)),
        ):
            bad = [v for v in values if v not in allowed]
            if bad or not values:
                raise ValueError(f"modscan vision {name}: {list(values)!r} must be a non-empty subset of {list(allowed)}")
        if self.per_group < 1:
            raise ValueError(f"modscan vision per_group must be >= 1, got {self.per_group}")
        return self


def vision_audit_id(backend: VisionBackend, config: VisionProbeConfig, faces: FaceSet) -> str:
    """``modscan-vision-<model>-<version>-<hash>`` of the generation parameters, pairing seed,
    pairs per group and the face ids used."""
    payload = {
        "backend": backend.backend_name,
        "model": backend.model_id,
        "seed": config.seed,
        "per_group": config.per_group,
        "max_new_tokens": config.max_new_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "faces": hashlib.sha256("|".join(sorted(f.face_id for f in faces.faces)).encode()).hexdigest(),
    }
    return readable_audit_id("modscan-vision", [(backend.model_id.split("/")[-1], 40), (backend.model_version, 20)], payload)


@dataclass(frozen=True)
class _Query:
    pair: FacePair
    scenario: str
    instance: str
    prefix: str

    def key(self) -> tuple:
        return ("modscan_vision", self.pair.attribute, self.scenario, self.instance, "original", self.prefix, self.pair.pair_key)


def _face_pairs(faces: FaceSet, cfg: VisionProbeConfig) -> list[FacePair]:
    """The face pairs of every attribute asked for. Raises InputFileError (one line with the
    counts) when none can be built."""
    pairs = [p for a in cfg.attributes for p in build_pairs(faces.faces, a, per_group=cfg.per_group, seed=cfg.seed)]
    if not pairs:
        raise InputFileError(
            f"no face pair could be built for {list(cfg.attributes)} from {len(faces.faces)} usable faces "
            f"({len(faces.problems)} invalid, filtered out: {dict(faces.filtered) or 0}): a gender pair needs a male and a "
            "female face of one age and race, a race pair two races of one age and gender"
        )
    return pairs


def _planned_queries(pairs: list[FacePair], cfg: VisionProbeConfig) -> list[_Query]:
    """Every (pair, scenario, instance, prefix) query of the audit, in plan order."""
    return [
        _Query(pair, scenario, instance, prefix)
        for pair in pairs
        for scenario in cfg.scenarios
        for instance, prefix in itertools.product(spread(SCENARIOS[scenario], cfg.instances_per_scenario), cfg.prefixes)
    ]


def probe_vision(
    backend: VisionBackend,
    faces: FaceSet,
    config: VisionProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    target: str | None = None,
    progress: bool = True,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
) -> tuple[str, ResumableSummary]:
    """Ask ``backend`` about every (pair, instance, prefix) not landed yet; land the answers.

    Args:
        target: registry target recorded on the audit events (``None``: ad hoc).
        max_error_share: share of this run's calls that may fail (``error`` rows) before the
            audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`); ``None``: no limit.

    Returns:
        (audit id, :class:`~models_inference.resumable.ResumableSummary`).

    Raises:
        ValueError: invalid config. InputFileError: no face pair can be built from ``faces``
            (one line with the counts; the invalid faces are in ``landing/input_quarantine``).
        AuditFailedError: more than ``max_error_share`` of the queries failed (rows landed first).
    """
    cfg = (config or VisionProbeConfig()).validate()
    # the faces that could not be read land first, so they are visible even if no pair can be built
    land_quarantine("modscan", faces.dataset_id, faces.quarantined())
    pairs = _face_pairs(faces, cfg)
    audit_id = audit_id or vision_audit_id(backend, cfg, faces)
    params = {
        "max_new_tokens": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "prompt_style": "chat",
        "per_group": cfg.per_group,
        "pair_seed": cfg.seed,
    }
    sampling = SamplingParams(cfg.temperature, cfg.top_p)
    stored: dict[str, object] = {}

    def generate(chunk: list[_Query], advance: Callable[[int], None]) -> list[dict]:
        for q in chunk:
            if q.pair.pair_key not in stored:
                stored[q.pair.pair_key] = store_pair(q.pair)
        prompts = [with_prefix(q.prefix, vision_prompt(q.instance)) for q in chunk]
        seeds = [key_seed(audit_id, *q.key()) for q in chunk]
        requests = [
            DescriptionRequest(image_file(stored[q.pair.pair_key].path), RenderedPrompt("chat", p), s, cfg.max_new_tokens)
            for q, p, s in zip(chunk, prompts, seeds, strict=True)
        ]
        results = backend.describe(requests, sampling, on_batch=advance)
        rows = []
        for q, prompt, seed, res in zip(chunk, prompts, seeds, results, strict=True):
            rows.append(_vision_row(q, prompt, seed, res, stored[q.pair.pair_key], params, cfg))
        return rows

    planned = _planned_queries(pairs, cfg)
    config = {**asdict(cfg), "faces_kept": len(faces.faces), "faces_invalid": len(faces.problems), "faces_filtered": dict(faces.filtered)}
    result = land_probe(
        planned,
        _Query.key,
        generate,
        table=MODSCAN_TABLE,
        backend=backend,
        audit_id=audit_id,
        modality="modscan_vision",
        config=config,
        family=FAMILY,
        target=target,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step="ModSCAN vision modality",
    )
    return audit_id, result


def _vision_row(q: _Query, prompt: str, seed: int, res, image, params: dict, cfg: VisionProbeConfig) -> dict:
    """The landed ``modscan_responses`` row of one (pair, instance, prefix) query and its answer
    (``image``: the pair's stored picture)."""
    if res.error:
        answer, parsed, chosen, status = None, None, None, "error"
    else:
        answer = strip_echo(res.text, prompt)
        parsed = parse_side(answer)
        status = parsed.status
        chosen = {"left": q.pair.group(q.pair.left), "right": q.pair.group(q.pair.right)}.get(parsed.choice)
    return {
        "probe": "modscan_vision",
        "modality": "vision",
        "attribute": q.pair.attribute,
        "scenario": q.scenario,
        "instance": q.instance,
        "condition": "original",
        "prefix": q.prefix,
        "query_unit": q.pair.pair_key,
        "sample": 1,
        "seed": seed,
        "term_order": None,
        "left_group": q.pair.group(q.pair.left),
        "right_group": q.pair.group(q.pair.right),
        "pair_id": image.sha256,
        "left_face_id": q.pair.left.face_id,
        "right_face_id": q.pair.right.face_id,
        "image_sha256": image.sha256,
        "prompt_style": "chat",
        "prompt": prompt,
        "raw_output": None if res.error else res.text,
        "answer": answer,
        "parse_method": parsed.method if parsed else None,
        "parsed_choice": parsed.choice if parsed else None,
        "chosen_group": chosen,
        "status": status,
        "error": res.error,
        "generation_params": json.dumps(params, sort_keys=True),
        "answer_mode": "free",  # the paper's free answer, parsed
        "deviation": None if cfg.instances_per_scenario == 0 else f"NOT FROM PAPER: {cfg.instances_per_scenario} instances per scenario",
    }


__all__ = ["VisionProbeConfig", "probe_vision", "vision_audit_id"]
