"""The I2T probe: objective and subjective descriptions of the T2I images (BiasDora
Sections 2.2-2.3, Appendix A.10, Figures 10-11; docs/method.md#2-probes).

Every image of an image audit (``landing/t2i_images``, status ``ok``) is described once per
description setting with the paper's prompts (:data:`models_inference.probes.biasdora.prompts.I2T_PROMPTS`):
the objective settings (straightforward, moderate, comprehensive; the paper kept
comprehensive) give the T2I associations, the subjective settings (subjective,
stereotypical, implicit, lexical) the I2T associations. Sampling: temperature 0.7,
top_p 0.95, at most 200 new tokens (docs/method.md#2-probes).

Backends: :mod:`models_inference.backends.vision` (transformers VLMs, OpenAI vision chat).

Rows land in ``landing/i2t_descriptions`` keyed by (audit_id, image_setting, descriptor,
image_index, setting); a re-run describes only keys without a non-error row, so an
interrupted audit resumes and failed calls are retried.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ingestion.contracts.biasdora import FAMILY
from ingestion.landing import landing_dir
from ingestion.vocabulary import DEFAULT_I2T_SETTINGS
from models_inference.audit_log import readable_audit_id
from models_inference.backends.base import GenerationResult, SamplingParams
from models_inference.backends.vision import DescriptionRequest, VisionBackend
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.image_store import image_file
from models_inference.probes.biasdora.prompts import (
    PAPER_I2T_MAX_NEW_TOKENS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
    description_kind,
    render_i2t_prompt,
)
from models_inference.resumable import ResumableSummary, ResumableTable, key_seed, land_probe

#: Description statuses that count as done (a re-run does not describe them again).
FINAL_DESCRIPTION_STATUSES = ("ok", "truncated", "empty")
#: Where descriptions land; an (image_setting, descriptor, image_index, setting) key is done
#: once it has a row with a final status (``error`` rows are retried).
I2T_TABLE = ResumableTable(
    "i2t_descriptions",
    ("image_setting", "descriptor", "descriptor_row", "image_index", "setting"),
    "status",
    FINAL_DESCRIPTION_STATUSES,
    null_defaults=(("descriptor_row", 1),),
    unit="description",
    error_column="error",
)


# ----------------------------------------------------------------------------- the probe


@dataclass
class I2TProbeConfig:
    """Parameters of an I2T probe run.

    Attributes:
        settings: description settings (default: comprehensive + the 4 subjective ones).
        max_new_tokens, temperature, top_p: generation (paper: 200, 0.7, 0.95).
        shard_rows: descriptions per landed Parquet shard.
    """

    settings: tuple[str, ...] = DEFAULT_I2T_SETTINGS
    max_new_tokens: int = PAPER_I2T_MAX_NEW_TOKENS
    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    shard_rows: int = 32

    def validate(self) -> "I2TProbeConfig":
        self.settings = tuple(self.settings)
        if not self.settings:
            raise ValueError("no description setting selected")
        for s in self.settings:
            description_kind(s)  # raises on an unknown setting
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        return self

    def fingerprint(self) -> dict:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p}


@dataclass
class I2TRunSummary(ResumableSummary):
    """What an I2T run did: :class:`~models_inference.resumable.ResumableSummary` (statuses:
    description statuses) plus the image audit described and how many of its images."""

    image_audit_id: str = ""
    images: int = 0


def description_audit_id_for(backend: VisionBackend, image_audit_id: str, t2i_model_id: str, config: I2TProbeConfig) -> str:
    """Deterministic description audit id ``vision-<t2i model>-<i2t model>-<hash8>``.

    The hash covers the image audit, the I2T backend, model and version, and the sampling
    parameters: describing the same images with the same model extends the same audit.
    """
    payload = {
        "images": image_audit_id,
        "backend": backend.backend_name,
        "model": backend.model_id,
        "version": backend.model_version,
        **config.fingerprint(),
    }
    params = getattr(backend, "description_params", dict)()
    if params:  # only when set (system prompt, image size): earlier audits keep their id
        payload["params"] = params
    names = [(m.rstrip("/").split("/")[-1], 24) for m in (t2i_model_id, backend.model_id)]
    return readable_audit_id("vision", names, payload)


def description_seed(audit_id: str, image_setting: str, descriptor: str, image_index: int, setting: str) -> int:
    """Per-description seed: 63-bit blake2b of the row key."""
    return key_seed(audit_id, "i2t", image_setting, descriptor, image_index, setting)


def landed_images(image_audit_id: str) -> list[dict]:
    """The latest row of every image key of an image audit whose status is ``ok``, in key order."""
    import duckdb

    from ingestion.landing import landing_glob
    from ingestion.landing_location import register_landing

    landing_dir("t2i_images")
    sql = """
        select * from read_parquet(?, union_by_name = true)
        where audit_id = ?
        qualify row_number() over (
            partition by setting, descriptor, coalesce(descriptor_row, 1), image_index order by generated_at desc
        ) = 1
        order by setting, descriptor, coalesce(descriptor_row, 1), image_index
    """
    with duckdb.connect() as con:
        register_landing(con)
        rows = con.sql(sql, params=[landing_glob("t2i_images"), image_audit_id]).to_arrow_table().to_pylist()
    for r in rows:
        r["descriptor_row"] = r.get("descriptor_row") or 1
    return [r for r in rows if r["status"] == "ok" and r["image_path"]]


def probe_i2t(
    image_audit_id: str,
    backend: VisionBackend,
    config: I2TProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
) -> I2TRunSummary:
    """Describe every ``ok`` image of an image audit in each setting, landing missing rows.

    Args:
        image_audit_id: the T2I audit whose images to describe (``landing/t2i_images``).
        backend: a :class:`VisionBackend`.
        config: :class:`I2TProbeConfig`.
        audit_id: override :func:`description_audit_id_for`.
        progress: tqdm bar on stderr.
        max_error_share: share of this run's descriptions that may fail (``error`` rows) before
            the audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`); ``None``: no limit.

    Returns:
        An :class:`I2TRunSummary`; statuses: ``ok``, ``truncated`` (hit max_new_tokens; its
        words still count), ``empty``, ``error`` (retried next run). Rows land in shards of
        ``config.shard_rows`` (:func:`models_inference.resumable.land_resumable`); the audit
        gets ``started`` / ``finished`` events, or ``failed`` (then the exception is re-raised).

    Raises:
        ValueError: invalid config (incl. ``shard_rows < 1``), or the image audit has no
            ``ok`` image.
        ModelNotAvailableError: the backend cannot run (e.g. API key unset).
        AuditFailedError: more than ``max_error_share`` of the descriptions failed (rows landed first).
    """
    cfg = (config or I2TProbeConfig()).validate()
    images = landed_images(image_audit_id)
    if not images:
        raise ValueError(f"image audit {image_audit_id!r} has no image with status 'ok' to describe")
    t2i_model_id, t2i_version = images[0]["model_id"], images[0]["model_version"]
    audit_id = audit_id or description_audit_id_for(backend, image_audit_id, t2i_model_id, cfg)
    sampling = SamplingParams(cfg.temperature, cfg.top_p)

    def generate(chunk: list[tuple[dict, str]], advance: Callable[[int], None]) -> list[dict]:
        requests, results = _describe_chunk(chunk, backend, audit_id, cfg, sampling, advance)
        # the shard's time makes a retried key's description a new id; generated_at is stamped by land_probe
        now = datetime.now(timezone.utc)
        origin = (image_audit_id, t2i_model_id, t2i_version)
        return [
            _description_row(img, setting, req, results[n], audit_id, origin, now)
            for n, ((img, setting), req) in enumerate(zip(chunk, requests, strict=True))
        ]

    event_cfg = {"image_audit_id": image_audit_id, "t2i_model_id": t2i_model_id, "settings": list(cfg.settings), **cfg.fingerprint()}
    planned = [(img, setting) for img in images for setting in cfg.settings]
    key = lambda item: (item[0]["setting"], item[0]["descriptor"], item[0]["descriptor_row"], item[0]["image_index"], item[1])  # noqa: E731
    result = land_probe(
        planned,
        key,
        generate,
        table=I2T_TABLE,
        backend=backend,
        audit_id=audit_id,
        modality="i2t",
        config=event_cfg,
        family=FAMILY,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step="BiasDora I2T",
    )
    return I2TRunSummary(**vars(result), image_audit_id=image_audit_id, images=len(images))


def _describe_chunk(chunk: list[tuple[dict, str]], backend: VisionBackend, audit_id: str, cfg: I2TProbeConfig, sampling, advance):
    """(one request per (image, setting), its result by position): an image whose stored path is
    not usable gets an error result without a model call."""
    requests, bad = [], {}
    for n, (img, setting) in enumerate(chunk):
        row = img["descriptor_row"]
        seed = description_seed(audit_id, img["setting"], img["descriptor"] + (f"|row{row}" if row != 1 else ""), img["image_index"], setting)
        try:
            path = image_file(img["image_path"])
        except ValueError as exc:
            bad[n] = str(exc)
            path = Path("/nonexistent")
        requests.append(DescriptionRequest(path, render_i2t_prompt(setting), seed, cfg.max_new_tokens))
    ok_idx = [n for n in range(len(chunk)) if n not in bad]
    answers = backend.describe([requests[n] for n in ok_idx], sampling, on_batch=advance)
    results: dict[int, GenerationResult] = dict(zip(ok_idx, answers, strict=True))
    for n, msg in bad.items():
        results[n] = GenerationResult("", True, msg)
        advance(1)
    return requests, results


def _description_row(img: dict, setting: str, req, res, audit_id: str, origin: tuple[str, str, str], now: datetime) -> dict:
    """The landed ``i2t_descriptions`` row of one image described in ``setting`` (``origin``: the
    image audit, its T2I model and version)."""
    image_audit_id, t2i_model_id, t2i_version = origin
    if res.error:
        status = "error"
    elif not res.text.strip():
        status = "empty"
    elif not res.finished:
        status = "truncated"
    else:
        status = "ok"
    row = f"|row{img['descriptor_row']}" if img["descriptor_row"] != 1 else ""
    key = f"{audit_id}|{img['setting']}|{img['descriptor']}{row}|{img['image_index']}|{setting}|{now.isoformat()}"
    return {
        "description_id": hashlib.blake2b(key.encode(), digest_size=16).hexdigest(),
        "image_audit_id": image_audit_id,
        "t2i_model_id": t2i_model_id,
        "t2i_model_version": t2i_version,
        "image_setting": img["setting"],
        "descriptor": img["descriptor"],
        "bias_dimension": img["bias_dimension"],
        "descriptor_row": img["descriptor_row"],
        "image_index": img["image_index"],
        "image_sha256": img["sha256"],
        "setting": setting,
        "description_kind": description_kind(setting),
        "seed": req.seed,
        "prompt": req.prompt.text,
        "raw_output": res.text if not res.error else None,
        "status": status,
        "error": res.error,
    }


__all__ = [
    "FINAL_DESCRIPTION_STATUSES",
    "I2TProbeConfig",
    "I2TRunSummary",
    "I2T_TABLE",
    "description_audit_id_for",
    "description_seed",
    "landed_images",
    "probe_i2t",
]
