"""Run configuration shared by the audit assets (Dagster ``Config``)."""

from __future__ import annotations

from typing import Optional

import dagster as dg

from models_inference.prompts import T2T_SETTINGS
from models_inference.prompts import DEFAULT_I2T_SETTINGS, T2I_SETTINGS  # vision (VisionConfig)

#: Descriptors per bias dimension in the default (quick) audit; 0 means all of them.
DEFAULT_PER_DIMENSION = 2
DEFAULT_RUNS = 4


class AuditConfig(dg.Config):
    """What to audit and how (``dora audit --help`` documents each field).

    Defaults give the quick audit of the README's main command: the embedded SmolLM2-135M,
    all 5 T2T settings, 2 curated descriptors per bias dimension, 4 runs per letter.
    The paper-scale T2T audit is ``per_dimension=0, runs=10`` (every row: 406 / 413 / 406 / 406 / 406 x 5 settings
    x 26 letters x 10 runs).
    """

    model: str = "smollm2-135m"
    backend: str = "transformers"
    base_url: Optional[str] = None
    settings: list[str] = list(T2T_SETTINGS)
    runs: int = DEFAULT_RUNS
    letters: str = "abcdefghijklmnopqrstuvwxyz"
    descriptor_source: str = "biasdora"
    descriptors: list[str] = []
    per_dimension: int = DEFAULT_PER_DIMENSION
    prompt_style: Optional[str] = None
    batch_size: int = 64
    audit_id: Optional[str] = None
    progress: bool = True
    temperature: float = 0.7
    top_p: float = 0.95
    # Partitioned runs (one partition per registry target x model version, see
    # orchestration/defs/audits/): the registry file to read the target from
    # (default: $DORA_REGISTRY or registry.yaml); the target's settings replace the fields above.
    registry: Optional[str] = None


#: Images per descriptor and T2I setting in the default (quick) vision audit (paper: 10).
DEFAULT_IMAGES_PER_DESCRIPTOR = 4


class VisionConfig(dg.Config):
    """Run config of the T2I / I2T assets (``orchestration/defs/vision/``; ``dora audit --help``).

    Nothing runs unless a model is named: ``t2i_model`` (a diffusers folder or cached hub id,
    or an OpenAI Images model with ``t2i_backend='openai'``) draws images; ``i2t_model`` (a
    transformers image-text-to-text folder or cached hub id, or an OpenAI vision chat model)
    describes them. Paper configurations (BiasDora Section 4): Stable Diffusion (20 steps,
    DPM-Solver, VAE ``stabilityai/sd-vae-ft-mse``) + LLaVA; DALL-E 3 (1024x1024, standard,
    vivid and natural) + GPT-4o; 10 images per descriptor and setting.
    """

    t2i_backend: str = "diffusers"
    t2i_model: Optional[str] = None
    t2i_base_url: Optional[str] = None
    t2i_vae: Optional[str] = None
    t2i_steps: int = 20
    t2i_guidance_scale: float = 7.5
    t2i_height: Optional[int] = None
    t2i_width: Optional[int] = None
    t2i_size: str = "1024x1024"
    t2i_quality: Optional[str] = "standard"
    t2i_styles: list[str] = ["vivid", "natural"]
    t2i_settings: list[str] = list(T2I_SETTINGS)
    t2i_batch_size: int = 4
    # issue 11: the paper's SD style suffix (appended with no space) / LLaVA system prompt and size
    t2i_prompt_suffix: str = ""
    images_per_descriptor: int = DEFAULT_IMAGES_PER_DESCRIPTOR
    descriptors: list[str] = []
    per_dimension: int = DEFAULT_PER_DIMENSION
    image_audit_id: Optional[str] = None
    i2t_backend: str = "transformers"
    i2t_model: Optional[str] = None
    i2t_base_url: Optional[str] = None
    i2t_settings: list[str] = list(DEFAULT_I2T_SETTINGS)  # the objective prompt the paper kept + the 4 subjective ones
    i2t_max_new_tokens: int = 200
    i2t_temperature: float = 0.7
    i2t_top_p: float = 0.95
    i2t_batch_size: int = 4
    i2t_system_prompt: Optional[str] = None
    i2t_image_size: list[int] = []
    progress: bool = True
    # Partitioned runs: the registry file (default: the T2T op's `registry`, else $DORA_REGISTRY or
    # registry.yaml). A t2i target's model draws (t2i_* fields from the target) and the describer
    # above describes objectively; an i2t target's model describes (i2t_* fields from the target).
    registry: Optional[str] = None
