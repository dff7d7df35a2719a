"""Run configuration of the scoring assets (Dagster ``Config``); ``dora audit`` flags fill them.

In a partitioned run (registry target ``<target>@<version>``), each scorer reads the target's
``scorers`` list from the registry (``registry`` below, else the T2T op's ``registry``, else
``$DORA_REGISTRY`` / ``registry.yaml``): it scores only when listed, and only that partition's
audits; ``audit_id`` then narrows further.
"""

from __future__ import annotations

from typing import Optional

import dagster as dg

from models_inference.scorers import DEFAULT_SENTIMENT_SCORER, DEFAULT_TOXICITY_SCORER


class ScoringSelection(dg.Config):
    """Which associations a scoring asset scores (the fields every scorer config shares).

    Attributes:
        score_all: score every association, not only the significant ones (= score_pool 'all').
        score_pool: ``fisher`` (default: Fisher q < 0.05), ``paper`` (the paper's p-value
            significant pool, METHOD.md 3a) or ``all``; recorded on every score row.
        audit_id: only this audit's associations (default: every audit's; in a partitioned
            run, every audit of the partition).
        registry: registry file of partitioned runs (see the module docstring).
    """

    score_all: bool = False
    score_pool: str = "fisher"
    audit_id: Optional[str] = None
    registry: Optional[str] = None


class SentimentConfig(ScoringSelection):
    """Sentiment scoring (``dora audit --sentiment-scorer``, ``--score-all``).

    Attributes:
        scorer: ``vader`` (offline default) or a transformers sentiment model id / folder
            (paper: distilbert/distilbert-base-uncased-finetuned-sst-2-english).
        batch_size: sentences per scoring batch.
    """

    scorer: str = DEFAULT_SENTIMENT_SCORER
    batch_size: int = 64


class ToxicityConfig(ScoringSelection):
    """Toxicity scoring (``dora audit --toxicity-scorer``, ``--score-all``).

    Attributes:
        scorer: ``toxic-comment-classifier`` (offline default, Jigsaw BiLSTM) or a transformers
            toxicity model id / folder (paper: s-nlp/roberta_toxicity_classifier).
        batch_size: sentences per scoring batch.
    """

    scorer: str = DEFAULT_TOXICITY_SCORER
    batch_size: int = 64


class JudgeConfig(ScoringSelection):
    """LLM judge (``dora audit --judge-backend/--judge-model/--judge-base-url/--judge-repeats``).

    Attributes:
        backend: ``transformers`` (local chat model) or ``openai`` (OpenAI-compatible endpoint;
            key from ``$OPENAI_API_KEY`` only).
        model: judge model (default: embedded SmolLM2-135M-Instruct / ``gpt-4o``).
        base_url: OpenAI-compatible endpoint root.
        repeats: k judgements per association (default 1); every one is kept.
        answer_mode: ``free`` (paper) or ``constrained`` (local only); default per backend.
        temperature / max_new_tokens: paper: 0.7 / 10.
        enabled: turn the judge off (its asset then lands nothing).
        score_all / audit_id / registry: :class:`ScoringSelection` (registry scorer name
            ``bias_level``).
    """

    backend: str = "transformers"
    model: Optional[str] = None
    base_url: Optional[str] = None
    repeats: int = 1
    answer_mode: Optional[str] = None
    temperature: float = 0.7
    max_new_tokens: int = 10
    batch_size: int = 16
    enabled: bool = True
    progress: bool = True
