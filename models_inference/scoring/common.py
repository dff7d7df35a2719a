"""What every text scorer shares: the :class:`TextScorer` interface and the ``transformers``
text-classifier loading of the sentiment and toxicity scorers.

A :class:`TextScorer` (``name``, ``version``, ``kind``, ``score_batch(texts) -> list[dict]``)
is a sentiment scorer (:mod:`models_inference.scoring.sentiment`), a toxicity scorer
(:mod:`models_inference.scoring.toxicity`) or an HF ``evaluate`` measurement
(:mod:`models_inference.scoring.hf_evaluate`); :func:`models_inference.scoring.run.score_texts`
lands what it says about a family's texts. Nothing here knows a probe family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

from ingestion.errors import ModelNotAvailableError
from models_inference.model_ref import model_version

# --------------------------------------------------------------------------- interface


class TextScorer(Protocol):
    """A batched text scorer.

    Attributes:
        name: scorer name stored with every score (``vader``, ``transformers:<model id>``...).
        version: exact version (package version / weights hash); part of the cache key.
        kind: ``sentiment`` or ``toxicity``.
    """

    name: str
    version: str
    kind: str

    def score_batch(self, texts: Sequence[str]) -> list[dict]:
        """One JSON-serialisable result per text, in order.

        Sentiment results: ``{"label": "negative"|"neutral"|"positive", "score": float in
        [-1, 1]}``. Toxicity results: ``{"probability": float in [0, 1], "labels": {label:
        probability}}``.
        """
        ...


def load_text_classifier(model_id: str, batch_size: int):
    """A ``transformers`` text-classification pipeline returning every label's score
    (the sentiment and toxicity scorers' loader).

    Raises:
        ModelNotAvailableError: the model is neither local nor in the Hugging Face cache.
    """
    from transformers import pipeline

    try:
        return pipeline("text-classification", model=model_id, tokenizer=model_id, top_k=None, device=-1, batch_size=batch_size)
    except (OSError, ValueError) as exc:
        raise ModelNotAvailableError(
            f"cannot load text-classification model {model_id!r}: {exc}. Use a local folder or a hub id that "
            "is already in the Hugging Face cache (no hub access here), or the offline default scorer."
        ) from exc


@dataclass
class TransformersClassifierScorer:
    """What the ``transformers`` sentiment and toxicity scorers share: a text-classification
    pipeline (:func:`load_text_classifier`) of ``model_id``, named ``transformers:<model id>``,
    versioned by :func:`models_inference.model_ref.model_version`.

    Attributes:
        labels: the model's labels (``id2label`` values), in order.
    """

    model_id: str
    classifier: object = field(repr=False)
    version: str = ""

    @property
    def name(self) -> str:
        return f"transformers:{self.model_id}"

    @property
    def labels(self) -> list[str]:
        return list(self.classifier.model.config.id2label.values())

    @classmethod
    def from_model(cls, model_id: str, batch_size: int, **fields):
        """Load the pipeline (raises ModelNotAvailableError) and version it; ``fields`` go to the subclass."""
        return cls(model_id=model_id, classifier=load_text_classifier(model_id, batch_size), version=model_version(model_id), **fields)


def load_named_scorer(name: str, kind: str, builtin: Mapping[str, Callable[[], TextScorer]], transformers_class, batch_size: int) -> TextScorer:
    """The one naming rule of every text scorer kind: a built-in scorer by its name
    (``builtin``: name -> constructor), ``evaluate:<measurement>`` (HF ``evaluate``,
    :mod:`models_inference.scoring.hf_evaluate`; ``kind`` is ``sentiment`` or ``toxicity``, how
    its output is read), else a ``transformers`` model id or local folder, optionally prefixed
    ``transformers:`` (``transformers_class.load(model, batch_size=...)``).

    Raises:
        ModelNotAvailableError: the model cannot be loaded here.
    """
    if name in builtin:
        return builtin[name]()
    if name.startswith("evaluate:"):
        from models_inference.scoring.hf_evaluate import load_evaluate_scorer

        return load_evaluate_scorer(name, kind=kind)
    return transformers_class.load(name.removeprefix("transformers:"), batch_size=batch_size)


__all__ = ["TextScorer", "TransformersClassifierScorer", "load_named_scorer", "load_text_classifier"]
