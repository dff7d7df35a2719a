"""Hugging Face ``evaluate`` measurements as dora scorers: toxicity and regard.

An addition to the paper (BiasDora, seed 004, Section 3.3 scores sentiment with an SST-2
DistilBERT and toxicity with ``s-nlp/roberta_toxicity_classifier``; docs/method.md#4-scoring):
``evaluate``'s measurements are the field's shared implementations of the same views.

* ``--toxicity-scorer evaluate:toxicity``: the ``toxicity`` measurement (hub default model
  ``facebook/roberta-hate-speech-dynabench-r4-target``; its ``hate`` probability), landed in
  ``toxicity_scores`` like any toxicity scorer (toxic at 0.5).
* ``--sentiment-scorer evaluate:regard``: the ``regard`` measurement (Sheng et al. 2019,
  "The Woman Worked as a Babysitter"; hub model ``sasha/regardv3``): the polarity of the
  language *towards the demographic* the text is about, which is what a descriptor-
  conditioned association sentence needs. Landed in ``sentiment_scores``: label = the most
  probable regard (``other`` counted as neutral), score = P(positive) - P(negative).

Name syntax: ``evaluate:<module>[::<config name>]`` where ``<module>`` is a hub measurement
name (needs hub access, or the module in the local ``evaluate`` cache) or a local module path
(a ``.py`` script or a folder holding ``<folder name>.py``), and the config name is passed as
``config_name`` (the toxicity measurement reads its classifier from it: a model id or a
local folder). Offline (``HF_HUB_OFFLINE=1``) only local modules and cached models load;
otherwise :class:`ModelNotAvailableError` says so. ``honest`` (which needs the HONEST lexicon
from the hub) is not wired.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ingestion.errors import ModelNotAvailableError

__all__ = ["EvaluateRegardScorer", "EvaluateToxicityScorer", "is_evaluate_scorer", "load_evaluate_scorer"]

PREFIX = "evaluate:"
#: measurements and the dora scorer kind they feed
MEASUREMENT_KINDS = {"toxicity": "toxicity", "regard": "sentiment"}


def is_evaluate_scorer(name: str) -> bool:
    """True for scorer names ``evaluate:...``."""
    return name.startswith(PREFIX)


def _module_file(module: str) -> Path | None:
    """The local script of a module path (``x.py`` or folder ``x/`` holding ``x.py``), else None."""
    path = Path(module).expanduser()
    if path.is_file():
        return path
    if path.is_dir() and (path / f"{path.name}.py").is_file():
        return path / f"{path.name}.py"
    return None


def _measurement_name(module: str) -> str:
    """``toxicity`` / ``regard`` for a hub name or a local module's file name."""
    local = _module_file(module)
    return (local.stem if local else module.rstrip("/").split("/")[-1]).lower()


def _classifier_version(config_name: str | None) -> str:
    """Version of the classifier named by ``config_name`` (weights hash / hub revision), else the
    module's default model (identified by the module's own hash / hub name)."""
    if not config_name:
        return "module-default-model"
    from models_inference.model_ref import model_version

    try:
        return model_version(config_name)
    except Exception:  # not a model reference dora can version (the module loaded it anyway)
        return "unversioned"


def _load_measurement(module: str, config_name: str | None):
    try:
        import evaluate
    except ImportError as exc:  # pragma: no cover - a dependency of dora
        raise ModelNotAvailableError("the `evaluate` package is not installed (pip install evaluate)") from exc
    kwargs = {"module_type": "measurement"}
    if config_name:
        kwargs["config_name"] = config_name
    local = _module_file(module)
    try:
        return evaluate.load(str(local) if local else module, **kwargs)
    except Exception as exc:  # evaluate raises FileNotFoundError, ConnectionError, OSError, ValueError...
        raise ModelNotAvailableError(
            f"cannot load the evaluate measurement {module!r}"
            + (f" (config {config_name!r})" if config_name else "")
            + f": {type(exc).__name__}: {exc}. Offline, pass a local module path "
            "(evaluate:/path/to/toxicity.py) whose classifier is a local folder or already in the Hugging Face cache."
        ) from exc


