"""BiasDora's drift checks (``ProbeFamily.drift``): what ``agg_biasdora_drift`` counts per
modality, their default collapse ratios, and the ratios an older registry's ``checks:`` block
gave. ``dora diff --fail-on collapse`` judges with the same checks and ratios (``summary.py``)."""

from __future__ import annotations

from analytics.drift import DriftCheck, FamilyDrift
from ingestion.contracts.biasdora import FAMILY

__all__ = ["DRIFT", "legacy_thresholds"]

#: BiasDora's drift checks, per modality (dbt_project/models/marts/biasdora/agg_biasdora_drift.sql)
DRIFT = FamilyDrift(
    FAMILY,
    "agg_biasdora_drift",
    (
        DriftCheck("parse_rate", "share of the common probe rows whose answer parsed; exact McNemar", "falls"),
        DriftCheck(
            "significant_associations",
            "associations with Fisher BH q < 0.05 on the common probe rows; exact McNemar of the flips",
            "falls",
            min_before=5,
        ),
        DriftCheck(
            "judge_unscored_share",
            "share of the associations significant in both audits without a Likert bias level; exact McNemar",
            "rises",
            optional=True,
        ),
    ),
)


def legacy_thresholds(target) -> dict[str, float]:
    """The collapse ratios of a registry target's older ``checks:`` block (read for one release)."""
    block = getattr(target, "checks", None)
    if block is None or not block.model_fields_set:
        return {}
    fields = {"parse_rate_min_ratio": "parse_rate", "significant_min_ratio": "significant_associations"}
    return {check: getattr(block, field) for field, check in fields.items() if field in block.model_fields_set}
