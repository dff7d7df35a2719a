"""Run configuration and CLI flags of the VLStereoSet probe family (``dora audit --probe vlstereoset``).

:class:`VLStereoSetConfig` is the run config of the ``vlstereoset_probe`` op
(:mod:`.assets`); :func:`add_arguments` adds the family's flags to ``dora audit`` and
:func:`run_config` turns them into that op's config. The default (no flag) scores the shipped
SYNTHETIC file with the text-only analogue on the embedded SmolLM2-135M and the paper's
reference models IDM / BIM / RAM, offline.
"""

from __future__ import annotations

import argparse
from typing import Optional

import dagster as dg

from orchestration.defs.config import ErrorShareLimit
#: Probe family name (``dora audit --probe vlstereoset``) and its Dagster asset group.
PROBE_NAME = "vlstereoset"
ASSET_GROUP = "vlstereoset"
OP_NAME = "vlstereoset_probe"
#: Scorer names (models_inference/probes/vlstereoset/scorers.py).
TEXT_PRIOR = "vlstereo_text_caption_prior"
REFERENCE_SCORERS = ("idm", "bim", "ram")
IMAGE_SCORERS = ("clip", "itm", "loglik", "mcq")
SCORERS = (TEXT_PRIOR, *REFERENCE_SCORERS, *IMAGE_SCORERS)
DEFAULT_SCORERS = (TEXT_PRIOR, *REFERENCE_SCORERS)


class VLStereoSetConfig(ErrorShareLimit):
    """What the VLStereoSet probe scores (``dora audit --help``, group "VLStereoSet probe").

    Attributes:
        enabled: run the family (``dora audit --probe`` without ``vlstereoset`` turns it off).
        csv: the released VLStereoSet CSV; ``None`` = dora's shipped SYNTHETIC file.
        images: a folder of the items' images (``manifest.csv`` or ``<row>.<ext>``), offline.
        download_images: fetch missing images from their URLs (needs the network; every
            failed link lands as a ``download_failed`` status).
        scorers: any of :data:`SCORERS`; default: the text-only analogue + IDM / BIM / RAM.
            ``clip`` / ``loglik`` / ``mcq`` are added when their model is named.
        text_model: model of ``vlstereo_text_caption_prior`` (transformers causal LM).
        clip_model: CLIP-style dual encoder (folder or cached hub id) for ``clip``.
        clip_logit_scale: apply CLIP's logit scale before the softmax (default: raw cosine).
        itm_model: image-text matching model (BLIP / ViLT retrieval with an ITM head) for ``itm``.
        vlm_model / vlm_backend / vlm_base_url: generative VLM for ``loglik`` (transformers
            only) and ``mcq`` (transformers or an OpenAI-compatible vision endpoint).
        mcq_shuffles: orders per mcq question.
        max_error_share: (inherited) share of a scorer's rows that may fail before the step fails.
    """

    enabled: bool = True
    csv: Optional[str] = None
    images: Optional[str] = None
    download_images: bool = False
    scorers: list[str] = list(DEFAULT_SCORERS)
    text_model: str = "smollm2-135m"
    clip_model: Optional[str] = None
    clip_logit_scale: bool = False
    itm_model: Optional[str] = None
    vlm_model: Optional[str] = None
    vlm_backend: str = "transformers"
    vlm_base_url: Optional[str] = None
    mcq_shuffles: int = 3
    shard_rows: int = 32
    progress: bool = True
    # Partitioned runs (dora audit --target, sensor, schedule): the registry file (default
    # $DORA_REGISTRY or registry.yaml); the target's model replaces the scorers (config_for_target).
    registry: Optional[str] = None


def config_for_target(config: VLStereoSetConfig, modality: str, backend: str, model: str, base_url: Optional[str]):
    """``config`` for a registry target's partition, or ``(None, reason)`` when the family has
    nothing to score for it.

    A ``t2t`` target on the transformers backend is scored by the text-only analogue (its model
    as ``text_model``); an ``i2t`` target by ``mcq`` (and ``loglik`` on transformers) over
    ``images``; other targets (t2i, t2t over an API without caption log-probs) are skipped.

    Returns:
        ``(config, None)`` or ``(None, reason)``.
    """
    if modality == "t2t" and backend == "transformers":
        return config.model_copy(update={"scorers": [TEXT_PRIOR], "text_model": model, "clip_model": None, "itm_model": None, "vlm_model": None}), None
    if modality == "i2t":
        return config.model_copy(update={"scorers": [], "clip_model": None, "itm_model": None, "vlm_model": model, "vlm_backend": backend,
                                         "vlm_base_url": base_url}), None
    return None, f"a {modality} target on the {backend} backend has no VLStereoSet scorer (text prior: transformers t2t; mcq/loglik: i2t)"