def _version(module: str, config_name: str | None, measurement) -> str:
    import evaluate

    local = _module_file(module)
    source = hashlib.sha256(local.read_bytes()).hexdigest()[:12] if local else "hub"
    return f"evaluate-{evaluate.__version__}:{source}:{config_name or 'default'}:{_classifier_version(config_name)}"


@dataclass
class EvaluateToxicityScorer:
    """The ``evaluate`` toxicity measurement as a dora toxicity scorer.

    ``score_batch`` returns ``{"probability": p, "labels": {"toxicity": p}}`` with p =
    ``measurement.compute(predictions=texts)["toxicity"]`` (the probability of the module's
    toxic label, ``hate`` for the hub module's default model).
    """

    module: str
    measurement: object = field(repr=False)
    config_name: str | None = None
    version: str = ""
    kind: str = "toxicity"

    @property
    def name(self) -> str:
        return PREFIX + self.module + (f"::{self.config_name}" if self.config_name else "")

    def score_batch(self, texts: Sequence[str]) -> list[dict]:
        scores = self.measurement.compute(predictions=list(texts))["toxicity"]
        if len(scores) != len(texts):
            raise ValueError(f"evaluate toxicity returned {len(scores)} scores for {len(texts)} texts")
        return [{"probability": float(p), "labels": {"toxicity": float(p)}} for p in scores]


@dataclass
class EvaluateRegardScorer:
    """The ``evaluate`` regard measurement as a dora sentiment scorer (see the module docstring).

    ``score_batch`` returns ``{"label": negative|neutral|positive, "score": P(pos) - P(neg),
    "regard": {label: probability}}``.
    """

    module: str
    measurement: object = field(repr=False)
    config_name: str | None = None
    version: str = ""
    kind: str = "sentiment"

    @property
    def name(self) -> str:
        return PREFIX + self.module + (f"::{self.config_name}" if self.config_name else "")

    def score_batch(self, texts: Sequence[str]) -> list[dict]:
        per_text = self.measurement.compute(data=list(texts))["regard"]
        if len(per_text) != len(texts):
            raise ValueError(f"evaluate regard returned {len(per_text)} results for {len(texts)} texts")
        out = []
        for items in per_text:
            probs = {item["label"].lower(): float(item["score"]) for item in items}
            best = max(probs, key=probs.get)
            label = best if best in ("negative", "neutral", "positive") else "neutral"
            out.append({"label": label, "score": probs.get("positive", 0.0) - probs.get("negative", 0.0), "regard": probs})
        return out


def load_evaluate_scorer(name: str, *, kind: str | None = None):
    """Build the scorer for ``evaluate:<module>[::<config name>]``.

    Args:
        name: the scorer name (see the module docstring).
        kind: ``toxicity`` or ``sentiment``: the slot it is used for (checked against the
            measurement: toxicity -> toxicity, regard -> sentiment).

    Raises:
        ValueError: not an ``evaluate:`` name, an unsupported measurement, or the wrong slot.
        ModelNotAvailableError: the module or its model cannot be loaded here.
    """
    if not is_evaluate_scorer(name):
        raise ValueError(f"not an evaluate scorer name: {name!r} (expected evaluate:<module>[::<config>])")
    spec = name[len(PREFIX) :]
    module, _, config_name = spec.partition("::")
    measurement_name = _measurement_name(module)
    if measurement_name not in MEASUREMENT_KINDS:
        raise ValueError(
            f"evaluate measurement {measurement_name!r} is not supported as a dora scorer; supported: "
            f"{sorted(MEASUREMENT_KINDS)} (toxicity -> --toxicity-scorer, regard -> --sentiment-scorer)"
        )
    if kind is not None and MEASUREMENT_KINDS[measurement_name] != kind:
        raise ValueError(
            f"evaluate measurement {measurement_name!r} scores {MEASUREMENT_KINDS[measurement_name]}, not {kind}: "
            f"use it with --{MEASUREMENT_KINDS[measurement_name]}-scorer"
        )
    measurement = _load_measurement(module, config_name or None)
    cls = EvaluateToxicityScorer if measurement_name == "toxicity" else EvaluateRegardScorer
    return cls(module, measurement, config_name or None, _version(module, config_name or None, measurement))
