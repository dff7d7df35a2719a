"""``dora diff`` for scripts and CI: the whole comparison as JSON or CSV, why a count differs from
each audit's own, and the verdict that ``--fail-on`` turns into an exit status.

* :func:`with_background`: when the two audits probed different rows, each audit's Fisher test
  is recounted on the common rows only (``fct_association_changes``), against the other
  descriptors of those rows: a smaller background, so an association can lose (or gain)
  significance with the very same counts. The note names each audit's own count
  (``fct_associations``, its own rows), how many of those lie on the compared settings and
  descriptors, and the count on the common rows.
* :func:`diff_json` / :func:`diff_csv`: every part of the report (header, what was compared,
  counts per change type, flips, parse-rate tests, power, per-dimension lines, top changes,
  the notes and the verdict); CSV flattens the same JSON into ``path,value`` rows.
* :func:`verdict`: ``collapse`` when the later audit, on the common rows, parses under the
  ``parse_rate`` check's ratio x the earlier parse rate, or keeps under the
  ``significant_associations`` check's ratio x the earlier significant associations (judged
  from its ``min_before`` of them): the family's drift checks (``analytics.drift.DriftCheck``)
  with the ratios the registry target sets (``options.<family>.checks``), one definition for
  the drift alarms and ``--fail-on``; else ``change``
  when an association changed significantly (BH change q < the significance level) or the parse
  rate did (exact McNemar p < the significance level); else ``no change``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

from analytics.diff import AuditDiff
from analytics.drift import FamilyDrift
from analytics.query import QueryResult, execute_query

__all__ = ["Verdict", "diff_csv", "diff_dict", "diff_json", "verdict", "with_background"]

#: ``--fail-on`` choices, the weaker first: ``change`` fails on a collapse too.
FAIL_ON = ("change", "collapse")


@dataclass(frozen=True)
class Verdict:
    """``state``: ``no change``, ``change`` or ``collapse``; ``reasons``: one line each."""

    state: str
    reasons: tuple[str, ...] = ()

    def fails(self, fail_on: str | None) -> bool:
        """Whether ``--fail-on fail_on`` exits 1: ``change`` on a change or a collapse, ``collapse`` on a collapse."""
        if fail_on is None:
            return False
        if fail_on not in FAIL_ON:
            raise ValueError(f"--fail-on takes one of {FAIL_ON}, got {fail_on!r}")
        return self.state == "collapse" or (fail_on == "change" and self.state == "change")


def _background(d: AuditDiff) -> list[dict]:
    """Per audit and modality with rows left out: its own significant associations
    (``fct_associations``), those on the settings and descriptors both audits probed, and the
    significant ones on the common rows (``fct_association_changes``)."""
    out = []
    for c in d.comparisons:
        if not c.common_rows or not (c.rows_only_before or c.rows_only_after):
            continue
        for side, ref, only in (("before", d.before, c.descriptors_only_before), ("after", d.after, c.descriptors_only_after)):
            own, on_compared = execute_query(
                """select count(*), count(*) filter (where list_contains(?, setting) and not list_contains(?, descriptor))
                   from fct_associations where audit_id = ? and modality = ? and is_significant""",
                params=[list(c.common_settings), list(only or []), ref.audit_id, c.modality],
            ).rows[0]
            (common,) = execute_query(
                f"select count(*) filter (where significant_{side}) from fct_association_changes "
                "where from_audit_id = ? and to_audit_id = ? and modality = ?",
                params=[d.before.audit_id, d.after.audit_id, c.modality],
            ).rows[0]
            out.append(
                {
                    "side": side,
                    "audit_id": ref.audit_id,
                    "model_version": ref.model_version,
                    "modality": c.modality,
                    "significant_own_rows": own,
                    "significant_own_rows_on_compared_settings_and_descriptors": on_compared,
                    "significant_common_rows": common,
                }
            )
    return out


def with_background(d: AuditDiff) -> tuple[AuditDiff, list[dict]]:
    """``d`` with a note (:attr:`AuditDiff.notes`) saying why its significant counts differ from
    each audit's own when the audits probed different rows, and the numbers behind it.

    Raises:
        duckdb.CatalogException: ``fct_associations`` is not built. The read errors of :func:`analytics.query.execute_query`.
    """
    rows = _background(d)
    if not rows:
        return d, rows
    sides = "; ".join(
        f"{r['model_version'] if d.before.model_version != d.after.model_version else r['audit_id']} "
        f"({r['modality']}): {r['significant_own_rows']} on its own rows, "
        f"{r['significant_own_rows_on_compared_settings_and_descriptors']} of them on the compared settings and descriptors, "
        f"{r['significant_common_rows']} on the common rows"
        for r in rows
    )
    note = (
        "why the significant counts differ from each audit's own: the audits probed different rows, so each audit's "
        "Fisher test is recounted on the common rows only, against the other descriptors of those rows (a smaller "
        "background: a word can lose or gain significance with the same counts); significant associations " + sides
    )
    return replace(d, notes=(*d.notes, note)), rows


def verdict(d: AuditDiff, drift: FamilyDrift, ratios: Mapping[str, float] | None = None) -> Verdict:
    """The verdict of a comparison (module docstring).

    Args:
        drift: the family's drift checks; its ``parse_rate`` and ``significant_associations``
            checks give the collapse ratios (``min_ratio``) and the least earlier count
            (``min_before``).
        ratios: {check: collapse ratio} the registry target sets, over the checks' defaults.

    The significance level is the one the marts used (``fct_audit_comparisons.significance_level``,
    dbt var, 0.05 by default).

    Raises:
        KeyError: ``drift`` has no ``parse_rate`` or ``significant_associations`` check.
    """
    ratios = ratios or {}
    parse_check, sig_check = drift.check("parse_rate"), drift.check("significant_associations")
    parse_ratio = ratios.get(parse_check.name, parse_check.min_ratio)
    sig_ratio = ratios.get(sig_check.name, sig_check.min_ratio)
    significance_level = next((c.significance_level for c in d.comparisons), 0.05)
    _flipped, _only_before, sig_before, sig_after = d.flip_counts
    collapse, change = [], []
    for c in d.comparisons:
        if not c.common_rows:
            continue
        before, after = c.parse_rate_before, c.parse_rate_after
        if before is not None and after is not None and before > max(0, parse_check.min_before) and after < parse_ratio * before:
            collapse.append(f"{c.modality} parse rate on the common rows {after:.3g} < {parse_ratio:g} x {before:.3g}")
        if c.parse_change_p is not None and c.parse_change_p < significance_level:
            change.append(f"{c.modality} parse rate changed (exact McNemar p = {c.parse_change_p:.3g})")
    if sig_before >= max(1, sig_check.min_before) and sig_after < sig_ratio * sig_before:
        collapse.append(f"significant associations on the common rows {sig_after} < {sig_ratio:g} x {sig_before}")
    significant = sum(n for t, n in d.counts.items() if t != "unchanged")
    if significant:
        change.append(f"{significant} associations changed significantly (BH change q < {significance_level:g})")
    if collapse:
        return Verdict("collapse", tuple(collapse + change))
    return Verdict("change", tuple(change)) if change else Verdict("no change")


def _value(v):
    """A JSON value: NaN / infinity become null, dates their ISO text."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def _records(result: QueryResult | None) -> list[dict]:
    if result is None:
        return []
    return [{c: _value(v) for c, v in zip(result.columns, r, strict=True)} for r in result.rows]


