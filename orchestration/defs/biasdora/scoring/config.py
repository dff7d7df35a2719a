"""Run configuration of the scoring assets (Dagster ``Config``); ``dora audit`` flags are derived from them.

In a partitioned run (registry target ``<target>@<version>``), each scorer reads the target's
``scorers`` list from the registry (``registry`` below, else the run's ``dora/registry`` tag,
else ``$DORA_REGISTRY`` / ``registry.yaml``): it scores only when listed, and only that partition's
audits; ``audit_id`` then narrows further.
"""

from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import Field

from ingestion.vocabulary import DEFAULT_MODEL, DEFAULT_SENTIMENT_SCORER, DEFAULT_TOXICITY_SCORER, JUDGE_BACKENDS
from models_inference.probes.biasdora.prompts import PAPER_JUDGE_MAX_NEW_TOKENS, PAPER_JUDGE_TEMPERATURE
from orchestration.defaults import MAX_JUDGE_RUNS
from orchestration.defs.common import BatchApiOptions, ErrorShareLimit


class ScoringSelection(dg.Config):
    """Which associations a scoring asset scores (the fields every scorer config shares)."""

    score_all: bool = Field(False, description="score every association, not only the significant ones (= --score-pool all)")
    score_pool: str = Field(
        "fisher",
        description="which associations are scored: fisher (q < 0.05), paper (the paper's p-value significant pool, docs/method.md#3a-paper-statistics) or all; recorded on every score row",
    )
    audit_id: Optional[str] = Field(None, description="only this audit's associations (default: every audit's; partitioned runs: the partition's)")
    registry: Optional[str] = None


def _scorer_field(default: str, models: str, measurement: str, note: str = ""):
    """The ``scorer`` field of a text-scorer config: the names ``load_named_scorer``
    (models_inference/scoring/common.py) accepts, the built-in / transformers ones (``models``)
    and an HF ``evaluate`` ``measurement``."""
    return Field(default, description=f"{models}, or evaluate:{measurement} / evaluate:<local module>[::<model>] (HF evaluate{note})")


class SentimentConfig(ScoringSelection):
    """Sentiment scoring (docs/method.md#4-scoring)."""

    scorer: str = _scorer_field(
        DEFAULT_SENTIMENT_SCORER,
        "'vader', a transformers sentiment model id/folder (paper: distilbert/distilbert-base-uncased-finetuned-sst-2-english)",
        "regard",
        " regard: polarity towards the demographic",
    )
    batch_size: int = 64


class ToxicityConfig(ScoringSelection):
    """Toxicity scoring (docs/method.md#4-scoring)."""

    scorer: str = _scorer_field(
        DEFAULT_TOXICITY_SCORER,
        "'toxic-comment-classifier', a transformers toxicity model id/folder (paper: s-nlp/roberta_toxicity_classifier)",
        "toxicity",
    )
    batch_size: int = 64


class JudgeConfig(ScoringSelection, ErrorShareLimit, BatchApiOptions):
    """LLM judge (docs/method.md#4-scoring; the paper's prompts, temperature 0.7, 10 tokens)."""

    backend: str = Field(JUDGE_BACKENDS[0], description="LLM judge backend ('none' skips the judge)")
    model: Optional[str] = Field(
        None,
        description=f"judge model (default: {DEFAULT_MODEL} for transformers, gpt-4o for openai); several judges comma-separated "
        "(each judges every association, their agreement is in agg_judge_agreement)",
    )
    base_url: Optional[str] = Field(
        None,
        description="OpenAI-compatible endpoint of the judge; key from $OPENAI_API_KEY (never stored); several, comma-separated: a fleet (least busy server, failover)",
    )
    runs: int = Field(1, ge=1, le=MAX_JUDGE_RUNS, description="judgements per association (k runs, each with its own seed); every run is kept")
    answer_mode: Optional[str] = Field(
        None,
        description="constrained (default): the answer restricted to 1-5 (a local model's first token; a server's "
        "grammar / structured_outputs / regex / json_schema, found by a capability probe; free where a server has none), "
        "or free: the paper's free answer, parsed",
    )
    temperature: float = PAPER_JUDGE_TEMPERATURE
    max_new_tokens: int = PAPER_JUDGE_MAX_NEW_TOKENS
    batch_size: int = 16
    enabled: bool = Field(True, description="run the judge (its asset lands nothing otherwise)")
    progress: bool = True
