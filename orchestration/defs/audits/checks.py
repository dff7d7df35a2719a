"""Collapse checks: a new audit's parse rate / significant associations vs the previous one.

Both checks read ``dim_audits`` (built by dbt: each finished audit with the counts of the
previous finished audit of the same target) and judge, for every target, its latest
finished audit. They fail with severity ERROR (red in the UI, listed on the run) when

* parse rate: ``parse_rate < parse_rate_min_ratio x previous_parse_rate``;
* significant associations: the previous audit had at least ``min_previous_significant``
  and ``significant_associations < significant_min_ratio x previous``,

with the thresholds of the target in the audit registry (``checks:``; defaults 0.5, 0.5
and 5). A target's first audit has nothing to compare with and passes.
"""

from __future__ import annotations

import warnings

import dagster as dg

from analytics.query import run_query
from ingestion.registry import CollapseThresholds, RegistryError, load_registry
from orchestration.instance import DUCKDB_WRITER_POOL

DIM_AUDITS = dg.AssetKey("dim_audits")

_LATEST_SQL = """
select target, audit_id, model_version, previous_audit_id, completions, parse_rate, previous_parse_rate,
       significant_associations, previous_significant_associations
from dim_audits
where status = 'finished'
qualify row_number() over (partition by target order by audit_seq desc) = 1
order by target
"""


def _thresholds() -> dict[str, CollapseThresholds]:
    try:
        return {t.name: t.checks for t in load_registry().targets}
    except RegistryError as exc:
        warnings.warn(f"{exc}\ncollapse checks use the default thresholds", stacklevel=2)
        return {}


def latest_audits() -> list[dict]:
    """The latest finished audit of every target, with its previous audit's counts."""
    result = run_query(_LATEST_SQL)
    return [dict(zip(result.columns, row)) for row in result.rows]


def collapsed(new: float | None, previous: float | None, ratio: float, minimum_previous: float = 0.0) -> bool:
    """True when ``new < ratio x previous`` (and ``previous >= minimum_previous``); None never collapses."""
    if new is None or previous is None or previous < minimum_previous or previous <= 0:
        return False
    return new < ratio * previous


def _evaluate(metric: str, previous_metric: str, ratio_field: str, minimum_field: str | None) -> dg.AssetCheckResult:
    thresholds = _thresholds()
    rows = latest_audits()
    failures, judged = [], []
    for row in rows:
        th = thresholds.get(row["target"], CollapseThresholds())
        ratio = getattr(th, ratio_field)
        minimum = getattr(th, minimum_field) if minimum_field else 0.0
        entry = {
            "target": row["target"],
            "audit_id": row["audit_id"],
            "previous_audit_id": row["previous_audit_id"],
            metric: row[metric],
            previous_metric: row[previous_metric],
            "min_ratio": ratio,
        }
        judged.append(entry)
        if collapsed(row[metric], row[previous_metric], ratio, minimum):
            failures.append(entry)
    summary = "; ".join(
        f"{f['target']}: {metric} {f[metric]:.4g} < {f['min_ratio']} x {f[previous_metric]:.4g} (audit {f['audit_id']} vs {f['previous_audit_id']})"
        for f in failures
    )
    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(f"COLLAPSE: {summary}" if failures else f"no collapse over {len(judged)} target(s)"),
        metadata={
            "targets_judged": len(judged),
            "collapsed_targets": dg.MetadataValue.json([f["target"] for f in failures]),
            "latest_audits": dg.MetadataValue.json(judged),
        },
    )


def _collapse_check(name: str, description: str, *metric_fields: str | None) -> dg.AssetChecksDefinition:
    """An ERROR-severity check on ``dim_audits`` comparing each target's latest audit with its
    previous one (:func:`_evaluate` of ``metric_fields``), in the warehouse writer pool."""

    @dg.asset_check(asset=DIM_AUDITS, name=name, description=description, pool=DUCKDB_WRITER_POOL)
    def _check() -> dg.AssetCheckResult:
        return _evaluate(*metric_fields)

    return _check


parse_rate_not_collapsed = _collapse_check(
    "parse_rate_not_collapsed",
    "Fails (ERROR) when a target's latest audit parses under parse_rate_min_ratio (default 0.5) "
    "times the parse rate of its previous audit: the new model version stopped following the probe.",
    "parse_rate",
    "previous_parse_rate",
    "parse_rate_min_ratio",
    None,
)
significant_associations_not_collapsed = _collapse_check(
    "significant_associations_not_collapsed",
    "Fails (ERROR) when a target's latest audit has under significant_min_ratio (default 0.5) times "
    "the significant associations of its previous audit (judged when that one had >= min_previous_significant).",
    "significant_associations",
    "previous_significant_associations",
    "significant_min_ratio",
    "min_previous_significant",
)


audit_checks = [parse_rate_not_collapsed, significant_associations_not_collapsed]
