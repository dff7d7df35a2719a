"""BiasDora's fields of a registry target: ``probe`` (the descriptor probe of the target's
modality), ``scorers`` and ``judges`` (who scores its associations) and ``checks`` (the collapse
ratios as an older registry spelled them).

The registry (:mod:`ingestion.registry`) knows no family: it finds this module among the
families' folders of ``ingestion/`` and validates each of these fields with the type given
here, its problems reported like every other field's (``targets[0] (name 'x').probe.runs:
...``, one line each). ``orchestration/defs/biasdora/target.py`` maps them onto BiasDora's run
config; ``AuditTarget.family_field`` reads them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ingestion.contracts.biasdora import CURATED_SOURCE, DESCRIPTOR_SOURCES, FAMILY
from ingestion.vocabulary import DEFAULT_MODALITY_SETTINGS, I2T_SETTINGS, MODALITY_SETTINGS, T2T_SETTINGS

__all__ = ["FAMILY", "TARGET_FIELDS", "CollapseThresholds", "ProbeSettings", "probe_settings"]


class ProbeSettings(BaseModel):
    """Settings of the descriptor probe of the target's modality (T2T, T2I or I2T): a target's
    ``probe`` block (``orchestration/defs/biasdora/target.py`` maps it onto the run config).

    Defaults are the quick audit: all 5 T2T settings, 2 curated descriptors per bias
    dimension, 4 runs per letter, sampling as the paper (temperature 0.7, top_p 0.95).
    """

    model_config = ConfigDict(extra="forbid")

    settings: list[str] = Field(default_factory=lambda: list(T2T_SETTINGS))
    runs: Annotated[int, Field(ge=1)] = 4
    letters: str = "abcdefghijklmnopqrstuvwxyz"
    # the closed set is the tuple, written once; pydantic reads Literal[tuple] as its members
    descriptor_source: Literal[DESCRIPTOR_SOURCES] = CURATED_SOURCE  # type: ignore[valid-type]
    descriptors: list[str] = Field(default_factory=list)
    per_dimension: Annotated[int, Field(ge=0)] = 2
    prompt_style: Optional[Literal["chat", "completion"]] = None
    temperature: Annotated[float, Field(gt=0, le=2)] = 0.7
    top_p: Annotated[float, Field(gt=0, le=1)] = 0.95
    batch_size: Annotated[int, Field(ge=1)] = 64

    @field_validator("settings")
    @classmethod
    def _known_settings(cls, value: list[str]) -> list[str]:
        known = list(dict.fromkeys([*T2T_SETTINGS, *I2T_SETTINGS]))  # per modality: _probe_problems
        unknown = [s for s in value if s not in known]
        if unknown or not value:
            raise ValueError(f"unknown or no setting(s) {unknown}; expected some of {known}")
        return value

    @field_validator("letters")
    @classmethod
    def _lower_letters(cls, value: str) -> str:
        if not value or any(not ("a" <= c <= "z") for c in value):
            raise ValueError(f"must be lower-case letters a-z, got {value!r}")
        return value


class CollapseThresholds(BaseModel):
    """The collapse ratios of BiasDora's drift checks as an older registry spelled them
    (``checks: {parse_rate_min_ratio: 0.5, ...}``), still read for one release; ``options:
    {biasdora: {checks: {<check>: <ratio>}}}`` is the place now (docs/operations.md#drift-checks)."""

    model_config = ConfigDict(extra="forbid")

    parse_rate_min_ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    significant_min_ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    min_previous_significant: Annotated[int, Field(ge=1)] = 5


def _probe_problems(probe: ProbeSettings, target: dict) -> list[str]:
    """What ``probe`` cannot be for the target's modality (``target``: its other fields, parsed)."""
    modality = target.get("modality", "t2t")
    problems = []
    if "settings" in probe.model_fields_set and modality in MODALITY_SETTINGS:
        wrong = [s for s in probe.settings if s not in MODALITY_SETTINGS[modality]]
        if wrong:
            problems.append(
                f"probe.settings: {wrong} are not {modality.upper()} settings; a {modality} target takes "
                f"some of {list(MODALITY_SETTINGS[modality])} (default: {list(DEFAULT_MODALITY_SETTINGS[modality])})"
            )
    if modality == "t2i" and probe.descriptor_source != CURATED_SOURCE:
        problems.append(f"probe.descriptor_source: the T2I probe draws the curated BiasDora descriptors only ({CURATED_SOURCE!r})")
    return problems


#: field -> (type, default, problems of a parsed value given the target's other fields or None).
#: ``scorers``: which of sentiment / toxicity / bias_level (LLM judge) score the partition's
#: associations; default ``[]``: none (an explicit choice per target, e.g. to keep API judge
#: costs off). ``judges``: the LLM judge models, on the run's judge backend; several give
#: ``agg_judge_agreement`` rows; default ``[]``: the run's ``--judge-model``.
TARGET_FIELDS: dict[str, tuple[Any, Any, Any]] = {
    "probe": (ProbeSettings, {}, _probe_problems),
    "scorers": (list[Literal["sentiment", "toxicity", "bias_level"]], [], None),
    "judges": (list[str], [], None),
    "checks": (CollapseThresholds, {}, None),
}


def probe_settings(target) -> list[str]:
    """The probe settings a registry target runs: ``probe.settings`` if listed, else its
    modality's default (``ingestion.vocabulary.DEFAULT_MODALITY_SETTINGS``)."""
    probe = target.family_field("probe")
    if "settings" in probe.model_fields_set:
        return list(probe.settings)
    return list(DEFAULT_MODALITY_SETTINGS[target.modality])
