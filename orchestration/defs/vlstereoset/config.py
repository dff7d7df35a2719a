"""Run configuration and CLI flags of the VLStereoSet probe family (``dora audit --family vlstereoset``).

:class:`VLStereoSetConfig` is the run config of the ``vlstereoset_probe`` op
(:mod:`.assets`); its ``dora audit`` flags are derived from the fields in
``orchestration/defs/vlstereoset/family.py``. The default (no flag) scores the shipped
SYNTHETIC file with the text-only analogue on the embedded SmolLM2-135M and the paper's
reference models IDM / BIM / RAM, offline.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from ingestion.vocabulary import DEFAULT_MODEL, I2T_BACKENDS, T2T_BACKENDS
from models_inference.probes.vlstereoset.scorers import MCQ_ANSWER_MODES
from orchestration.defs.common import ErrorShareLimit

#: Probe family name (``dora audit --family vlstereoset``) and its Dagster asset group.
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
        enabled: run the family (``dora audit --family`` without ``vlstereoset`` turns it off).
        csv: the released VLStereoSet CSV; ``None`` = dora's shipped SYNTHETIC file.
        images: a folder of the items' images (``manifest.csv`` or ``<row>.<ext>``), offline.
        download_images: fetch missing images from their URLs (needs the network; every
            failed link lands as a ``download_failed`` status).
        scorers: any of :data:`SCORERS`; default: the text-only analogue + IDM / BIM / RAM.
            ``clip`` / ``loglik`` / ``mcq`` are added when their model is named.
        text_model: model of ``vlstereo_text_caption_prior`` (a transformers causal LM, or the
            served model name of ``text_base_url``).
        text_backend / text_base_url: ``transformers`` (local) or ``openai``: an OpenAI-compatible
            ``/v1/completions`` endpoint that returns prompt-token log-probs (``echo`` or vLLM's
            ``prompt_logprobs``); key from ``$OPENAI_API_KEY``.
        clip_model: CLIP-style dual encoder (folder or cached hub id) for ``clip``.
        clip_logit_scale: apply CLIP's logit scale before the softmax (default: raw cosine).
        itm_model: image-text matching model (BLIP / ViLT retrieval with an ITM head) for ``itm``.
        vlm_model / vlm_backend / vlm_base_url: generative VLM for ``loglik`` (transformers
            only) and ``mcq`` (transformers or an OpenAI-compatible vision endpoint).
        mcq_shuffles: orders per mcq question.
        block_items: items per block (one Dagster step each, every scorer on the block's items).
        max_error_share: (inherited) share of a scorer's rows that may fail before the step fails.
    """

    enabled: bool = Field(True, description="run the family (dora audit --family without vlstereoset turns it off)")
    csv: Optional[str] = Field(None, description="the released VLStereoSet CSV (default: dora's synthetic file)")
    images: Optional[str] = Field(
        None,
        description="folder of the VLStereoSet images (manifest.csv with file,row|item_id|url, or <row>.<ext>)",
    )
    download_images: bool = Field(False, description="download images missing from --images from their URLs")
    scorers: list[str] = Field(list(DEFAULT_SCORERS), description="scorers to run (clip / itm / loglik / mcq are added when their model is named)")
    text_model: str = Field(DEFAULT_MODEL, description="text LLM of vlstereo_text_caption_prior")
    text_backend: str = Field(
        T2T_BACKENDS[0],
        description="backend of the text LLM (openai: a /v1/completions endpoint returning prompt log-probs, echo or vLLM prompt_logprobs)",
    )
    text_base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint of the text LLM; key from $OPENAI_API_KEY")
    clip_model: Optional[str] = Field(None, description="CLIP-style model folder or cached hub id (adds the clip scorer)")
    clip_logit_scale: bool = Field(False, description="apply CLIP's logit scale before the softmax (default: raw cosine)")
    itm_model: Optional[str] = Field(
        None,
        description="image-text matching model with an ITM head, e.g. a BLIP / ViLT retrieval folder (adds itm)",
    )
    vlm_model: Optional[str] = Field(None, description="generative VLM (adds mcq, and loglik for transformers)")
    vlm_backend: str = Field(I2T_BACKENDS[0], description="VLM backend")
    vlm_base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint of the VLM; key from $OPENAI_API_KEY")
    mcq_shuffles: int = Field(3, ge=1, le=100, description="answer orders per mcq question")
    mcq_answer_mode: str = Field(
        MCQ_ANSWER_MODES[0],
        description="mcq: free (the letter parsed from the answer) or constrained (the answer restricted "
        "to the letters by an OpenAI-compatible server's grammar / structured_outputs / regex / json_schema; free where it "
        "has none; recorded in the audit's config and every row's detail_json)",
    )
    items: Literal["all", "paper"] = Field(
        "all",
        description="every good row of the file, or 'paper': a seeded down-sample to the paper's per-category "
        "counts (Table 1: 1,028 items; the released file is the unbalanced pool of 1,958)",
    )
    item_seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the 'paper' item sample")
    shard_rows: int = Field(32, ge=1, le=100_000)
    block_items: int = Field(
        256,
        ge=1,
        le=1_000_000,
        description="items per block: each block is one Dagster step (every scorer on its items), run apart (another "
        "process or Celery worker) and redone alone if it fails (the default audit is one block)",
    )
    progress: bool = True
    # Partitioned runs (dora audit --target, sensor, schedule): the registry file (default
    # $DORA_REGISTRY or registry.yaml); only a vlstereoset target's partition runs the family.
    registry: Optional[str] = None


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
