"""Drift checks: did a target's new audit get worse than its previous one, family by family?

Every probe family declares its drift checks (:class:`FamilyDrift`, names and thresholds only)
in its record, and one drift mart (``dbt_project/models/marts/<family>/agg_<family>_drift``,
shaped by ``macros/drift.sql``) that counts each check for every (earlier, later) pair of the
family's audits its change tests compare, on the probe units both audits have: the comparison
``dora diff`` prints, not a second one. This module knows no family: it reads the marts it is given
and judges each target's **latest** finished audit of every (family, modality) against its
previous one (``dim_audits.previous_audit_id``), whichever family finished last.

A check's state (:data:`STATES`):

* ``collapse``: the value passed the check's ratio threshold. A check whose value should not
  fall (``collapse="falls"``: parse rate, answered share) collapses when
  ``after < min_ratio x before`` (and ``before >= min_before``); one whose value should not rise
  (``"rises"``: MaxToxicity, S_bias, vlbs, the judge's unscored share) when its headroom
  collapses, ``scale - after < min_ratio x (scale - before)``, ``scale`` being the value's
  maximum (1, or 100 for a percentage).
* ``change``: the change test's p-value, Benjamini-Hochberg adjusted over the checks of the
  audit (statsmodels ``multipletests(method="fdr_bh")``), is under the audit's significance
  level (the dbt var ``significance_level``, a column of the mart).
* ``not comparable``: the two audits have no common unit for the check (no row in the mart, or
  the mart was never built): never a pass.
* ``ok``: none of those.

A target whose latest audit of a family has no previous one has nothing to compare and gets no
result (``dora models list`` says ``first audit``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from analytics.query import execute_query

__all__ = ["STATES", "DriftCheck", "DriftResult", "FamilyDrift", "collapsed", "evaluate_drift", "latest_audits", "worst_state"]

#: a check's states, mildest first (:func:`worst_state` orders by this)
STATES = ("ok", "not comparable", "change", "collapse")
#: the states that are alarms (said by ``dora audit``, posted to a target's webhook)
ALARM_STATES = ("change", "collapse")


@dataclass(frozen=True)
class DriftCheck:
    """One drift check of a family (a ``check_name`` of its drift mart).

    Attributes:
        name: the check's name (``parse_rate``), also its option under ``options: {<family>:
            {checks: {<name>: <ratio>}}}`` in the registry.
        title: one line: what the value is and its change test.
        collapse: ``"falls"`` (a drop is bad), ``"rises"`` (a rise is bad), or ``None``: a shift
            either way is a significant change, never a collapse (a numeric rating).
        min_ratio: the default collapse threshold, in (0, 1].
        scale: the value's maximum, for ``"rises"`` (1; 100 for a percentage).
        min_before: a collapse is judged only when the previous value is at least this (a count
            of 2 falling to 0 is noise, not a collapse).
        optional: the mart has its row only when both audits measured it (the judge's unscored
            share needs two judged audits): a missing row is "not measured" and the check is left
            out of the pair's results, unless no check of the pair has a row (then every check is
            not comparable).
    """

    name: str
    title: str
    collapse: Literal["falls", "rises"] | None
    min_ratio: float = 0.5
    scale: float = 1.0
    min_before: float = 0.0
    optional: bool = False


@dataclass(frozen=True)
class FamilyDrift:
    """A family's drift checks and the mart that counts them (names, never values)."""

    family: str
    relation: str  #: the family's drift mart
    checks: tuple[DriftCheck, ...]

    def check(self, name: str) -> DriftCheck:
        """The check called ``name``.

        Raises:
            KeyError: the family has no such check."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True)
class DriftResult:
    """One check of one target's latest audit of one family and modality against its previous audit."""

    target: str
    family: str
    modality: str
    check: str
    state: str  #: one of :data:`STATES`
    audit_id: str
    previous_audit_id: str
    model_version: str | None
    previous_model_version: str | None
    value_before: float | None = None
    value_after: float | None = None
    units_compared: int = 0
    change_p: float | None = None
    change_q: float | None = None  #: BH over the checks of the audit
    significance_level: float | None = None
    min_ratio: float | None = None
    collapse: str | None = "falls"

    @property
    def is_alarm(self) -> bool:
        return self.state in ALARM_STATES

    @property
    def text(self) -> str:
        """One line, as chat webhooks and ``dora audit`` show it."""
        head = (
            f"{self.state.upper()}: {self.target} {self.family}"
            + (f" ({self.modality})" if self.modality and self.modality != self.family else "")
            + f" {self.check}"
        )
        versions = f"version {self.previous_model_version} -> {self.model_version} (audit {self.previous_audit_id} -> {self.audit_id})"
        if self.state == "not comparable":
            return f"{head}: no probe unit in common, {versions}"
        figures = f"{_fmt(self.value_before)} -> {_fmt(self.value_after)} on {self.units_compared} common units"
        if self.state == "collapse":
            bound = "under" if self.collapse == "falls" else "past"
            figures += f", {bound} the collapse ratio {self.min_ratio:g}"
        elif self.change_q is not None:
            figures += f", BH q {self.change_q:.3g}" + (" <" if self.state == "change" else " >=") + f" {self.significance_level:g}"
        return f"{head}: {figures}, {versions}"

    def as_json(self) -> dict:
        """The webhook payload's fields: target, family, modality, versions and audits, the check, its figures, ``text``."""
        out = asdict(self)
        out["text"] = self.text
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def collapsed(check: DriftCheck, before: float | None, after: float | None, min_ratio: float) -> bool:
    """Whether ``before -> after`` is a collapse of ``check`` at ``min_ratio`` (see the module
    docstring); a missing value never collapses."""
    if check.collapse is None or before is None or after is None or before < check.min_before:
        return False
    if check.collapse == "falls":
        return before > 0 and after < min_ratio * before
    headroom_before = check.scale - before
    return headroom_before > 0 and check.scale - after < min_ratio * headroom_before


