"""Run configuration of the probe assets (Dagster ``Config``): every default stated once.

Each field's default and description are the single source of the ``dora audit`` flag that
sets it (``orchestration/cli/flags.py`` derives the flags from these classes); the paper's
constants come from the family's prompts module (:mod:`models_inference.probes.biasdora.prompts`).
"""

from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import Field

from ingestion.vocabulary import (
    DEFAULT_I2T_SETTINGS,
    DEFAULT_MODEL,
    I2T_BACKENDS,
    T2I_BACKENDS,
    T2I_SETTINGS,
    T2T_BACKENDS,
    T2T_SETTINGS,
)
from models_inference.probes.biasdora.prompts import (
    PAPER_DALLE_QUALITY,
    PAPER_DALLE_SIZE,
    PAPER_DALLE_STYLES,
    PAPER_I2T_MAX_NEW_TOKENS,
    PAPER_SD_STEPS,
    PAPER_SD_VAE,
    PAPER_T2T_RUNS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
)
from orchestration.defaults import (  # noqa: F401
    DEFAULT_IMAGES_PER_DESCRIPTOR,
    DEFAULT_PER_DIMENSION,
    DEFAULT_RUNS,
    MAX_API_CONCURRENCY,
    MAX_BATCH,
    MAX_IMAGES,
    MAX_PER_DIMENSION,
    MAX_RUNS,
    MAX_TOKENS,
)
from orchestration.defs.common import BatchApiOptions, ErrorShareLimit


class AuditConfig(ErrorShareLimit, BatchApiOptions):
    """What to audit and how (the T2T probe; ``dora audit --help`` shows each field).

    Defaults give the quick audit of the README's main command: the embedded SmolLM2-135M,
    all 5 T2T settings, 2 curated descriptors per bias dimension, 4 runs per letter.
    The paper-scale T2T audit is ``per_dimension=0, runs=10`` (every row: 406 / 413 / 406 / 406 / 406 x 5 settings
    x 26 letters x 10 runs).
    """

    enabled: bool = Field(
        True,
        description="run the T2T probe (dora audit --family without biasdora, or a registry target whose partition does not run it, turns it off)",
    )
    model: str = Field(DEFAULT_MODEL, description=f"'{DEFAULT_MODEL}' (embedded), a local folder/.gguf, a cached hub id, or an API model name")
    backend: str = Field(T2T_BACKENDS[0], description="generation backend")
    base_url: Optional[str] = Field(
        None,
        description="OpenAI-compatible endpoint (backend openai); key from $OPENAI_API_KEY; several, comma-separated: a fleet (least busy server, failover)",
    )
    settings: list[str] = Field(list(T2T_SETTINGS), description="T2T settings")
    runs: int = Field(DEFAULT_RUNS, ge=1, le=MAX_RUNS, description=f"completions per descriptor x setting x letter (paper: {PAPER_T2T_RUNS})")
    letters: str = Field("abcdefghijklmnopqrstuvwxyz", description="first letters to probe")
    descriptor_source: str = Field("biasdora", description="curated paper list or descriptors extracted from CrowS-Pairs")
    descriptors: list[str] = Field([], description="descriptor subset (normalised keys, e.g. 'alcoholic person,child')")
    per_dimension: int = Field(DEFAULT_PER_DIMENSION, ge=0, le=MAX_PER_DIMENSION, description="descriptors per bias dimension; 0 = all")
    prompt_style: Optional[str] = Field(None, description="default: the model's (completion for small local models)")
    batch_size: int = Field(64, ge=1, le=MAX_BATCH, description="prompts per batch (transformers backend)")
    audit_id: Optional[str] = Field(None, description="override the deterministic audit id")
    progress: bool = Field(True, description="show the progress bars")
    temperature: float = Field(PAPER_TEMPERATURE, description="sampling temperature (paper)")
    top_p: float = Field(PAPER_TOP_P, description="nucleus sampling (paper)")
    t2t_block_templates: int = Field(
        128,
        ge=1,
        le=1_000_000,
        description="descriptor x setting templates per block: each block is one Dagster step, run apart (another "
        "process or Celery worker) and redone alone if it fails (the default audit is one block)",
    )
    t2t_shard_rows: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="completions per landed Parquet shard: at most this much generation is lost when an audit "
        "is killed (a re-run generates the rest); not part of the audit id",
    )
    # API client limits (the failed-call share above which the audit ends failed: ErrorShareLimit)
    api_timeout: float = Field(60.0, gt=0, le=3600, description="seconds per API request (backend openai); a timed-out request is not re-sent")
    api_concurrency: int = Field(4, ge=1, le=MAX_API_CONCURRENCY, description="API requests in flight at once (backend openai)")
    api_max_retries: int = Field(4, ge=0, le=20, description="retries per API request on connection errors, 429 and 5xx")
    # max_error_share: from ErrorShareLimit
    # Partitioned runs (one partition per registry target x model version, see
    # orchestration/defs/audits/): the registry file to read the target from (default: the run's
    # dora/registry tag); the run request sets the fields above from the target
    # (orchestration/defs/biasdora/target.py).
    registry: Optional[str] = Field(None, description="audit registry file (default: $DORA_REGISTRY or registry.yaml)")


