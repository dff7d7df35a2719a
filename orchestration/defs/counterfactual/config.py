"""Run config of the counterfactual assets (Howard et al., seed 003) and its
``dora audit`` flags.

Every ``counterfactual_*`` op reads the same :class:`CounterfactualConfig`. The defaults are
the quick sample of the default audit (so a fresh ``dora audit`` shows real counterfactual
results in about a minute on 2 cores); the paper's settings are one flag each (see
``PAPER_SCALE`` and the README).
"""

from __future__ import annotations

import argparse
from typing import Optional

import dagster as dg

from orchestration.defs.config import ErrorShareLimit
from models_inference.probes.counterfactual.prompts import (
    ALL_PROMPTS,
    MAIN_PROMPTS,
    MITIGATIONS,
    NUMERIC_PROMPTS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
    SUBSETS,
)

#: The ops that read :class:`CounterfactualConfig` (run config ``ops.<name>.config``).
COUNTERFACTUAL_OPS: tuple[str, ...] = ("counterfactual_responses", "counterfactual_toxicity", "counterfactual_stereotype_filter")
#: Quick default sample: one set of one occupation per subset below.
DEFAULT_SUBSETS = ["race_gender"]
DEFAULT_OCCUPATIONS = ["doctor"]
#: Quick default token budgets (paper: 512 for every prompt), recorded on every row.
DEFAULT_MAX_NEW_TOKENS = 32
DEFAULT_NUMERIC_MAX_NEW_TOKENS = 8


