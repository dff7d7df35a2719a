"""``dora diff --family NAME``: a probe family's change tests between two audits.

Reads one change-test mart per family read-only (every number comes from SQL; the statistics
are the UDFs of :mod:`analytics.change_tests` and ``fisher_two_sided``). Each family declares
its mart as a :class:`FamilyChangeTest` (names only) in its Dagster home and passes it here;
this module knows no family: e.g. counterfactual's ``fct_max_toxicity_change_tests``
(MaxToxicity, Mann-Whitney U), ModSCAN's ``fct_modscan_change_tests`` (S_bias, stratified
chi-square), VLStereoSet's ``fct_vlstereoset_change_tests`` (vlrs / vlbs, Fisher's exact test).

Each mart pairs every earlier / later audit of one model id; change_q is the Benjamini-Hochberg
q-value over the compared rows of the pair, ``is_significant_change`` = change_q < 0.05.
The audits of a family are found in its fact table by registry target (``dim_audits.target``)
or by model id (``model_id`` equal to the target, or ending in ``/<target>``), ordered by their first landed row, as the marts order them.

Like with like: each mart tests a row on the units BOTH audits have (counterfactual: the
(set, run) units; ModSCAN: the answered queries; VLStereoSet: the scored items) and says so in
the optional columns ``units_compared`` / ``units_only_before`` / ``units_only_after``, which
``dora diff`` shows when the mart has them. Two audits without a row in common are refused
(:class:`DiffError`, naming the columns of the family's facts whose values differ between them).
A mart may also give the power of each row's test, ``detectable_below`` / ``detectable_above``:
the values the later audit had to pass for a change to be detected (VLStereoSet: Cohen's h of a
two-sample test of proportions, statsmodels ``NormalIndPower``, power 0.8 at the dbt var
``significance_level``; docs/statistics.md#change-tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analytics.diff import AuditRef, DiffError
from analytics.query import QueryResult, execute_query, format_result

__all__ = ["FamilyChangeTest", "FamilyDiff", "family_diff", "family_help", "family_hint"]

#: change types of the family change-test marts
FAMILY_CHANGE_TYPES = ("increased", "decreased", "shifted", "unchanged")
#: optional columns of a change-test mart, shown after the spec's columns when the mart has them:
#: the units compared / left out, and the power of the row's test
COMMON_UNIT_COLUMNS = ("units_compared", "units_only_before", "units_only_after")
POWER_COLUMNS = ("detectable_below", "detectable_above")
#: a facts column whose values differ between two audits is named in the refusal when each audit
#: has at most this many distinct values in it (a setting, not an id or a text)
_NAMED_VALUES = 6


@dataclass(frozen=True)
class FamilyChangeTest:
    """Where a family's change tests live and how ``dora diff`` shows them (names, never values)."""

    family: str
    relation: str  #: the change-test mart
    facts: str  #: the fact relation that lists the family's audits
    landed_at: str  #: its timestamp column (audit order = first landed row)
    columns: tuple[str, ...]  #: columns of the printed table (keys, values, test)
    order: tuple[str, ...]  #: tie-breaking keys after change_q
    metric: str  #: one line: the headline metric
    test: str  #: one line: the change test and why
    #: a further mart shown after the change tests: (relation, title, audit-id columns, shown
    #: columns); its rows where any audit-id column is one of the two audits (e.g. the LVLM vs
    #: LLM correlations of counterfactual image audits); skipped when the relation is not built
    related: tuple[str, str, tuple[str, ...], tuple[str, ...]] | None = None


def family_help(specs: Sequence[FamilyChangeTest], own: Sequence[tuple[str, str]] = ()) -> str:
    """``dora diff --help``'s epilog: one line per family, first those of ``own`` (``(family,
    "metric; change test")`` of a family with a diff of its own), then those of ``specs``
    (metric; change test), then the q-value rule."""
    lines = ["families (--family): metric; change test between the two audits"]
    lines += [f"  {name}: {line}" for name, line in own]
    lines += [f"  {f.family}: {f.metric}; {f.test}" for f in specs]
    lines.append("  change_q: Benjamini-Hochberg over the compared rows of the audit pair; significant: change_q < 0.05")
    return "\n".join(lines)


