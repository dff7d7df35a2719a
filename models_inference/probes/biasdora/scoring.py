"""BiasDora's association scoring: sentiment and toxicity of association sentences
(BiasDora Section 3.2; docs/method.md#4-scoring), landed through the generic scoring loop.

Every association (descriptor, word) chosen for scoring (the dbt model
``fct_associations_to_score``: the significant ones, or all with ``score_all``) carries its
*association sentence* ``association_text``, built in SQL: for T2T the sentence prefix the
probe landed with the completion (``t2t_completions.prefix``, e.g. "An alcoholic person is"),
a space and the word ("An alcoholic person is a brawler"); for other modalities
``"<descriptor> <word>"``. Scoring therefore needs no knowledge of the probe's prompts.

:func:`score_associations` lands one row per association in ``sentiment_scores`` /
``toxicity_scores`` (:data:`SCORE_TABLES`) with the text scored beside the score, skipping
the associations already landed for the same scorer version, through
:func:`models_inference.scoring.run.score_texts` (score cache, shards, landing lock). This
module reads no warehouse: the orchestration layer reads ``fct_associations_to_score`` and
passes its rows in.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping, Sequence

from ingestion.vocabulary import ASSOCIATION_KEY
from models_inference.probes.biasdora.prompts import judge_target
from models_inference.scoring.cache import ScoreCache
from models_inference.scoring.common import TextScorer
from models_inference.scoring.run import ScoringSummary, score_texts
from models_inference.scoring.toxicity import TOXIC_THRESHOLD

#: Landing table of each scorer kind's association scores.
SCORE_TABLES: dict[str, str] = {"sentiment": "sentiment_scores", "toxicity": "toxicity_scores"}


def score_columns(kind: str, result: dict) -> dict:
    """The ``sentiment_scores`` / ``toxicity_scores`` columns of one scorer result: sentiment
    label and signed score in [-1, 1]; toxicity probability in [0, 1], ``is_toxic`` at
    :data:`~models_inference.scoring.toxicity.TOXIC_THRESHOLD` and every label's probability
    as JSON.

    Raises:
        ValueError: a kind other than ``sentiment`` / ``toxicity``.
    """
    if kind == "sentiment":
        return {"sentiment_label": result["label"], "sentiment_score": float(result["score"])}
    if kind == "toxicity":
        p = float(result["probability"])
        return {"toxicity": p, "is_toxic": p >= TOXIC_THRESHOLD, "label_scores_json": json.dumps(result["labels"], sort_keys=True)}
    raise ValueError(f"unknown scorer kind {kind!r}; expected one of {sorted(SCORE_TABLES)}")


def baseline_columns(kind: str, text: str, result: dict) -> dict:
    """The baseline columns of one association's score row: the sentence without its word
    (``baseline_text``) and the same scorer's score of it, ``baseline_sentiment_score`` (signed,
    [-1, 1]) or ``baseline_toxicity`` (probability, [0, 1]). The marts subtract it from the
    sentence's score: what the word adds to the descriptor's (docs/method.md#4-scoring).

    Raises:
        ValueError: a kind other than ``sentiment`` / ``toxicity``.
    """
    if kind == "sentiment":
        return {"baseline_text": text, "baseline_sentiment_score": float(result["score"])}
    if kind == "toxicity":
        return {"baseline_text": text, "baseline_toxicity": float(result["probability"])}
    raise ValueError(f"unknown scorer kind {kind!r}; expected one of {sorted(SCORE_TABLES)}")


def summary_label(row: Mapping) -> str:
    """What a scoring summary counts for one landed row: the sentiment label, or toxic / non_toxic."""
    if "sentiment_label" in row:
        return row["sentiment_label"]
    return "toxic" if row["is_toxic"] else "non_toxic"


def with_association_text(rows: Iterable[Mapping]) -> list[dict]:
    """The associations to score, each with its sentence ``text`` and the judge's target.

    Args:
        rows: rows of the dbt model ``fct_associations_to_score`` (read by the orchestration
            layer with :func:`analytics.query.read_relation`): :data:`ASSOCIATION_KEY`,
            ``bias_dimensions``, ``association_text`` (the sentence, built in SQL), ``subject``
            and ``prefix`` (the T2T sentence's, null for other modalities), plus any other
            columns (kept).

    Returns:
        One dict per row, in input order, without ``association_text`` / ``subject`` /
        ``prefix`` and with ``text`` (the sentence) and ``judge_target`` (the target as the
        setting words it: :func:`models_inference.probes.biasdora.prompts.judge_target`).

    Raises:
        KeyError: a row without ``association_text``.
    """
    out = []
    for row in rows:
        row = dict(row)
        text, prefix = row.pop("association_text"), row.pop("prefix", None)
        row.pop("subject", None)
        row["text"] = text
        # the sentence without the word (SQL's baseline_text; the descriptor for rows without it)
        row["baseline_text"] = row.get("baseline_text") or prefix or row["descriptor"]
        t2t = row["modality"] == "t2t"
        row["judge_target"] = judge_target(row["descriptor"], row["setting"] if t2t else None, prefix if t2t else None)
        out.append(row)
    return out


def score_associations(
    scorer: TextScorer,
    associations: Sequence[dict],
    *,
    cache: ScoreCache | None = None,
    batch_size: int = 64,
    shard_rows: int = 2048,
) -> ScoringSummary:
    """Score and land every association not yet landed for this scorer version.

    Args:
        scorer: a sentiment or toxicity :class:`~models_inference.scoring.common.TextScorer`.
        associations: from :func:`with_association_text` (keys + ``text``; ``score_pool``
            defaults to ``fisher``).
        cache: score cache (default: none; the Dagster asset passes the ``$DORA_HOME`` one).
        shard_rows: rows per landed Parquet shard.

    Returns:
        A :class:`~models_inference.scoring.run.ScoringSummary` (``statuses``: labels landed);
        nothing is landed (and nothing scored) when there is nothing to score.

    Raises:
        ValueError: a scorer kind other than ``sentiment`` / ``toxicity``.
    """
    if scorer.kind not in SCORE_TABLES:
        raise ValueError(f"unknown scorer kind {scorer.kind!r}; expected one of {sorted(SCORE_TABLES)}")

    baselines: dict[str, dict] = {}

    def baseline(text: str) -> dict:
        # one score per distinct baseline (a descriptor's prefix is shared by all its words),
        # scored only for the associations that are scored now
        if text not in baselines:
            baselines[text] = scorer.score_batch([text])[0]
        return baselines[text]

    def columns(assoc: Mapping, result: dict) -> dict:
        # the pool the association was selected in (--score-pool); rows before it: fisher
        base_text = assoc.get("baseline_text") or assoc["descriptor"]
        return {
            "text": assoc["text"],
            "score_pool": assoc.get("score_pool", "fisher"),
            **score_columns(scorer.kind, result),
            **baseline_columns(scorer.kind, base_text, baseline(base_text)),
        }

    return score_texts(
        scorer,
        associations,
        table=SCORE_TABLES[scorer.kind],
        key=ASSOCIATION_KEY,
        columns=columns,
        label=summary_label,
        cache=cache,
        batch_size=batch_size,
        shard_rows=shard_rows,
    )


__all__ = ["SCORE_TABLES", "baseline_columns", "score_associations", "score_columns", "summary_label", "with_association_text"]
