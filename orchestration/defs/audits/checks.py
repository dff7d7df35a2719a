"""Drift checks as Dagster asset checks: one per check a family declares, on its drift mart.

Each probe family declares its drift checks in its record (``ProbeFamily.drift``, an
``analytics.drift.FamilyDrift``) and counts them in its own drift mart
(``dbt_project/models/marts/<family>/agg_<family>_drift``). For every such check this module
makes an asset check on that mart (so it sits in the family's group and runs whenever a run
builds the mart) that judges, for every target, the family's latest finished audit of each
modality against its previous one (:func:`analytics.drift.evaluate_drift`): whichever family's
audit finished last, each family is judged on its own pair.

The check fails with severity ERROR when a target's pair collapsed (the ratio threshold: the
check's default, or the target's ``options: {<family>: {checks: {<check>: <ratio>}}}``), with
severity WARN when it changed significantly (the family's change test, BH-adjusted over the
checks of the audit, at the audit's significance level) or when the two audits have no probe
unit in common for it ("not comparable": never a pass). Every alarm (collapse or change) of a
target whose registry entry names ``notify: {webhook: URL}`` is POSTed there once
(``orchestration/alarms.py``); a failed delivery never fails the check.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import dagster as dg

from analytics.drift import DriftCheck, DriftResult, evaluate_drift, worst_state
from ingestion.registry import RegistryError, load_registry
from orchestration.alarms import deliver_alarms, registry_webhooks
from orchestration.instance import DUCKDB_WRITER_POOL
from orchestration.options import drift_thresholds


def _registry_targets(path: str | None = None):
    """(registry, {target name: AuditTarget}); ``(None, {})`` (with a warning) when it does not load."""
    try:
        registry = load_registry(path)
    except RegistryError as exc:
        warnings.warn(f"{exc}\ndrift checks use the default thresholds and send no webhook", stacklevel=2)
        return None, {}
    return registry, {t.name: t for t in registry.targets}


def judge_families(families: Sequence, *, deliver: bool = True, registry_path: str | None = None) -> tuple[list[DriftResult], list[str]]:
    """Every family's drift results (targets' thresholds from the registry at ``registry_path``,
    default ``$DORA_REGISTRY`` or the shipped one) and, with ``deliver``, the alarms POSTed to
    the targets' webhooks.

    Returns:
        (results, one line per webhook delivery that failed)."""
    registry, targets = _registry_targets(registry_path)
    by_spec = {f.drift.family: f for f in families if f.drift is not None}

    def thresholds(target: str, spec) -> dict[str, float]:
        found = targets.get(target)
        return drift_thresholds(found, by_spec[spec.family]) if found is not None else {}

    results = evaluate_drift([f.drift for f in by_spec.values()], thresholds)
    failures = deliver_alarms(results, registry_webhooks(registry)) if deliver and registry is not None else []
    return results, failures


def check_result(check: DriftCheck, results: Sequence[DriftResult], delivery_failures: Sequence[str] = ()) -> dg.AssetCheckResult:
    """The asset check's result for ``check`` over ``results`` (those of that check)."""
    state = worst_state([r.state for r in results])
    flagged = [r for r in results if r.state != "ok"]
    if not results:
        description = "nothing to compare: no target has two finished audits of the family"
    elif not flagged:
        description = f"ok on {len(results)} target pair(s)"
    else:
        description = "; ".join(r.text for r in flagged)
    return dg.AssetCheckResult(
        passed=not flagged,
        severity=dg.AssetCheckSeverity.ERROR if state == "collapse" else dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "state": state,
            "pairs_judged": len(results),
            "alarms": dg.MetadataValue.json([r.as_json() for r in flagged]),
            "judged": dg.MetadataValue.json([r.as_json() for r in results]),
            "webhook_failures": dg.MetadataValue.json(list(delivery_failures)),
        },
    )


def _drift_check(family, check: DriftCheck) -> dg.AssetChecksDefinition:
    spec = family.drift
    direction = {"falls": "falls under", "rises": "rises past", None: "(no collapse level)"}[check.collapse]
    description = (
        f"{family.name} drift, {check.name}: {check.title}. Each target's latest audit vs its previous one on the probe "
        f"units both have. ERROR when it {direction} the collapse ratio (default {check.min_ratio:g}; registry "
        f"options.{family.name}.checks.{check.name}); WARN on a significant change (BH over the audit's checks) or "
        "when the two audits have no unit in common (not comparable)."
    )

    @dg.asset_check(asset=dg.AssetKey(spec.relation), name=f"drift_{check.name}", description=description, pool=DUCKDB_WRITER_POOL)
    def _check() -> dg.AssetCheckResult:
        results, failures = judge_families([family])
        return check_result(check, [r for r in results if r.check == check.name], failures)

    return _check


def drift_asset_checks(families: Sequence) -> list[dg.AssetChecksDefinition]:
    """One asset check per drift check of every family in ``families`` (those declaring ``drift``)."""
    return [_drift_check(f, c) for f in families if f.drift is not None for c in f.drift.checks]