def worst_state(states: Collection[str]) -> str:
    """The most serious of ``states`` (:data:`STATES` order); ``ok`` for none."""
    return max(states, key=STATES.index, default="ok")


_LATEST_SQL = """
select target, family, modality, audit_id, previous_audit_id, model_version,
       (select p.model_version from dim_audits as p where p.audit_id = a.previous_audit_id) as previous_model_version
from dim_audits as a
where status = 'finished'
qualify row_number() over (partition by target, family, modality order by audit_seq desc) = 1
order by target, family, modality
"""


def latest_audits() -> list[dict]:
    """Every (target, family, modality)'s latest finished audit and its previous audit (None
    for a first audit), from ``dim_audits``; ``[]`` when the warehouse or the table is missing."""
    import duckdb

    from analytics.query import WarehouseMissingError

    try:
        result = execute_query(_LATEST_SQL)
    except (WarehouseMissingError, duckdb.CatalogException):
        return []
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def _mart_rows(spec: FamilyDrift, audit_ids: Sequence[str]) -> dict[tuple[str, str, str], dict]:
    """{(previous_audit_id, audit_id, check_name): row} of the family's drift mart for the later
    audits ``audit_ids``; ``{}`` when it is not built (every check is then not comparable)."""
    import duckdb

    if not audit_ids:
        return {}
    try:
        result = execute_query(f"select * from {spec.relation} where list_contains(?, audit_id)", params=[list(audit_ids)])
    except duckdb.CatalogException:
        return {}
    rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    return {(r["previous_audit_id"], r["audit_id"], r["check_name"]): r for r in rows}


def evaluate_drift(
    specs: Sequence[FamilyDrift],
    thresholds: Callable[[str, FamilyDrift], Mapping[str, float]] | None = None,
    *,
    targets: Collection[str] | None = None,
) -> list[DriftResult]:
    """Judge every target's latest audit of each family in ``specs`` against its previous one.

    Args:
        specs: the families' drift declarations (their records pass them; this module knows none).
        thresholds: (target name, spec) -> {check name: min ratio} set by the target (the
            registry's ``options: {<family>: {checks: ...}}``); the checks' defaults otherwise.
        targets: only these targets (``dim_audits.target``); None: all.

    Returns:
        One :class:`DriftResult` per (target, family, modality, check) whose latest audit has a
        previous one, ordered by target, family, modality and the family's check order.

    Raises:
        WarehouseBusyError, WarehouseCorruptError: see :func:`analytics.query.connect_read_only`.
    """
    from statsmodels.stats.multitest import multipletests

    latest = [a for a in latest_audits() if a["previous_audit_id"] and (targets is None or a["target"] in targets)]
    out: list[DriftResult] = []
    for spec in specs:
        audits = [a for a in latest if a["family"] == spec.family]
        rows = _mart_rows(spec, [a["audit_id"] for a in audits])
        for audit in audits:
            given = dict(thresholds(audit["target"], spec)) if thresholds else {}
            found = {c.name: rows.get((audit["previous_audit_id"], audit["audit_id"], c.name)) for c in spec.checks}
            tested = {name: row["change_p"] for name, row in found.items() if row and row["change_p"] is not None and not math.isnan(row["change_p"])}
            qs = dict(zip(tested, multipletests(list(tested.values()), method="fdr_bh")[1], strict=True)) if tested else {}
            any_row = any(found.values())
            for check in spec.checks:
                row = found[check.name]
                if row is None and check.optional and any_row:
                    continue  # not measured in both audits (e.g. no judge): nothing to judge
                ratio = given.get(check.name, check.min_ratio)
                base = dict(
                    target=audit["target"],
                    family=spec.family,
                    modality=audit["modality"],
                    check=check.name,
                    audit_id=audit["audit_id"],
                    previous_audit_id=audit["previous_audit_id"],
                    model_version=audit["model_version"],
                    previous_model_version=audit["previous_model_version"],
                    min_ratio=ratio,
                    collapse=check.collapse,
                )
                if row is None:
                    out.append(DriftResult(state="not comparable", **base))
                    continue
                q = float(qs[check.name]) if check.name in qs else None
                level = row["significance_level"]
                if collapsed(check, row["value_before"], row["value_after"], ratio):
                    state = "collapse"
                elif q is not None and q < level:
                    state = "change"
                else:
                    state = "ok"
                out.append(
                    DriftResult(
                        state=state,
                        value_before=row["value_before"],
                        value_after=row["value_after"],
                        units_compared=int(row["units_compared"]),
                        change_p=row["change_p"],
                        change_q=q,
                        significance_level=level,
                        **base,
                    )
                )
    return out
