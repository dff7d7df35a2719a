"""Run config of the ModSCAN asset (seed 000; docs/families/modscan.md).

:class:`ModscanConfig` is the Dagster ``Config`` of ``landing/modscan_responses``; its
``dora audit`` flags (``--modscan-*``, ``--faces``, ``--prefix``) are derived from the fields
in ``orchestration/defs/modscan/family.py``.
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from ingestion.vocabulary import DEFAULT_MODEL, I2T_BACKENDS, T2I_BACKENDS, T2T_BACKENDS
from models_inference.probes.modscan.tables import ATTRIBUTES, SCENARIOS
from models_inference.probes.modscan.text import ANSWER_MODES, CONDITIONS, TEXT_PROBES
from orchestration.defaults import MAX_BATCH, MAX_COUNT, MAX_TOKENS
from orchestration.defs.common import ErrorShareLimit

#: The family's name for ``dora audit --family``.
PROBE_NAME = "modscan"
#: Default audit sample: 5 instances per Table 1 scenario (spread over its list), 1 query per
#: (instance, attribute, condition): 20 text_persona + 30 text_faces queries. Each query costs
#: ~1 CPU-second with SmolLM2-135M (its ~100-token chat prompt's prefill dominates), so the
#: sample takes roughly 30-60 s on 2 idle cores.
DEFAULT_RUNS = 1
DEFAULT_INSTANCES = 5
DEFAULT_MAX_NEW_TOKENS = 24


class ModscanConfig(ErrorShareLimit):
    """What the ModSCAN asset probes (``dora audit --help``, group "ModSCAN").

    The text-only analogues (docs/families/modscan.md#text-only-use, NOT FROM PAPER: ``modscan_text_persona``,
    ``modscan_text_faces``) run on any text backend, by default the embedded SmolLM2-135M,
    and are part of the default audit with a small sample (``runs`` per instance,
    attribute and condition, over ``instances_per_scenario`` instances of each Table 1
    scenario). Paper scale: ``runs=200, instances_per_scenario=0``.
    """

    enabled: bool = Field(True, description="run the family (dora audit --family without modscan turns it off)")
    model: str = Field(
        DEFAULT_MODEL, description=f"text model of the analogues ('{DEFAULT_MODEL}', a local folder/.gguf, a cached hub id, or an API model)"
    )
    backend: str = Field(T2T_BACKENDS[0], description="text backend of the analogues")
    base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint (backend openai); key from $OPENAI_API_KEY")
    probes: list[str] = Field(list(TEXT_PROBES), description="text analogues to run")
    attributes: list[str] = Field(list(ATTRIBUTES), description="social attributes probed")
    scenarios: list[str] = Field(list(SCENARIOS), description="scenarios of modscan_text_faces (text_persona: persona only)")
    conditions: list[str] = Field(
        list(CONDITIONS),
        description="original (scene described) and/or blank (sentence alone; Table 5's blank image analogue)",
    )
    prefixes: list[str] = Field(
        ["none"],
        description="prompt prefix, repeatable: sr / debiasing (seed 000 section 7), role_sexist / role_racist / "
        "role_obama / role_trump (App. C); 'none' = the original prompt (always probed alongside, for the deltas)",
    )
    runs: int = Field(
        DEFAULT_RUNS,
        ge=1,
        le=MAX_COUNT,
        description="runs of each query per instance x attribute x condition x prefix, each with its own seed (paper: 200 samples)",
    )
    instances_per_scenario: int = Field(
        DEFAULT_INSTANCES,
        ge=0,
        le=MAX_COUNT,
        description="k instances of each Table 1 scenario, spread over its list; 0 = all (paper)",
    )
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, le=MAX_TOKENS, description="answer budget in tokens (paper: unstated)")
    answer_mode: str = Field(
        ANSWER_MODES[0],
        description="text analogues: free (the paper's free answer, parsed) or constrained (NOT FROM PAPER: the "
        "answer restricted to left/right or the offered social terms, by a local model's first token or a server's "
        "grammar / structured_outputs / regex / json_schema; free where the backend cannot; every row records its mode)",
    )
    block_queries: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="text-analogue queries per block: each block is one Dagster step, run apart (another process or "
        "Celery worker) and redone alone if it fails (the default audit is one block)",
    )
    temperature: float = 0.7
    top_p: float = 0.95
    batch_size: int = Field(32, ge=1, le=MAX_BATCH)
    audit_id: Optional[str] = None
    progress: bool = True
    # vision modality (seed 000 section 3.1): runs when both a faces folder / manifest and a VLM are named
    faces: Optional[str] = Field(
        None,
        description="vision modality: a UTKFace-format folder ([age]_[gender]_[race]_[datetime].jpg) or a CSV manifest "
        "(face_id,path,age,gender,race)",
    )
    vision_backend: str = Field(I2T_BACKENDS[0], description="vision backend")
    vision_model: Optional[str] = Field(
        None,
        description="vision modality: a transformers LLaVA-style folder / cached hub id, or an OpenAI vision model "
        "(paper: LLaVA-v1.5, MiniGPT-v2, CogVLM)",
    )
    vision_base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint of the vision model; key from $OPENAI_API_KEY")
    pairs_per_group: int = Field(
        20,
        ge=1,
        le=MAX_COUNT,
        description="face pairs per (age, race) / (age, gender, race combination) group (paper: up to 20)",
    )
    pair_seed: int = 0
    vision_instances_per_scenario: int = Field(
        0, ge=0, le=MAX_COUNT, description="vision: k instances per scenario spread over Table 1; 0 = all (paper)"
    )
    # language modality (seed 000 section 3.2): runs when a T2I model and the VLM above are named
    t2i_backend: str = Field(T2I_BACKENDS[0], description="T2I backend of the scene images")
    t2i_model: Optional[str] = Field(
        None,
        description="language modality: diffusers folder / cached hub id or OpenAI Images model drawing Table 2's scenes "
        "(paper: SD-v2.1); needs --modscan-vision-model",
    )
    t2i_base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint of the T2I model; key from $OPENAI_API_KEY")
    images_per_trait: int = Field(
        200, ge=1, le=MAX_COUNT, description="language modality: kept scene images (and blank queries) per trait (paper: 200)"
    )
    person_check: bool = Field(
        True,
        description="check every scene image for a person (the VLM is asked; images without one are dropped; NOT FROM PAPER stand-in for YOLOv8x)",
    )
