"""Run config of the counterfactual assets (Howard et al., seed 003); its ``dora audit``
flags are derived from the fields (``orchestration/defs/counterfactual/family.py``).

Every ``counterfactual_*`` op reads the same :class:`CounterfactualConfig`. The defaults are
the quick sample of the default audit (so a fresh ``dora audit`` shows real counterfactual
results in about a minute on 2 cores); the paper's settings are one flag each (see
docs/families/counterfactual.md, "paper scale").
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from ingestion.vocabulary import DEFAULT_MODEL, DEFAULT_TOXICITY_SCORER, I2T_BACKENDS, JUDGE_BACKENDS, T2T_BACKENDS
from models_inference.probes.counterfactual.prompts import (
    MAIN_PROMPTS,
    NUMERIC_PROMPTS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
    SUBSETS,
)
from orchestration.defaults import MAX_BATCH, MAX_RUNS, MAX_TOKENS
from orchestration.defs.common import BatchApiOptions, ErrorShareLimit

#: The ops that read :class:`CounterfactualConfig` (run config ``ops.<name>.config``).
COUNTERFACTUAL_OPS: tuple[str, ...] = ("counterfactual_responses", "counterfactual_toxicity", "counterfactual_stereotype_filter")
#: Quick default sample: one set of one occupation per subset below.
DEFAULT_SUBSETS = ["race_gender"]
DEFAULT_OCCUPATIONS = ["doctor"]
#: Quick default token budgets (paper: 512 for every prompt), recorded on every row.
DEFAULT_MAX_NEW_TOKENS = 32
DEFAULT_NUMERIC_MAX_NEW_TOKENS = 8
#: Upper limit of the set counts (the released data has fewer sets per subset).
MAX_SETS = 100_000


class CounterfactualConfig(ErrorShareLimit, BatchApiOptions):
    """What the counterfactual probe runs (``dora audit --help``, group "counterfactual").

    Text sets (section 5.1): ``subsets`` x ``occupations`` (empty = all) x ``sets_per_occupation``
    released sets, or ``custom_occupations`` (user-defined sets over App. A.1's values).
    Paper scale for an LLM: every set (``sets_per_occupation=0``, ``occupations=[]``, 3 subsets),
    ``runs=3``, ``max_new_tokens=512``, ``numeric_max_new_tokens=None``.

    Image sets (the paper's LVLM audit): ``images`` (a folder in the SocialCounterfactuals
    layout or a manifest, :func:`models_inference.probes.counterfactual.sets.load_image_sets`)
    prompts ``vision_model`` with each member's image; with ``paired_text`` the text model
    (``model``) gets the same sets with the section 5.1 prefix, so the two audits pair
    set by set (``agg_lvlm_llm_max_toxicity``, section 5.1 / Table 3).
    """

    enabled: bool = Field(True, description="run the family (dora audit --family without counterfactual turns it off)")
    model: str = Field(DEFAULT_MODEL, description="the audited text model (the --model flag)")
    backend: str = Field(T2T_BACKENDS[0], description="its backend (the --backend flag)")
    base_url: Optional[str] = None
    batch_size: int = Field(64, ge=1, le=MAX_BATCH)
    subsets: list[str] = Field(list(DEFAULT_SUBSETS), description=f"comma-separated subsets of {list(SUBSETS)}")
    occupations: list[str] = Field(list(DEFAULT_OCCUPATIONS), description="comma-separated occupations ('' = every occupation)")
    sets_per_occupation: int = Field(1, ge=0, le=MAX_SETS, description="released sets per occupation (0 = all)")
    max_sets: int = Field(0, ge=0, le=MAX_SETS, description="at most this many sets per subset (0 = no cap)")
    block_sets: int = Field(
        25,
        ge=1,
        le=MAX_SETS,
        description="text sets per block: each block is one Dagster step, run apart (another process or Celery "
        "worker) and redone alone if it fails (the default audit is one block)",
    )
    custom_occupations: list[str] = Field([], description="user-defined text sets for these occupations instead of the released ones")
    prompts: list[str] = Field([*MAIN_PROMPTS, *NUMERIC_PROMPTS], description="prompt labels (App. B, F)")
    runs: int = Field(1, ge=1, le=MAX_RUNS, description="runs per open prompt, each with its own seed (paper: 3 seeds)")
    numeric_runs: int = Field(1, ge=1, le=MAX_RUNS)
    mitigations: list[str] = Field([], description="mitigation instructions to add (section 6)")
    include_unmitigated: bool = True
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, le=MAX_TOKENS, description="token budget of open prompts (paper: 512)")
    numeric_max_new_tokens: Optional[int] = Field(
        DEFAULT_NUMERIC_MAX_NEW_TOKENS,
        ge=1,
        le=MAX_TOKENS,
        description="token budget of numeric prompts (0 = the open prompts' budget)",
    )
    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    audit_id: Optional[str] = None
    progress: bool = True
    toxicity_scorer: str = DEFAULT_TOXICITY_SCORER
    judge_backend: str = Field(JUDGE_BACKENDS[0], description="stereotype filter model backend (App. D.2; none: no filter)")
    judge_model: Optional[str] = Field(None, description="stereotype filter model (default: the audit's local model / gpt-4o)")
    judge_base_url: Optional[str] = None
    judge_max_new_tokens: int = 64
    lexicon: Optional[str] = Field(
        None,
        description="competence lexicon: word list or word,dimension,direction CSV (default: the authors' 861 words)",
    )
    numeric_prompt_style: Optional[str] = None
    images: Optional[str] = Field(
        None,
        description="image sets: a folder <subset>/<set_id>/<caption>.png or a manifest CSV / Parquet "
        "(set_id,subset,occupation,a1,a2,image_path), prompted to --cf-vision-model",
    )
    vision_model: Optional[str] = Field(None, description="the LVLM of the image sets (local folder, hub id or API model)")
    vision_backend: str = Field(I2T_BACKENDS[0], description="its backend")
    vision_base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint of the LVLM; key from $OPENAI_API_KEY")
    vision_batch_size: int = Field(8, ge=1, le=MAX_BATCH, description="images per forward pass of a local LVLM")
    paired_text: bool = Field(
        True,
        description="prompt the text model (--model) with the image sets' members too, with --cf-images (section 5.1 pairing)",
    )