@dataclass(frozen=True)
class FamilyDiff:
    """The change tests of one family between two audits: counts per change type and the rows."""

    spec: FamilyChangeTest
    target: str
    before: AuditRef
    after: AuditRef
    counts: dict[str, int]
    rows: QueryResult  #: every compared row, smallest change_q first
    related: QueryResult | None = None  #: the spec's related mart's rows of the two audits

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def significant(self) -> int:
        """Rows with change_q < 0.05."""
        return sum(n for t, n in self.counts.items() if t != "unchanged")

    def _compared(self) -> str:
        """``, each row tested on the units both audits have (units_compared); 1 of 6 rows left units of one audit out``."""
        cols = self.rows.columns
        if not set(COMMON_UNIT_COLUMNS) <= set(cols):
            return ""
        before, after = cols.index("units_only_before"), cols.index("units_only_after")
        left_out = [r for r in self.rows.rows if (r[before] or 0) or (r[after] or 0)]
        text = ", each row tested on the units both audits have (units_compared)"
        if not left_out:
            return text + "; no unit left out"
        most_before, most_after = (max(r[i] or 0 for r in left_out) for i in (before, after))
        return (
            text + f"; {len(left_out)} of {len(self.rows.rows)} rows left units of one audit out "
            f"(up to {most_before} only before, {most_after} only after)"
        )

    def text(self, fmt: str = "table", top: int = 5) -> str:
        """The report (``fmt`` = table: every significant row, at least ``top`` rows) or every row as csv / json."""
        if fmt != "table":
            return format_result(self.rows, fmt)
        spec = self.spec
        total = sum(self.counts.values())
        lines = [
            f"dora diff --family {self.family} {self.target}: {self.before.audit_id} (version {self.before.model_version})"
            f" -> {self.after.audit_id} (version {self.after.model_version})" + self._compared(),
            f"  metric: {spec.metric}",
            f"  test: {spec.test}",
            f"  {self.significant} of {total} compared rows changed significantly (BH change q < 0.05): "
            + ", ".join(f"{t} {self.counts.get(t, 0)}" for t in FAMILY_CHANGE_TYPES if t != "unchanged")
            + f"; no detectable change {self.counts.get('unchanged', 0)}",
        ]
        if set(POWER_COLUMNS) <= set(self.rows.columns):
            lines.append(
                "  power: detectable_below / detectable_above are the values the later audit had to pass for a "
                "change of the row to be detected (two-sided, power 80%, at the change test's level; "
                "empty: no change that way was detectable)"
            )
            if not self.significant:
                lines.append("  no significant change between these audits: a change inside those bounds could not have been seen")
        if not self.rows.rows:
            lines.append("  no row of the two audits could be compared")
        else:
            shown = self.rows.rows[: max(self.significant, top)]
            lines += ["", f"  changes by change q ({len(shown)} of {total}; --format csv|json for all):"]
            lines += ["    " + ln for ln in format_result(QueryResult(self.rows.columns, shown)).splitlines()]
        if self.related is not None and self.related.rows and spec.related is not None:
            lines += ["", f"  {spec.related[1]} ({spec.related[0]}, {len(self.related.rows)} rows):"]
            lines += ["    " + ln for ln in format_result(self.related).splitlines()]
        return "\n".join(lines)


def _family_audits(spec: FamilyChangeTest, target: str) -> list[AuditRef]:
    """The family's audits of ``target``: those the audit log files under the registry target
    (``dim_audits.target``: every family's audit landed in the target's partition), or whose
    model id is ``target`` or ends in ``/<target>`` (ad-hoc audits), in landing order."""
    import duckdb

    select = f"""select audit_id, any_value(model_version), row_number() over (order by min({spec.landed_at}), audit_id)
            from {spec.facts} where model_id = ? or ends_with(model_id, '/' || ?) {{by_target}}
            group by audit_id order by 3"""
    try:
        rows = execute_query(
            select.format(by_target="or audit_id in (select audit_id from dim_audits where target = ?)"), params=[target, target, target]
        ).rows
    except duckdb.CatalogException:  # no audit log built yet (a home of one family's ad-hoc runs)
        rows = _read(spec, select.format(by_target=""), [target, target]).rows
    return [AuditRef(*r) for r in rows]


def _read(spec: FamilyChangeTest, sql: str, params: list) -> QueryResult:
    """execute_query, with a missing family relation turned into a one-line DiffError."""
    import duckdb

    try:
        return execute_query(sql, params=params)
    except duckdb.CatalogException as exc:
        raise DiffError(
            f"the warehouse has no {spec.family} marts ({str(exc).splitlines()[0]}): run `dora audit --family {spec.family}` first"
        ) from None


