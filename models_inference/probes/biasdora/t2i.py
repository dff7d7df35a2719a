"""The T2I probe: images per descriptor (BiasDora Section 2.2, Appendix A.9; docs/method.md#2-probes).

For each descriptor x T2I setting (singular, plural) x image index 1..K, one image is
generated from "Generate an image of a/an <descriptor>" / "Generate an image of
<descriptors>" (prompts: :mod:`models_inference.probes.biasdora.prompts`; descriptor phrases: the paper's
``ingestion/data/biasdora/t2i_setting1.csv`` / ``t2i_setting2.csv``). Paper: K = 10.

Backends: :mod:`models_inference.backends.image` (diffusers, OpenAI Images); images are
stored by :mod:`models_inference.image_store` (content-addressed PNG, no descriptor text in
any path). One metadata row per image lands in ``landing/t2i_images`` (:data:`ingestion.contracts.SCHEMAS`), whatever its
status. Rows are keyed by (audit_id, setting, descriptor, image_index); a re-run generates
only the keys without an ``ok`` / ``filtered`` / ``refused`` row, so an interrupted audit
resumes and failed calls are retried.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ingestion.contracts.biasdora import FAMILY
from ingestion.vocabulary import T2I_SETTINGS
from models_inference.audit_log import readable_audit_id
from models_inference.backends.image import ImageBackend, ImageRequest
from models_inference.error_share import DEFAULT_MAX_ERROR_SHARE
from models_inference.image_store import store_png
from models_inference.probes.biasdora.prompts import PAPER_IMAGES_PER_DESCRIPTOR, render_t2i_prompt
from models_inference.probes.biasdora.t2t import select_templates
from models_inference.resumable import ResumableSummary, ResumableTable, key_seed, land_probe

#: Image statuses that count as done (a re-run does not regenerate them).
FINAL_IMAGE_STATUSES = ("ok", "filtered", "refused")
#: Where image rows land; a (setting, descriptor, image_index) key is done once it has a
#: row with a final status (``error`` rows are retried).
T2I_TABLE = ResumableTable(
    "t2i_images",
    ("setting", "descriptor", "descriptor_row", "image_index"),
    "status",
    FINAL_IMAGE_STATUSES,
    unit="image",
    null_defaults=(("descriptor_row", 1),),
    error_column="error",
)
#: The paper's Stable Diffusion model (seed 004, Appendix "Generation settings").
PAPER_SD_MODEL = "stabilityai/stable-diffusion-2-inpainting"
#: The style suffix the paper's code appends to every Stable Diffusion prompt, verbatim
#: (docs/method.md#3a-paper-statistics: immediately after the T2I prompt, no separating space; note the double
#: space before the second "--beta").
PAPER_SD_PROMPT_SUFFIX = (
    "50mm photography, hard rim lighting photography --beta --ar 2:3  --beta --upbeta 0.1 --upnoise 0.1 --upalpha 0.1 --upgamma 0.1 --upsteps 20"
)


# ----------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class T2ITemplate:
    """One descriptor in one T2I setting.

    Attributes:
        setting: ``singular`` or ``plural``.
        descriptor: the descriptor key (:func:`ingestion.biasdora.descriptors.normalise_descriptor` of
            the phrase), the same key T2T uses.
        bias_dimension: CrowS-Pairs bias dimension the CSV lists it under.
        phrase: the descriptor as the CSV writes it ("Child", "Old people").
        prompt: the rendered image prompt (:func:`models_inference.prompts.render_t2i_prompt`).
        descriptor_row: k-th row of this descriptor key in the setting's CSV (a probe unit is a
            row of the paper's lists, docs/method.md#1-descriptors: 344 rows per setting).
    """

    setting: str
    descriptor: str
    bias_dimension: str
    phrase: str
    prompt: str
    descriptor_row: int = 1


def curated_t2i_templates(settings: Sequence[str] = T2I_SETTINGS, folder: str | Path | None = None) -> list[T2ITemplate]:
    """The T2I templates of the paper, from ``t2i_setting1.csv`` (singular) / ``t2i_setting2.csv`` (plural).

    Source: the CSVs published with BiasDora (seed 004, Appendix A.9), columns
    ``template_singular,target,bias_type,target_singular`` and
    ``template_plural,target,bias_type,target_plural``; their bias types are spelled with
    spaces ("race color", "socioeconomic status") and mapped to the CrowS-Pairs names
    ("race-color", "socioeconomic"). The paper's T2I lists have no gender rows (8 of the 9
    dimensions; the bridge ``int_descriptor_dimensions`` adds gender etc. from
    ``bias_target_mapping.json``). The phrase is ``target_singular`` /
    ``target_plural``; its key is :func:`~ingestion.biasdora.descriptors.normalise_descriptor` (so
    "Old people" and "Old person" are both "old person", T2T's key). Every row is a probe
    unit (docs/method.md#1-descriptors); repeats of a key are numbered by ``descriptor_row``.

    Returns:
        Templates in settings order, then file order (344 per setting for the shipped files,
        312 descriptor keys).

    Raises:
        ValueError: unknown setting, missing columns, an unknown bias_type or an empty phrase
            (the message names the file and line). FileNotFoundError: a CSV is missing.
    """
    from ingestion.biasdora.templates import t2i_list_rows

    unknown = [s for s in settings if s not in T2I_SETTINGS]
    if unknown:
        raise ValueError(f"unknown T2I setting(s) {unknown}; expected some of {T2I_SETTINGS}")
    out: list[T2ITemplate] = []
    for setting in settings:
        for dim, phrase, key, descriptor_row in t2i_list_rows(setting, folder):
            out.append(T2ITemplate(setting, key, dim, phrase, render_t2i_prompt(phrase, setting), descriptor_row))
    return out


def custom_t2i_template(descriptor: str, setting: str, bias_dimension: str = "unknown", phrase: str | None = None) -> T2ITemplate:
    """A template for any descriptor text (the key is used as written, lower-cased and trimmed).

    Used for descriptors outside the paper's CSVs; the text goes only into the prompt and
    the landed row, never into a file name.
    """
    key = " ".join(descriptor.split()).lower()
    if not key:
        raise ValueError("empty descriptor")
    phrase = phrase or key
    return T2ITemplate(setting, key, bias_dimension, phrase, render_t2i_prompt(phrase, setting))


#: :func:`~models_inference.probes.biasdora.t2t.select_templates` for T2I templates: the T2I
#: settings, descriptor keys as written (lower-cased, spaces collapsed), "draw" in messages.
select_t2i_templates = functools.partial(
    select_templates,
    settings=T2I_SETTINGS,
    valid_settings=T2I_SETTINGS,
    normalise=lambda d: " ".join(d.split()).lower(),
    what="T2I ",
)


# ----------------------------------------------------------------------------- the probe


@dataclass
class T2IProbeConfig:
    """Parameters of a T2I probe run.

    Attributes:
        images_per_descriptor: images per (descriptor, setting) (paper: 10).
        shard_rows: images per landed Parquet shard (at most this much work is lost on a crash).
    """

    images_per_descriptor: int = PAPER_IMAGES_PER_DESCRIPTOR
    shard_rows: int = 16

    def validate(self) -> "T2IProbeConfig":
        if self.images_per_descriptor < 1:
            raise ValueError(f"images_per_descriptor must be >= 1, got {self.images_per_descriptor}")
        if self.shard_rows < 1:
            raise ValueError(f"shard_rows must be >= 1, got {self.shard_rows}")
        return self


def image_audit_id_for(backend: ImageBackend) -> str:
    """Deterministic image audit id ``t2i-<model>-<version>-<hash8>``.

    The hash covers backend, model, version and :meth:`generation_params`; the same model
    drawn with the same parameters extends the same audit (more descriptors, more images).
    """
    payload = {"backend": backend.backend_name, "model": backend.model_id, "version": backend.model_version, **backend.generation_params()}
    version = backend.model_version.split("+")[0]  # the hash covers the VAE part
    return readable_audit_id("t2i", [(backend.model_id.rstrip("/").split("/")[-1], 40), (version, 20)], payload)


def image_seed(audit_id: str, setting: str, descriptor: str, image_index: int, descriptor_row: int = 1) -> int:
    """Per-image seed: 63-bit blake2b of the row key (stable across machines and batches);
    a descriptor's later rows (``descriptor_row`` > 1) add the row to the key."""
    row = f"|row{descriptor_row}" if descriptor_row != 1 else ""
    return key_seed(audit_id, "t2i", setting, f"{descriptor}{row}", image_index)


def probe_t2i(
    templates: Sequence[T2ITemplate],
    backend: ImageBackend,
    config: T2IProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
    max_error_share: float | None = DEFAULT_MAX_ERROR_SHARE,
) -> ResumableSummary:
    """Generate, store and land every missing image for ``templates``.

    Args:
        templates: descriptor x setting prompts (:func:`curated_t2i_templates`).
        backend: an :class:`ImageBackend`.
        config: :class:`T2IProbeConfig` (default: 10 images per descriptor and setting).
        audit_id: override :func:`image_audit_id_for`.
        progress: tqdm bar on stderr.
        max_error_share: share of this run's images that may fail (``error`` rows) before the
            audit ends ``failed`` (:func:`models_inference.resumable.land_resumable`); ``None``: no limit.

    Returns:
        A :class:`~models_inference.resumable.ResumableSummary` (statuses: image statuses). Rows land in shards of ``config.shard_rows``
        (:func:`models_inference.resumable.land_resumable`); images that failed land as
        ``error`` rows (no file) and are retried by the next run. The audit gets ``started``
        / ``finished`` events, or ``failed`` (then the exception is re-raised).

    Raises:
        ValueError: invalid config or a template with an unknown setting.
        ModelNotAvailableError: the backend cannot run (e.g. API key unset).
        AuditFailedError: more than ``max_error_share`` of the images failed (rows landed first).
    """
    cfg = (config or T2IProbeConfig()).validate()
    audit_id = audit_id or image_audit_id_for(backend)
    for t in templates:
        if t.setting not in T2I_SETTINGS:
            raise ValueError(f"unknown T2I setting {t.setting!r} for descriptor {t.descriptor!r}")
    params = backend.generation_params()
    params_json = json.dumps(params, sort_keys=True, default=str)

    def generate(chunk: list[tuple[T2ITemplate, int]], advance: Callable[[int], None]) -> list[dict]:
        suffix = getattr(backend, "prompt_suffix", "") or ""  # the paper's SD style suffix, no space
        requests = [ImageRequest(t.prompt + suffix, image_seed(audit_id, t.setting, t.descriptor, i, t.descriptor_row), i) for t, i in chunk]
        results = backend.generate(requests, on_batch=advance)
        return [_image_row(t, index, req, res, params_json) for (t, index), req, res in zip(chunk, requests, results, strict=True)]

    planned = [(t, index) for t in templates for index in range(1, cfg.images_per_descriptor + 1)]
    key = lambda item: (item[0].setting, item[0].descriptor, item[0].descriptor_row, item[1])  # noqa: E731
    return land_probe(
        planned,
        key,
        generate,
        table=T2I_TABLE,
        backend=backend,
        audit_id=audit_id,
        modality="t2i",
        config={**params, "images_per_descriptor": cfg.images_per_descriptor},
        family=FAMILY,
        shard_rows=cfg.shard_rows,
        progress=progress,
        max_error_share=max_error_share,
        step="BiasDora T2I",
    )


def _image_row(t: T2ITemplate, index: int, req: ImageRequest, res, params_json: str) -> dict:
    """The landed ``t2i_images`` row of one generated image, stored as PNG; an image that cannot be
    stored, or no image where one was due, is an ``error`` row."""
    stored, status, error = None, res.status, res.error
    if res.data is not None:
        try:
            stored = store_png(res.data)
        except ValueError as exc:
            status, error = "error", str(exc)
    elif status in ("ok", "filtered"):
        status, error = "error", error or "the backend returned no image"
    return {
        "setting": t.setting,
        "descriptor": t.descriptor,
        "bias_dimension": t.bias_dimension,
        "descriptor_row": t.descriptor_row,
        "image_index": index,
        "seed": req.seed,
        "prompt": req.prompt,
        "revised_prompt": res.revised_prompt,
        "style": res.style,
        "generation_params": params_json,
        "image_path": stored.path if stored else None,
        "sha256": stored.sha256 if stored else None,
        "width": stored.width if stored else None,
        "height": stored.height if stored else None,
        "status": status,
        "error": error,
    }