class CounterfactualConfig(ErrorShareLimit):
    """What the counterfactual probe runs (``dora audit --help``, group "counterfactual").

    Text sets (section 5.1): ``subsets`` x ``occupations`` (empty = all) x ``sets_per_occupation``
    released sets, or ``custom_occupations`` (user-defined sets over App. A.1's values).
    Paper scale for an LLM: every set (``sets_per_occupation=0``, ``occupations=[]``, 3 subsets),
    ``seeds=3``, ``max_new_tokens=512``, ``numeric_max_new_tokens=None``.
    """

    enabled: bool = True
    model: str = "smollm2-135m"
    backend: str = "transformers"
    base_url: Optional[str] = None
    batch_size: int = 64
    subsets: list[str] = list(DEFAULT_SUBSETS)
    occupations: list[str] = list(DEFAULT_OCCUPATIONS)
    sets_per_occupation: int = 1
    max_sets: int = 0
    custom_occupations: list[str] = []
    prompts: list[str] = [*MAIN_PROMPTS, *NUMERIC_PROMPTS]
    seeds: int = 1
    numeric_seeds: int = 1
    mitigations: list[str] = []
    include_unmitigated: bool = True
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    numeric_max_new_tokens: Optional[int] = DEFAULT_NUMERIC_MAX_NEW_TOKENS
    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    audit_id: Optional[str] = None
    progress: bool = True
    toxicity_scorer: str = "toxic-comment-classifier"
    judge_backend: str = "transformers"
    judge_model: Optional[str] = None
    judge_base_url: Optional[str] = None
    judge_max_new_tokens: int = 64
    lexicon: Optional[str] = None
    numeric_prompt_style: Optional[str] = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``dora audit`` flags of the counterfactual probe (an argument group)."""
    g = parser.add_argument_group(
        "counterfactual probe (Howard et al., seed 003)",
        "Counterfactual sets (one occupation, members differing only in race / gender / physical "
        "characteristics) prompted with the paper's prompts; MaxToxicity, PMI stereotype words, competence "
        "words and numeric ratings. Default: a quick text-set sample on the audit's model.",
    )
    g.add_argument("--cf-subsets", default=",".join(DEFAULT_SUBSETS), help=f"comma-separated subsets of {list(SUBSETS)}")
    g.add_argument("--cf-occupations", default=",".join(DEFAULT_OCCUPATIONS), help="comma-separated occupations ('' = every occupation)")
    g.add_argument("--cf-sets-per-occupation", type=int, default=1, help="released sets per occupation (0 = all)")
    g.add_argument("--cf-max-sets", type=int, default=0, help="at most this many sets per subset (0 = no cap)")
    g.add_argument("--cf-custom-occupations", default="", help="user-defined text sets for these occupations instead of the released ones")
    g.add_argument("--cf-prompts", default=",".join([*MAIN_PROMPTS, *NUMERIC_PROMPTS]), help=f"prompt labels of {list(ALL_PROMPTS)}")
    g.add_argument("--cf-seeds", type=int, default=1, help="seeds per open prompt (paper: 3)")
    g.add_argument("--cf-mitigations", default="", help=f"mitigation instructions to add, of {list(MITIGATIONS)}")
    g.add_argument("--cf-max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS, help="token budget of open prompts (paper: 512)")
    g.add_argument("--cf-numeric-max-new-tokens", type=int, default=DEFAULT_NUMERIC_MAX_NEW_TOKENS, help="token budget of numeric prompts (0 = --cf-max-new-tokens)")
    g.add_argument("--cf-judge-backend", default="transformers", choices=["transformers", "openai", "none"], help="stereotype filter model backend (App. D.2)")
    g.add_argument("--cf-judge-model", default=None, help="stereotype filter model (default: the audit's local model / gpt-4o)")
    g.add_argument("--cf-lexicon", default=None, help="competence lexicon: word list or word,dimension,direction CSV (default: the authors' 861 words)")


def _csv(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def config_from_args(args, enabled: bool = True) -> dict:
    """:class:`CounterfactualConfig` fields from parsed ``dora audit`` arguments."""
    return {
        "enabled": enabled,
        "model": args.model,
        "backend": args.backend,
        "base_url": args.base_url,
        "batch_size": args.batch_size,
        "subsets": _csv(args.cf_subsets),
        "occupations": _csv(args.cf_occupations),
        "sets_per_occupation": args.cf_sets_per_occupation,
        "max_sets": args.cf_max_sets,
        "custom_occupations": _csv(args.cf_custom_occupations),
        "prompts": _csv(args.cf_prompts),
        "seeds": args.cf_seeds,
        "mitigations": _csv(args.cf_mitigations),
        "max_new_tokens": args.cf_max_new_tokens,
        "numeric_max_new_tokens": args.cf_numeric_max_new_tokens or None,
        "progress": getattr(args, "progress", not getattr(args, "no_progress", False)),
        "judge_backend": args.cf_judge_backend,
        "judge_model": args.cf_judge_model,
        "lexicon": args.cf_lexicon,
        "max_error_share": args.max_error_share,  # the shared --max-error-share
    }


def run_config_ops(args, enabled: bool | None = None) -> dict:
    """``{"<op>": CounterfactualConfig}`` for every counterfactual op (merge into the run
    config's ``ops``). ``enabled``: default = ``--probe`` absent or naming ``counterfactual``."""
    if enabled is None:
        probes = getattr(args, "probe", None)
        enabled = not probes or "counterfactual" in probes
    cfg = CounterfactualConfig(**config_from_args(args, enabled))
    return {op: cfg for op in COUNTERFACTUAL_OPS}


def audit_report(result) -> str:
    """Lines for ``dora audit``'s summary: what the counterfactual assets of ``result`` did."""
    lines = []
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or not key[1].startswith("counterfactual_"):
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("skipped"):
            if key[1] == "counterfactual_responses":
                lines.append(f"  skipped: {md['skipped']}")
            continue
        if key[1] == "counterfactual_responses":
            lines.append(
                f"  {md.get('audit_id')}: {md.get('rows_generated')} new responses ({md.get('rows_planned')} planned, "
                f"{md.get('sets')} sets, max {md.get('max_new_tokens')} tokens)"
            )
        elif key[1] == "counterfactual_toxicity":
            lines.append(f"  toxicity: {md.get('rows_scored')} responses scored ({md.get('scorer')})")
        elif key[1] == "counterfactual_stereotype_flags":
            lines.append(f"  stereotype filter: {md.get('answers')} answers for {md.get('groups_with_candidates')} groups")
    if lines:
        lines = ['counterfactual probe (dora query "select * from agg_max_toxicity"):', *lines]
    return "\n".join(lines)