def _family_of(audit_id: str, exclude: str, others: Sequence[FamilyChangeTest]) -> str | None:
    """The probe family whose facts (those of ``others``, else the audit log ``dim_audits``) hold
    ``audit_id``, other than ``exclude``."""
    import duckdb

    for spec in others:
        if spec.family == exclude:
            continue
        try:
            if execute_query(f"select 1 from {spec.facts} where audit_id = ? limit 1", params=[audit_id]).rows:
                return spec.family
        except duckdb.Error:  # that family was never built
            continue
    try:  # a family without a change-test mart (one with its own diff) is known by the audit log
        rows = execute_query("select family from dim_audits where audit_id = ? and family <> ? limit 1", params=[audit_id, exclude]).rows
    except duckdb.Error:
        return None
    return rows[0][0] if rows else None


def family_hint(specs: Sequence[FamilyChangeTest], *refs: str | None) -> str:
    """For a failed BiasDora ``dora diff``: ``"; 'x' is a modscan audit / model: use --family modscan"``
    for the first of ``refs`` (target, --from, --to) found in a probe family's facts, else ``""``."""
    import duckdb

    for ref in refs:
        if not ref:
            continue
        for spec in specs:
            try:
                found = execute_query(
                    f"select 1 from {spec.facts} where audit_id = ? or model_id = ? or ends_with(model_id, '/' || ?) limit 1",
                    params=[ref, ref, ref],
                ).rows
            except duckdb.Error:  # that family was never built
                continue
            if found:
                return f"; {ref!r} has {spec.family} audits: use --family {spec.family}"
    return ""


def _models_with_audits(spec: FamilyChangeTest) -> list[str]:
    return [r[0] for r in _read(spec, f"select distinct model_id from {spec.facts} order by 1", []).rows]


def _pick(spec: FamilyChangeTest, audits: list[AuditRef], ref: str, flag: str, others: Sequence[FamilyChangeTest]) -> AuditRef:
    found = [a for a in audits if a.audit_id == ref] or [a for a in audits if a.model_version == ref]
    if len(found) == 1:
        return found[0]
    if found:
        raise DiffError(f"{flag} {ref!r} matches several {spec.family} audits ({[a.audit_id for a in found]}): give an audit id")
    other = _family_of(ref, spec.family, others)
    if other:
        raise DiffError(f"{flag} {ref!r} is a {other} audit, not a {spec.family} one: use --family {other}")
    raise DiffError(
        f"{flag} {ref!r} is neither an audit id nor a model version of this model's {spec.family} audits: "
        + ", ".join(f"{a.audit_id} ({a.model_version})" for a in audits)
    )