class VisionConfig(ErrorShareLimit):
    """Run config of the T2I / I2T assets (``orchestration/defs/biasdora/vision/``; ``dora audit --help``).

    Nothing runs unless a model is named: ``t2i_model`` draws images; ``i2t_model`` describes
    them. Paper configurations (BiasDora Section 4): Stable Diffusion (20 steps, DPM-Solver,
    VAE ``stabilityai/sd-vae-ft-mse``) + LLaVA; DALL-E 3 (1024x1024, standard, vivid and
    natural) + GPT-4o; 10 images per descriptor and setting.
    """

    t2i_backend: str = Field(T2I_BACKENDS[0], description="text-to-image backend")
    t2i_model: Optional[str] = Field(None, description="diffusers folder or hub id (paper: Stable Diffusion), or an OpenAI Images model (dall-e-3)")
    t2i_base_url: Optional[str] = Field(
        None, description="OpenAI-compatible endpoint for --t2i-backend openai; several, comma-separated: a fleet (least busy server, failover)"
    )
    t2i_vae: Optional[str] = Field(None, description=f"swap the pipeline's VAE (paper: {PAPER_SD_VAE})")
    t2i_steps: int = Field(PAPER_SD_STEPS, ge=1, le=1000, description="diffusion steps (DPM-Solver multistep; paper)")
    t2i_guidance_scale: float = 7.5
    t2i_height: Optional[int] = None
    t2i_width: Optional[int] = None
    t2i_size: str = Field(PAPER_DALLE_SIZE, description="OpenAI image size (paper)")
    t2i_quality: Optional[str] = Field(PAPER_DALLE_QUALITY, description="OpenAI image quality (paper)")
    t2i_styles: list[str] = Field(list(PAPER_DALLE_STYLES), description="OpenAI styles, alternated over a descriptor's images (paper)")
    t2i_settings: list[str] = Field(list(T2I_SETTINGS), description="T2I settings")
    t2i_batch_size: int = 4
    # the paper's SD style suffix (appended with no space); see --t2i-model paper-sd
    t2i_prompt_suffix: str = Field(
        "", description="text appended to every diffusers prompt with no space (paper SD: the style suffix; preset --t2i-model paper-sd)"
    )
    images_per_descriptor: int = Field(
        DEFAULT_IMAGES_PER_DESCRIPTOR, ge=1, le=MAX_IMAGES, description="images per descriptor and setting (paper: 10)"
    )
    descriptors: list[str] = []
    per_dimension: int = DEFAULT_PER_DIMENSION
    image_audit_id: Optional[str] = Field(None, description="describe the images of this earlier T2I audit instead of this run's")
    i2t_backend: str = Field(I2T_BACKENDS[0], description="image-to-text backend")
    i2t_model: Optional[str] = Field(
        None, description="transformers image-text-to-text folder or hub id (paper: LLaVA), or an OpenAI vision model (gpt-4o)"
    )
    i2t_base_url: Optional[str] = Field(
        None, description="OpenAI-compatible endpoint for --i2t-backend openai; several, comma-separated: a fleet (least busy server, failover)"
    )
    i2t_settings: list[str] = Field(
        list(DEFAULT_I2T_SETTINGS),
        description="description prompts (objective: straightforward, moderate, comprehensive; subjective: subjective, "
        "stereotypical, implicit, lexical)",
    )
    i2t_max_new_tokens: int = Field(PAPER_I2T_MAX_NEW_TOKENS, ge=1, le=MAX_TOKENS, description="description length budget in tokens (paper)")
    i2t_temperature: float = PAPER_TEMPERATURE
    i2t_top_p: float = PAPER_TOP_P
    i2t_batch_size: int = 4
    # the paper's LLaVA system prompt and input size; see --i2t-model paper-llava
    i2t_system_prompt: Optional[str] = Field(
        None, description="system turn before each image (transformers chat VLMs; preset --i2t-model paper-llava)"
    )
    i2t_image_size: list[int] = Field([], description="resize images to [width, height] before describing (paper LLaVA: 448 448)")
    progress: bool = True
    # Partitioned runs: the registry file (default: the run's dora/registry tag, else $DORA_REGISTRY
    # or registry.yaml). A t2i target's model draws (t2i_* fields set from the target by the run
    # request) and the describer above describes objectively; an i2t target's model describes
    # (i2t_* fields from the target).
    registry: Optional[str] = None


