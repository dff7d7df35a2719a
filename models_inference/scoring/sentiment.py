"""Sentiment scorers of texts (BiasDora scores its association sentences with them, Section 3.2;
docs/method.md#4-scoring).

Label negative / neutral / positive and a signed score in [-1, 1]. Scorers:
:class:`VaderSentimentScorer` (offline default, ``vaderSentiment``: compound score, labels at
the VADER authors' +-0.05 thresholds) and :class:`TransformersSentimentScorer` (any
``transformers`` text-classification model by id, e.g. the paper's
``distilbert/distilbert-base-uncased-finetuned-sst-2-english``; signed score =
P(positive) - P(negative)).
"""

from __future__ import annotations

import collections
import importlib.metadata
from dataclasses import dataclass, field
from typing import Sequence

from ingestion.vocabulary import DEFAULT_SENTIMENT_SCORER
from models_inference.scoring.common import TextScorer, TransformersClassifierScorer, load_named_scorer

SENTIMENT_LABELS: tuple[str, ...] = ("negative", "neutral", "positive")
#: VADER's documented thresholds on the compound score (Hutto & Gilbert, 2014; package README).
VADER_THRESHOLD = 0.05


def vader_label(compound: float) -> str:
    """VADER's standard labelling of a compound score: >= 0.05 positive, <= -0.05 negative."""
    if compound >= VADER_THRESHOLD:
        return "positive"
    if compound <= -VADER_THRESHOLD:
        return "negative"
    return "neutral"


@dataclass
class VaderSentimentScorer:
    """VADER (Hutto & Gilbert, ICWSM 2014) from ``vaderSentiment``: lexicon and rules, offline.

    Result: ``{"label": vader_label(compound), "score": compound}``, compound in [-1, 1].
    Not the paper's SST-2 DistilBERT (use :class:`TransformersSentimentScorer` for that).
    """

    name: str = "vader"
    kind: str = "sentiment"
    version: str = field(default_factory=lambda: "vaderSentiment-" + importlib.metadata.version("vaderSentiment"))

    def __post_init__(self):
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        self._analyzer = SentimentIntensityAnalyzer()

    def score_batch(self, texts: Sequence[str]) -> list[dict]:
        out = []
        for text in texts:
            compound = float(self._analyzer.polarity_scores(text)["compound"])
            out.append({"label": vader_label(compound), "score": compound})
        return out


def _sentiment_polarity(label: str, n_labels: int) -> str:
    low = label.lower()
    if low.startswith("neg"):
        return "negative"
    if low.startswith("pos"):
        return "positive"
    if low.startswith("neu"):
        return "neutral"
    if n_labels == 2 and low in ("label_0", "label_1"):  # SST-2 convention: 0 negative, 1 positive
        return "negative" if low == "label_0" else "positive"
    raise ValueError(f"cannot map sentiment label {label!r} to negative/neutral/positive")


@dataclass
class TransformersSentimentScorer(TransformersClassifierScorer):
    """Any ``transformers`` sentiment classifier by model id (paper:
    ``distilbert/distilbert-base-uncased-finetuned-sst-2-english``).

    Labels are mapped by name (``NEGATIVE``/``neg``... ; ``LABEL_0``/``LABEL_1`` of a 2-label
    model as SST-2's negative/positive). Result: ``{"label": argmax label, "score":
    P(positive) - P(negative)}``.

    Build with :meth:`load`. Raises ModelNotAvailableError (model not local) or ValueError
    (labels that are not sentiment polarities).
    """

    kind: str = "sentiment"

    @classmethod
    def load(cls, model_id: str, *, batch_size: int = 32) -> "TransformersSentimentScorer":
        scorer = cls.from_model(model_id, batch_size)
        for label in scorer.labels:
            _sentiment_polarity(label, len(scorer.labels))  # fail early on a non-sentiment model
        return scorer

    def score_batch(self, texts: Sequence[str]) -> list[dict]:
        out = []
        for scores in self.classifier(list(texts), truncation=True):
            probs = collections.Counter()
            for item in scores:
                probs[_sentiment_polarity(item["label"], len(scores))] += float(item["score"])
            label = max(probs, key=probs.get)
            out.append({"label": label, "score": probs["positive"] - probs["negative"]})
        return out


def load_sentiment_scorer(name: str = DEFAULT_SENTIMENT_SCORER, *, batch_size: int = 32) -> TextScorer:
    """``vader`` (offline default), a ``transformers`` model id / local folder
    (optionally prefixed ``transformers:``), or ``evaluate:regard`` / ``evaluate:<local module>``
    (:mod:`models_inference.scoring.hf_evaluate`).

    Raises:
        ModelNotAvailableError: the model cannot be loaded here.
    """
    return load_named_scorer(name, "sentiment", {"vader": VaderSentimentScorer}, TransformersSentimentScorer, batch_size)


__all__ = [
    "SENTIMENT_LABELS",
    "TransformersSentimentScorer",
    "VaderSentimentScorer",
    "load_sentiment_scorer",
    "vader_label",
]