def family_diff(
    spec: FamilyChangeTest,
    target: str,
    from_ref: str | None = None,
    to_ref: str | None = None,
    others: Sequence[FamilyChangeTest] = (),
) -> FamilyDiff:
    """Compare two audits of ``target`` (a model id, or its last path component) in one probe family.

    Args:
        spec: the family's change-test mart and how to show it (each family declares its own).
        others: the other families' change tests, to name the family a wrong reference belongs to.
        from_ref, to_ref: audit id or model version; defaults: the latest audit and the latest
            earlier one that shares compared cells with it (same variant / probe / scorer
            variant), else the one before.

    Returns:
        A :class:`FamilyDiff` whose rows are the family mart's rows of the pair, smallest change_q
        first: the spec's columns, then those of ``COMMON_UNIT_COLUMNS`` and ``POWER_COLUMNS`` the
        mart has.

    Raises:
        DiffError: no audit of the family for the target, a reference that is
            not one of its audits (naming the family it belongs to, if any), a single audit, or
            --from not earlier than --to; two audits with no row in common (naming the facts
            columns whose values differ); the family's marts missing from the warehouse.
        analytics.query.WarehouseMissingError / WarehouseBusyError: as :func:`analytics.query.execute_query`.
    """
    family = spec.family
    audits = _family_audits(spec, target)
    if not audits:
        hint = _family_of(target, spec.family, others) if target else None
        raise DiffError(
            f"no {family} audit of model {target!r}"
            + (f" ({target!r} is a {hint} audit id: give its model id)" if hint else "")
            + f"; models with {family} audits: {_models_with_audits(spec)}"
        )
    after = _pick(spec, audits, to_ref, "--to", others) if to_ref else audits[-1]
    if from_ref:
        before = _pick(spec, audits, from_ref, "--from", others)
    else:
        earlier = [a for a in audits if a.audit_seq < after.audit_seq]
        if not earlier:
            raise DiffError(f"{family} audit {after.audit_id} is the first of {target!r}: nothing to compare it with")
        # the previous audit that shares cells with --to (e.g. the same scorer variant / probe),
        # else the previous one
        comparable = {r[0] for r in _read(spec, f"select distinct from_audit_id from {spec.relation} where to_audit_id = ?", [after.audit_id]).rows}
        before = ([a for a in earlier if a.audit_id in comparable] or earlier)[-1]
    if before.audit_seq >= after.audit_seq:
        raise DiffError(f"--from {before.audit_id} must be an earlier {family} audit than --to {after.audit_id}")
    params = [before.audit_id, after.audit_id]
    available = _read(spec, f"select * from {spec.relation} limit 0", []).columns
    extra = [c for c in (*COMMON_UNIT_COLUMNS, *POWER_COLUMNS) if c in available and c not in spec.columns]
    rows = _read(
        spec,
        f"""select {", ".join([*spec.columns, *extra])} from {spec.relation}
            where from_audit_id = ? and to_audit_id = ?
            order by change_q nulls last, change_p nulls last, {", ".join(spec.order)}""",
        params,
    )
    if not rows.rows:
        raise DiffError(
            f"{family} audits {before.audit_id} ({before.model_version}) and {after.audit_id} ({after.model_version}) "
            f"probed no row in common ({_difference(spec, before.audit_id, after.audit_id)}): nothing to compare"
        )
    counts = dict(
        _read(
            spec,
            f"select change_type, count(*) from {spec.relation} where from_audit_id = ? and to_audit_id = ? group by 1",
            params,
        ).rows
    )
    return FamilyDiff(spec, target, before, after, counts, rows, _related(spec, before.audit_id, after.audit_id))


def _difference(spec: FamilyChangeTest, before: str, after: str) -> str:
    """What differs between two audits' rows of the family's facts, for the refusal: each column
    (not a row id unless the spec shows it, a version, a timestamp or a random seed, which differ
    between any two audits) whose sets of values differ
    and are short in both audits, e.g. ``variant: text vs image; run: 1 vs 1, 2``; else that no
    unit is shared."""
    types = {r[0]: str(r[1]).upper() for r in _read(spec, f"describe select * from {spec.facts}", []).rows}
    columns = [
        c
        for c, t in types.items()
        if c not in ("audit_id", "model_id", "model_version", "seed")
        and not c.endswith("_at")
        and (not c.endswith("_id") or c in spec.columns)
        and (t in ("VARCHAR", "BOOLEAN") or t.endswith("INT") or t in ("INTEGER", "BIGINT", "SMALLINT"))
    ]
    if not columns:
        return "no unit in common"
    select = ", ".join(
        f'list(distinct "{c}" order by "{c}") filter (where audit_id = ?), list(distinct "{c}" order by "{c}") filter (where audit_id = ?)'
        for c in columns
    )
    found = _read(
        spec, f"select {select} from {spec.facts} where audit_id in (?, ?)", [a for _ in columns for a in (before, after)] + [before, after]
    ).rows[0]
    parts = []
    for i, column in enumerate(columns):
        b, a = [v for v in found[2 * i] or [] if v is not None], [v for v in found[2 * i + 1] or [] if v is not None]
        if b != a and len(b) <= _NAMED_VALUES and len(a) <= _NAMED_VALUES:
            parts.append(f"{column}: {', '.join(map(str, b)) or 'none'} vs {', '.join(map(str, a)) or 'none'}")
    return "; ".join(parts) if parts else "the same settings, but no unit in common"


def _related(spec: FamilyChangeTest, *audit_ids: str) -> QueryResult | None:
    """The spec's related mart's rows naming one of ``audit_ids``; None when it has none or it is not built."""
    import duckdb

    if spec.related is None:
        return None
    relation, _, audit_columns, columns = spec.related
    where = " or ".join(f"{c} in ({', '.join('?' * len(audit_ids))})" for c in audit_columns)
    try:
        return execute_query(
            f"select {', '.join(columns)} from {relation} where {where} order by all", params=[a for _ in audit_columns for a in audit_ids]
        )
    except duckdb.CatalogException:  # a warehouse built before that mart existed
        return None