class DescriptionWordsConfig(dg.Config):
    """How descriptions become words (docs/method.md#3a-paper-statistics), op ``description_words``."""

    stop_list: str = Field("nltk", description="stop words dropped from descriptions: nltk (the paper's code) or spacy")
    drop_descriptor_words: bool = Field(
        False, description="drop the descriptor's own words from its descriptions (default: kept, as the paper's code)"
    )


#: ``--t2i-model`` / ``--i2t-model`` presets: the paper's configurations (docs/method.md#3a-paper-statistics).
VISION_PRESETS = ("paper-sd", "paper-llava")


def apply_vision_presets(vision: dict) -> dict:
    """Expand ``t2i_model='paper-sd'`` / ``i2t_model='paper-llava'`` into the paper's settings, in place.

    paper-sd: ``stabilityai/stable-diffusion-2-inpainting`` (BiasDora appendix), VAE
    ``stabilityai/sd-vae-ft-mse``, 20 DPM-Solver multistep steps, every prompt immediately
    followed by the paper's style suffix (:data:`PAPER_SD_PROMPT_SUFFIX`). paper-llava:
    ``llava-hf/llava-v1.6-vicuna-7b-hf``, the system prompt (:data:`PAPER_LLAVA_SYSTEM_PROMPT`)
    and 448x448 input. Values set explicitly (VAE, suffix, system prompt, size) win.
    """
    from models_inference.probes.biasdora.prompts import (
        PAPER_LLAVA_IMAGE_SIZE,
        PAPER_LLAVA_MODEL,
        PAPER_LLAVA_SYSTEM_PROMPT,
        PAPER_SD_STEPS,
        PAPER_SD_VAE,
    )
    from models_inference.probes.biasdora.t2i import PAPER_SD_MODEL, PAPER_SD_PROMPT_SUFFIX

    if vision.get("t2i_model") == "paper-sd":
        vision.update(
            t2i_backend="diffusers",
            t2i_model=PAPER_SD_MODEL,
            t2i_steps=PAPER_SD_STEPS,
            t2i_vae=vision.get("t2i_vae") or PAPER_SD_VAE,
            t2i_prompt_suffix=vision.get("t2i_prompt_suffix") or PAPER_SD_PROMPT_SUFFIX,
        )
    if vision.get("i2t_model") == "paper-llava":
        vision.update(
            i2t_backend="transformers",
            i2t_model=PAPER_LLAVA_MODEL,
            i2t_system_prompt=vision.get("i2t_system_prompt") or PAPER_LLAVA_SYSTEM_PROMPT,
            i2t_image_size=vision.get("i2t_image_size") or list(PAPER_LLAVA_IMAGE_SIZE),
        )
    return vision