def diff_dict(d: AuditDiff, state: Verdict | None = None, background: list[dict] | None = None) -> dict:
    """The whole comparison as plain data (what ``--format json`` prints)."""
    flipped, only_before, sig_before, sig_after = d.flip_counts
    lines = d.text().splitlines()
    compared = [c for c in d.comparisons if c.common_rows]
    return {
        "target": d.target,
        "header": lines[0],
        "before": asdict(d.before),
        "after": asdict(d.after),
        "comparisons": [{k: _value(v) for k, v in asdict(c).items()} for c in d.comparisons],
        "counts": {t: d.counts.get(t, 0) for t in ("new", "gone", "strengthened", "weakened", "unchanged")},
        "significant_changes": sum(n for t, n in d.counts.items() if t != "unchanged"),
        "flips": {
            "flipped": flipped,
            "only_before": only_before,
            "only_after": flipped - only_before,
            "significant_before": sig_before,
            "significant_after": sig_after,
            "rows": _records(d.flips),
        },
        "parse_rate_tests": [
            {
                "modality": c.modality,
                "parse_rate_before": _value(c.parse_rate_before),
                "parse_rate_after": _value(c.parse_rate_after),
                "parsed_before_only": c.parsed_before_only,
                "parsed_after_only": c.parsed_after_only,
                "test": "exact McNemar",
                "p": _value(c.parse_change_p),
            }
            for c in compared
        ],
        "power": [
            {
                "modality": c.modality,
                "line": d._power(c),
                "significance_level": c.significance_level,
                "power": c.detectable_power,
                "detectable_h": _value(c.detectable_h),
                "typical_share": _value(c.typical_share),
                "detectable_share_below": _value(c.detectable_share_below),
                "detectable_share_above": _value(c.detectable_share_above),
            }
            for c in compared
        ],
        "by_dimension": [
            dict(
                zip(
                    (
                        "modality",
                        "bias_dimension",
                        "associations_compared",
                        "significant_changes",
                        "direction",
                        "min_change_q",
                        "significant_before",
                        "significant_after",
                    ),
                    map(_value, row),
                    strict=True,
                )
            )
            for row in d.by_dimension
        ],
        "top_changes": _records(d.top),
        "notes": list(d.notes),
        "significance_background": background or [],
        "verdict": None if state is None else {"state": state.state, "reasons": list(state.reasons)},
    }


def diff_json(d: AuditDiff, state: Verdict | None = None, background: list[dict] | None = None) -> str:
    """:func:`diff_dict` as indented JSON (NaN never appears: it is null)."""
    return json.dumps(diff_dict(d, state, background), indent=1, default=str, allow_nan=False)


def _flatten(value, path: str, out: list) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            _flatten(v, f"{path}.{i}", out)
    elif isinstance(value, list):
        out.append((path, json.dumps(value, default=str)))
    else:
        out.append((path, "" if value is None else value))


def diff_csv(d: AuditDiff, state: Verdict | None = None, background: list[dict] | None = None) -> str:
    """:func:`diff_dict` flattened to ``path,value`` rows (``flips.rows.0.word``, ``counts.new``;
    a list of plain values is one JSON cell): every part of the result in one CSV table."""
    rows: list = []
    _flatten(diff_dict(d, state, background), "", rows)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["path", "value"])
    writer.writerows(rows)
    return buf.getvalue()