def selected_scorers(config: VLStereoSetConfig) -> list[str]:
    """The scorers to run, in :data:`SCORERS` order: the configured list, plus ``clip`` when a
    CLIP model is named and ``loglik`` (transformers) / ``mcq`` when a VLM is named.

    Raises:
        ValueError: an unknown scorer, or an image scorer without its model.
    """
    wanted = set(config.scorers)
    unknown = wanted - set(SCORERS)
    if unknown:
        raise ValueError(f"unknown VLStereoSet scorer(s) {sorted(unknown)}; expected some of {list(SCORERS)}")
    if config.clip_model:
        wanted.add("clip")
    if config.itm_model:
        wanted.add("itm")
    if "itm" in wanted and not config.itm_model:
        raise ValueError("the itm scorer needs --vlstereoset-itm-model")
    if config.vlm_model:
        wanted.add("mcq")
        if config.vlm_backend == "transformers":
            wanted.add("loglik")
    if "clip" in wanted and not config.clip_model:
        raise ValueError("the clip scorer needs --vlstereoset-clip-model")
    if wanted & {"loglik", "mcq"} and not config.vlm_model:
        raise ValueError("the loglik / mcq scorers need --vlstereoset-vlm-model")
    return [s for s in SCORERS if s in wanted]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the VLStereoSet flags to ``dora audit``."""
    g = parser.add_argument_group(
        "VLStereoSet probe (seed 001; dora audit --probe vlstereoset)",
        "Caption selection on VLStereoSet: vlrs, vlbs, ivlas, lmss, vlss (agg_vlstereoset_metrics, "
        "fct_vlstereoset_shifts). Default: dora's SYNTHETIC file, the text-only analogue on the embedded model "
        "and the reference models IDM / BIM / RAM. The released CSV is not shipped (no licence): "
        "https://github.com/K-Square-00/VLStereo data/VLStereoSet.csv",
    )
    g.add_argument("--vlstereoset-csv", default=None, help="the released VLStereoSet CSV (default: dora's synthetic file)")
    g.add_argument("--images", "--vlstereoset-images", dest="vlstereoset_images", default=None,
                   help="folder of the VLStereoSet images (manifest.csv with file,row|item_id|url, or <row>.<ext>)")
    g.add_argument("--vlstereoset-download", action="store_true", help="download images missing from --images from their URLs")
    g.add_argument("--vlstereoset-scorers", default=",".join(DEFAULT_SCORERS), help=f"comma-separated, of {','.join(SCORERS)}")
    g.add_argument("--vlstereoset-text-model", default="smollm2-135m", help="text LLM of vlstereo_text_caption_prior")
    g.add_argument("--vlstereoset-clip-model", default=None, help="CLIP-style model folder or cached hub id (adds the clip scorer)")
    g.add_argument("--vlstereoset-clip-logit-scale", action="store_true", help="apply CLIP's logit scale before the softmax (default: raw cosine)")
    g.add_argument("--vlstereoset-itm-model", default=None, help="image-text matching model with an ITM head, e.g. a BLIP / ViLT retrieval folder (adds itm)")
    g.add_argument("--vlstereoset-vlm-model", default=None, help="generative VLM (adds mcq, and loglik for transformers)")
    g.add_argument("--vlstereoset-vlm-backend", default="transformers", choices=["transformers", "openai"], help="VLM backend")
    g.add_argument("--vlstereoset-vlm-base-url", default=None, help="OpenAI-compatible endpoint of the VLM; key from $OPENAI_API_KEY")
    g.add_argument("--vlstereoset-mcq-shuffles", type=int, default=3, help="answer orders per mcq question")


def run_config(args: argparse.Namespace) -> dict:
    """The ``vlstereoset_probe`` op's config from ``dora audit`` flags (``--probe`` decides ``enabled``)."""
    probes = getattr(args, "probe", None)
    return {
        "enabled": not probes or PROBE_NAME in probes,
        "csv": args.vlstereoset_csv,
        "images": args.vlstereoset_images,
        "download_images": args.vlstereoset_download,
        "scorers": [s.strip() for s in args.vlstereoset_scorers.split(",") if s.strip()],
        "text_model": args.vlstereoset_text_model,
        "clip_model": args.vlstereoset_clip_model,
        "clip_logit_scale": args.vlstereoset_clip_logit_scale,
        "itm_model": args.vlstereoset_itm_model,
        "vlm_model": args.vlstereoset_vlm_model,
        "vlm_backend": args.vlstereoset_vlm_backend,
        "vlm_base_url": args.vlstereoset_vlm_base_url,
        "mcq_shuffles": args.vlstereoset_mcq_shuffles,
        "progress": getattr(args, "progress", True),  # dora audit --no-progress
        "max_error_share": args.max_error_share,  # the shared --max-error-share
    }


def audit_ids_of_run(result) -> list[str]:
    """The VLStereoSet audit ids a finished ``dora audit`` run scored (from the
    ``landing/vlstereoset_scores`` materialisation's metadata); empty when the family was skipped."""
    ids: list[str] = []
    for mat in result.get_asset_materialization_events():
        if mat.materialization.asset_key.path == ["landing", "vlstereoset_scores"]:
            value = mat.materialization.metadata.get("audit_ids")
            ids += [a for a in (value.value if value else "").split(",") if a]
    return ids
