"""Hugging Face ``evaluate`` measurements as scorers, offline.

Local measurement modules with the interface of the hub's ``toxicity`` and ``regard``
measurements (their ``compute`` inputs and outputs; the classifier named by ``config_name``)
are loaded by path through ``evaluate.load``, on a tiny random-weight classifier built from a
config; dora's scores must equal the classifier's own probabilities, and land through
``score_associations``. The hub name without hub access is a clear error.
"""

from __future__ import annotations

import pytest

from models_inference.scoring.sentiment import load_sentiment_scorer
from models_inference.scoring.toxicity import load_toxicity_scorer
from tests.helpers.tiny_models import tiny_classifier

#: A local measurement module with the interface of a hub measurement: {name} is its hub name,
#: {field} its input, {compute} its ``_compute`` (the classifier is ``self.classifier``).
MODULE = '''
"""Local copy of the interface of the hub measurement evaluate-measurement/{name} (Apache-2.0)."""
import datasets
import evaluate
from transformers import pipeline


class {cls}(evaluate.Measurement):
    def _info(self):
        return evaluate.MeasurementInfo(
            module_type="measurement", description="{name} (local test module)", citation="", inputs_description="",
            features=datasets.Features({{"{field}": datasets.Value("string", id="sequence")}}), reference_urls=[],
        )

    def _download_and_prepare(self, dl_manager):
        model = "{default_model}" if self.config_name == "default" else self.config_name
        self.classifier = pipeline("text-classification", model=model, top_k={top_k}, truncation=True)
{compute}'''

TOXICITY_MODULE = MODULE.format(
    name="toxicity",
    cls="Toxicity",
    field="predictions",
    default_model="facebook/roberta-hate-speech-dynabench-r4-target",
    top_k=99999,
    compute="""
    def _compute(self, predictions, aggregation="all", toxic_label="hate", threshold=0.5):
        scores = [[r["score"] for r in pred if r["label"] == toxic_label][0] for pred in self.classifier(predictions)]
        return {"toxicity": scores}
""",
)

REGARD_MODULE = MODULE.format(
    name="regard",
    cls="Regard",
    field="data",
    default_model="sasha/regardv3",
    top_k=4,
    compute="""
    def _compute(self, data, references=None, aggregation=None):
        return {"regard": self.classifier(data)}
""",
)

TEXTS = ["An old person is a liar", "A child is happy"]


def _module(tmp_path, name: str, source: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(source)
    return folder


def _probs(tok, model, texts):
    import torch

    with torch.no_grad():
        return torch.softmax(model(**tok(texts, return_tensors="pt", padding=True)).logits, -1).tolist()


def test_evaluate_toxicity_from_a_local_module_equals_its_classifier_and_lands(tmp_path, dora_home):
    from ingestion.landing import read_landing
    from models_inference.probes.biasdora.scoring import score_associations
    from models_inference.scoring.cache import ScoreCache

    clf = tmp_path / "clf"
    clf.mkdir()
    tok, model = tiny_classifier(clf, ["nothate", "hate"])
    module = _module(tmp_path, "toxicity", TOXICITY_MODULE)
    scorer = load_toxicity_scorer(f"evaluate:{module}::{clf}")
    assert scorer.name == f"evaluate:{module}::{clf}" and scorer.kind == "toxicity"
    from models_inference.model_ref import model_version

    # evaluate version, the module's hash and the classifier's weights version: the score cache key
    assert scorer.version.startswith("evaluate-0.") and scorer.version.endswith(":" + model_version(str(clf)))
    res = scorer.score_batch(TEXTS)
    for r, p in zip(res, _probs(tok, model, TEXTS), strict=True):
        assert r["probability"] == pytest.approx(p[1], abs=1e-6)

    assoc = {
        "audit_id": "a",
        "model_id": "m",
        "model_version": "v",
        "modality": "t2t",
        "setting": "singular",
        "descriptor": "old person",
        "word": "liar",
        "text": TEXTS[0],
    }
    summary = score_associations(scorer, [assoc], cache=ScoreCache(tmp_path / "cache.sqlite"))
    assert summary.generated == 1
    landed = read_landing("toxicity_scores").to_pylist()
    assert [(r["scorer"], r["toxicity"]) for r in landed] == [(scorer.name, pytest.approx(res[0]["probability"]))]


def test_evaluate_regard_is_a_sentiment_scorer(tmp_path):
    clf = tmp_path / "clf"
    clf.mkdir()
    labels = ["negative", "neutral", "other", "positive"]
    tok, model = tiny_classifier(clf, labels)
    module = _module(tmp_path, "regard", REGARD_MODULE)
    scorer = load_sentiment_scorer(f"evaluate:{module}::{clf}")
    assert scorer.kind == "sentiment"
    for r, p in zip(scorer.score_batch(TEXTS), _probs(tok, model, TEXTS), strict=True):
        probs = dict(zip(labels, p, strict=True))
        assert r["score"] == pytest.approx(probs["positive"] - probs["negative"], abs=1e-6)
        best = max(probs, key=probs.get)
        assert r["label"] == ("neutral" if best == "other" else best)
    # the wrong slot, an unsupported measurement and the hub without access are clear errors
    with pytest.raises(ValueError, match="scores sentiment, not toxicity: use it with --sentiment-scorer"):
        load_toxicity_scorer(f"evaluate:{module}::{clf}")
    with pytest.raises(ValueError, match="'bleu' is not supported as a dora scorer"):
        load_toxicity_scorer("evaluate:bleu")
