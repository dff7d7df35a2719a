"""``dora diff``: what changed between two audits of the same registry target.

Like with like: two audits are compared on the probe rows both probed (a T2T completion key
(setting, descriptor, row, letter, run), a description key), whatever each probed beyond them;
audits with no probe row in common are refused (:class:`DiffError`, naming what differs).

Reads the marts read-only (every number comes from SQL):

* ``fct_audit_comparisons``: per pair and modality, the probe rows each audit probed, those
  both probed (``common_rows``) and those left out; the parse rate of each audit on the
  common rows with an exact McNemar test (the same prompts: paired rows; McNemar 1947,
  ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``); and the power of the change
  test: the smallest Cohen's h (Cohen 1988 ch. 6), h = |2 asin sqrt(p1) - 2 asin sqrt(p0)|,
  a two-sided test of two proportions detects with power 0.8 at the dbt var
  ``significance_level`` (default 0.05) given the median common document lengths n1, n2
  (``statsmodels.stats.power.NormalIndPower().solve_power``, about
  (z_{1-alpha/2} + z_{0.8}) / sqrt(n1 n2 / (n1 + n2))), and the shares a typical word had to
  fall below / rise above to be detected (sin(asin(sqrt(p0)) -/+ h / 2)^2), so "no
  significant change" never hides "could not have seen one" (docs/statistics.md#change-tests).
* ``fct_association_changes``: per association significant in either audit on the common
  rows, a two-sided Fisher change test, its BH q-value ``change_q`` and the change type
  (doc block ``change_type``), and ``significance_flipped`` (significant in one audit only).
* ``dim_audits`` (finished audits per target, in order) and the per-dimension bridge
  ``fct_association_dimensions``.

The report: which rows were compared, how many listed associations changed significantly
(change_q < 0.05) and of which type, the flips, the parse-rate change, the power line, a line
per audited bias dimension (an association counts under every dimension of its descriptor,
as in ``dora report``), the top significant changes per bias dimension ranked by
``change_q`` (then by ``|tfidf_change|``) and the flipped associations.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from analytics.query import QueryResult, execute_query, format_q, format_result
from ingestion.errors import DiffError

__all__ = [
    "AuditComparison",
    "AuditDiff",
    "AuditRef",
    "CHANGE_TYPES",
    "DiffError",
    "audit_diff",
    "finished_audits",
    "resolve_pair",
]

#: change types of fct_association_changes (`gone` was `dropped`)
CHANGE_TYPES = ("new", "gone", "strengthened", "weakened", "unchanged")


@dataclass(frozen=True)
class AuditRef:
    """One finished audit of a target: id, model version, its position (audit_seq) and its
    modality (audits are compared only with audits of the same modality)."""

    audit_id: str
    model_version: str
    audit_seq: int
    modality: str = "t2t"


@dataclass(frozen=True)
class AuditComparison:
    """One row of ``fct_audit_comparisons``: what two audits probed in one modality (column
    meanings in its YAML). Counts are probe rows; shares are in 0..1; lists are sorted."""

    modality: str
    probe_rows_before: int
    probe_rows_after: int
    common_rows: int
    rows_only_before: int
    rows_only_after: int
    settings_before: list
    settings_after: list
    common_settings: list
    descriptors_before: int
    descriptors_after: int
    common_descriptors: int
    descriptors_only_before: list
    descriptors_only_after: list
    letters_before: list
    letters_after: list
    runs_before: list
    runs_after: list
    common_runs: list
    parsed_both: int
    parsed_before_only: int
    parsed_after_only: int
    parsed_neither: int
    parse_rate_before: float | None
    parse_rate_after: float | None
    parse_change_p: float | None
    documents_compared: int
    median_doc_length_before: float | None
    median_doc_length_after: float | None
    typical_share: float | None
    significance_level: float
    detectable_power: float
    detectable_h: float | None
    detectable_share_below: float | None
    detectable_share_above: float | None


def _ranges(values) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``: the runs of a probe, compactly."""
    values = sorted(values or [])
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)


def _share(value) -> str:
    """A share 0..1 as a percentage for display (``0.7778`` -> ``77.8%``)."""
    return "n/a" if value is None else f"{100 * float(value):.1f}%"


def _values(items, limit: int = 4) -> str:
    """A short list as text (``a, b``), a long one as its size."""
    items = list(items or [])
    if not items:
        return "none"
    return ", ".join(map(str, items)) if len(items) <= limit else f"{len(items)}"


@dataclass(frozen=True)
class AuditDiff:
    """The comparison of two audits: what they have in common, counts per change type, the top
    changes and the flipped associations."""

    target: str
    before: AuditRef
    after: AuditRef
    counts: dict[str, int]
    top: QueryResult
    #: one row per (modality, bias dimension) either audit probed: (modality, bias_dimension,
    #: associations compared, significant changes, direction, min change q, significant
    #: associations before, after); an association counts under every dimension of its descriptor
    by_dimension: tuple = ()
    #: what the two audits probed, per modality (fct_audit_comparisons)
    comparisons: tuple[AuditComparison, ...] = ()
    #: associations significant in one audit only (on the common rows), smallest change q first
    flips: QueryResult | None = None
    #: (flipped associations, of them significant only before, significant associations before, after)
    flip_counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    #: lines printed after the flip line (why a count differs: analytics/diff_result.py)
    notes: tuple[str, ...] = ()

    def _label(self, ref: AuditRef) -> str:
        """How the header's audits are named in the text: their version, or their id when both share it."""
        return ref.audit_id if self.before.model_version == self.after.model_version else ref.model_version

    def _compared(self, c: AuditComparison) -> str:
        """``compared on the 1,404 probe rows both audits probed: 9 descriptors, ...; 702 rows only in v3 left out``."""
        text = (
            f"compared on the {c.common_rows:,} probe rows both audits probed: {c.common_descriptors} descriptors, "
            f"{len(c.common_settings)} setting{'s' if len(c.common_settings) != 1 else ''}"
        )
        if c.common_runs:
            text += f", runs {_ranges(c.common_runs)}"
        left_out = [
            f"{n:,} row{'s' if n != 1 else ''} only in {self._label(ref)}"
            for n, ref in ((c.rows_only_before, self.before), (c.rows_only_after, self.after))
            if n
        ]
        return text + ("; " + " and ".join(left_out) + " left out" if left_out else "; no row left out")

    def _power(self, c: AuditComparison) -> str:
        """The power line: the smallest change the change test could have detected."""
        head = f"power (two-sided, alpha {c.significance_level:g}, power {100 * c.detectable_power:.0f}%): "
        if c.detectable_h is None:
            return head + ("the common documents have a median below one word in an audit: no change of an association could have been detected")
        text = (
            head + f"with the common documents' median length ({c.median_doc_length_before:g} words before, "
            f"{c.median_doc_length_after:g} after), changes smaller than Cohen's h = {c.detectable_h:.2f} could not be "
            "detected"
        )
        if c.typical_share is not None:
            below = f"fall below {_share(c.detectable_share_below)}" if c.detectable_share_below is not None else None
            above = f"rise above {_share(c.detectable_share_above)}" if c.detectable_share_above is not None else None
            moves = " or ".join(m for m in (below, above) if m)
            text += (
                f": a word at {_share(c.typical_share)} of a document (the median share of a document's most "
                "frequent word) had to " + (moves or "move further than 0% or 100%") + " to be seen"
            )
            if moves and (below is None or above is None):
                text += f" (a {'fall to 0%' if below is None else 'rise to 100%'} would not be)"
        return text

    def text(self, fmt: str = "table") -> str:
        """Human-readable report (``fmt`` = table) or the top rows as csv / json."""
        if fmt != "table":
            return format_result(self.top, fmt)
        total = sum(self.counts.values())
        significant = total - self.counts.get("unchanged", 0)
        header = (
            f"dora diff {self.target}: {self.before.audit_id} (version {self.before.model_version}) -> "
            f"{self.after.audit_id} (version {self.after.model_version})"
        )
        compared = [c for c in self.comparisons if c.common_rows]
        lines = [
            header + (f", {self._compared(compared[0])}" if len(compared) == 1 else ", compared on the probe rows both audits probed, per modality:")
        ]
        if len(compared) > 1:
            lines += [f"  {c.modality}: {self._compared(c)}" for c in compared]
        lines.append(
            f"  {significant} of {total} associations (significant in either audit on the common rows) changed "
            "significantly (two-sided Fisher change test, BH change q < 0.05): "
            + ", ".join(f"{t} {self.counts.get(t, 0)}" for t in CHANGE_TYPES if t != "unchanged")
            + f"; no detectable change {self.counts.get('unchanged', 0)}"
        )
        flipped, only_before, sig_before, sig_after = self.flip_counts
        lines.append(
            f"  significance flipped: {flipped} associations significant in one audit only "
            f"({only_before} only before, {flipped - only_before} only after); significant associations "
            f"{sig_before} -> {sig_after}"
        )
        lines += [f"  {note}" for note in self.notes]
        for c in compared:
            prefix = f"  {c.modality} " if len(compared) > 1 else "  "
            lines.append(
                f"{prefix}parse rate on the common rows: {_share(c.parse_rate_before)} -> {_share(c.parse_rate_after)} "
                f"(paired rows: {c.parsed_before_only:,} parsed only before, {c.parsed_after_only:,} only after; "
                f"exact McNemar p = {format_q(c.parse_change_p)})"
            )
            lines.append(prefix + self._power(c))
        for modality, dim, n_compared, n_sig, direction, min_q, sig_before_dim, sig_after_dim in self.by_dimension:
            lines.append(
                f"    {modality} {dim}: {n_sig} of {n_compared} changed significantly: {direction} "
                f"(min change q {format_q(min_q)}); significant associations {sig_before_dim} -> {sig_after_dim}"
            )
        if not self.top.rows:
            bound = [c.detectable_h for c in compared if c.detectable_h is not None]
            lines.append(
                "  no significant change between these audits"
                + (
                    f"; changes smaller than Cohen's h = {min(bound):.2f} could not have been detected (power line)"
                    if bound
                    else "; no change could have been detected (power line)"
                )
            )
        else:
            dim_col = self.top.columns.index("bias_dimension")
            dims = sorted({r[dim_col] or "(none)" for r in self.top.rows})
            for dim in dims:
                rows = [r[:dim_col] + r[dim_col + 1 :] for r in self.top.rows if (r[dim_col] or "(none)") == dim]
                cols = self.top.columns[:dim_col] + self.top.columns[dim_col + 1 :]
                lines += ["", f"  {dim} (top changes by change q):"]
                lines += ["    " + ln for ln in format_result(QueryResult(cols, rows)).splitlines()]
        if self.flips is not None and self.flips.rows:
            more = flipped - len(self.flips.rows)
            lines += [
                "",
                "  significance flipped (significant in one audit only, smallest change q first"
                + (f"; {more} more: --top raises the limit" if more > 0 else "")
                + "):",
            ]
            lines += ["    " + ln for ln in format_result(self.flips).splitlines()]
        return "\n".join(lines)


def finished_audits(target: str, family: str) -> list[AuditRef]:
    """The finished audits of ``target`` by probe ``family`` (its name, ``dim_audits.family``) in
    order (``dim_audits.audit_seq``).

    Only one family's audits are listed: a VLStereoSet or ModSCAN audit of the same model
    measures something else, and comparing it with a T2T audit would report every association
    as gone.

    Raises:
        DiffError: the target has no finished audit of the family (the message lists the known targets).
    """
    rows = execute_query(
        "select audit_id, model_version, audit_seq, modality from dim_audits "
        "where target = ? and family = ? and status = 'finished' order by audit_seq",
        params=[target, family],
    ).rows
    if not rows:
        known = [r[0] for r in execute_query("select distinct target from dim_audits order by 1").rows]
        raise DiffError(f"no finished audit of target {target!r}; targets with audits: {known}")
    return [AuditRef(*r) for r in rows]


def _pick(audits: list[AuditRef], ref: str, flag: str) -> AuditRef:
    by_id = [a for a in audits if a.audit_id == ref]
    if by_id:
        return by_id[0]
    by_version = [a for a in audits if a.model_version == ref]
    if len(by_version) == 1:
        return by_version[0]
    if len(by_version) > 1:
        raise DiffError(f"{flag} {ref!r} matches several audits ({[a.audit_id for a in by_version]}): give an audit id")
    raise DiffError(
        f"{flag} {ref!r} is neither an audit id nor a model version of this target; audits: "
        + ", ".join(f"{a.audit_id} ({a.model_version})" for a in audits)
    )


def resolve_pair(target: str, from_ref: str | None = None, to_ref: str | None = None, *, family: str) -> tuple[AuditRef, AuditRef]:
    """The (before, after) audits of ``target`` by ``family`` (:func:`finished_audits`): by audit
    id or model version; defaults: latest vs the one before.

    Raises:
        DiffError: unknown / ambiguous reference, a single audit, or before not earlier than after.
    """
    audits = finished_audits(target, family)
    after = _pick(audits, to_ref, "--to") if to_ref else audits[-1]
    if from_ref:
        before = _pick(audits, from_ref, "--from")
    else:
        earlier = [a for a in audits if a.audit_seq < after.audit_seq and a.modality == after.modality]
        if not earlier:
            raise DiffError(f"audit {after.audit_id} is the first audit of {target!r}: nothing to compare it with")
        before = earlier[-1]
    if before.audit_seq >= after.audit_seq:
        raise DiffError(f"--from {before.audit_id} must be an earlier audit than --to {after.audit_id}")
    if before.modality != after.modality:
        raise DiffError(
            f"--from {before.audit_id} is a {before.modality} audit and --to {after.audit_id} a "
            f"{after.modality} one: audits are compared only within one modality"
        )
    return before, after


#: The descriptor -> bias dimensions of the compared pair (parameters: from audit, to audit, to
#: audit again), from the per-dimension bridge ``fct_association_dimensions``: the later audit's
#: dimensions of a descriptor, else the earlier one's (a descriptor gone from the later audit).
#: Every dimension either audit probed gets a row, even with no change.
_DIMENSIONS_CTE = """dimensions as (
    select distinct modality, setting, descriptor, coalesce(bias_dimension, '(none)') as bias_dimension
    from (select distinct audit_id, modality, setting, descriptor, bias_dimension
          from fct_association_dimensions where audit_id in (?, ?))
    qualify dense_rank() over (partition by modality, setting, descriptor order by (audit_id = ?) desc) = 1
)"""


def _comparisons(before: AuditRef, after: AuditRef) -> tuple[AuditComparison, ...]:
    """The pair's rows of ``fct_audit_comparisons`` (one per modality either audit probed).

    Raises:
        DiffError: the relation is not built.
    """
    import duckdb

    columns = [f.name for f in fields(AuditComparison)]
    try:
        rows = execute_query(
            f"select {', '.join(columns)} from fct_audit_comparisons where from_audit_id = ? and to_audit_id = ? order by modality",
            params=[before.audit_id, after.audit_id],
        ).rows
    except duckdb.CatalogException:
        raise DiffError(
            "the relation fct_audit_comparisons (what two audits have in common) is not built: run `dora audit` (its dbt build creates it)"
        ) from None
    return tuple(AuditComparison(*r) for r in rows)


def _difference(comparisons: tuple[AuditComparison, ...], before: str, after: str) -> str:
    """What differs between two audits' probe rows (named ``before`` / ``after``), for the
    refusal: ``settings: noun vs singular; descriptors only in v3: man; runs 1 vs 1-4``."""
    parts = []
    modalities_before = {c.modality for c in comparisons if c.probe_rows_before}
    modalities_after = {c.modality for c in comparisons if c.probe_rows_after}
    if modalities_before != modalities_after:
        parts.append(f"modalities: {_values(sorted(modalities_before))} vs {_values(sorted(modalities_after))}")
    for c in comparisons:
        if not (c.probe_rows_before and c.probe_rows_after):
            continue
        if c.settings_before != c.settings_after:
            parts.append(f"settings: {_values(c.settings_before)} vs {_values(c.settings_after)}")
        if c.descriptors_only_before or c.descriptors_only_after:
            if len(c.descriptors_only_before) + len(c.descriptors_only_after) <= 4:
                parts += [
                    f"descriptors only in {name}: {', '.join(only)}"
                    for name, only in ((before, c.descriptors_only_before), (after, c.descriptors_only_after))
                    if only
                ]
            else:
                parts.append(f"descriptors: {c.descriptors_before} vs {c.descriptors_after} ({c.common_descriptors} in common)")
        if c.letters_before != c.letters_after:
            parts.append(f"letters: {''.join(c.letters_before) or 'none'} vs {''.join(c.letters_after) or 'none'}")
        if c.runs_before != c.runs_after:
            parts.append(f"runs {_ranges(c.runs_before)} vs {_ranges(c.runs_after)}")
    return "; ".join(parts) if parts else "the same settings, descriptors, letters and runs, but other probe rows"


def _refuse_without_common_rows(before: AuditRef, after: AuditRef, comparisons: tuple[AuditComparison, ...]) -> None:
    """Raise the one-line refusal when the two audits probed no row in common.

    Raises:
        DiffError: no common probe row (naming what differs), or an audit whose probe rows are
            not in the warehouse (archived before dora recorded them).
    """
    if any(c.common_rows for c in comparisons):
        return
    for ref, rows in ((before, sum(c.probe_rows_before for c in comparisons)), (after, sum(c.probe_rows_after for c in comparisons))):
        if not rows:
            raise DiffError(
                f"audit {ref.audit_id} has no probe row in the warehouse (int_probe_rows): its landing shards were "
                "archived before dora recorded probe rows; restore them and build again to compare it"
            )
    raise DiffError(
        f"audits {before.audit_id} ({before.model_version}) and {after.audit_id} ({after.model_version}) probed no row "
        f"in common ({_difference(comparisons, before.model_version, after.model_version)}): nothing to compare"
    )


def audit_diff(target: str, from_ref: str | None = None, to_ref: str | None = None, *, top: int = 5, family: str) -> AuditDiff:
    """Compare two finished audits of ``target`` (see :func:`resolve_pair`) on the probe rows both probed.

    Args:
        family: the name of the probe family whose audits are compared (its caller's: BiasDora's
            ``dora diff``, ``orchestration/defs/biasdora/summary.py``).
        top: significant changes shown per bias dimension, smallest change q first
            (associations without a significant change are counted, never listed); the
            flipped associations are listed up to ``2 * top``.

    Raises:
        DiffError: see :func:`resolve_pair`; the two audits probed no row in common (the
            message names what differs: modalities, settings, descriptors, letters, runs); an
            audit's probe rows are not in the warehouse; ``fct_audit_comparisons`` or
            ``fct_association_dimensions`` is not built. Plus the read errors of
            :func:`analytics.query.execute_query`.
    """
    if top < 1:
        raise DiffError(f"--top must be >= 1, got {top}")
    before, after = resolve_pair(target, from_ref, to_ref, family=family)
    comparisons = _comparisons(before, after)
    _refuse_without_common_rows(before, after, comparisons)
    pair, params = "from_audit_id = ? and to_audit_id = ?", [before.audit_id, after.audit_id]
    counts = dict(execute_query(f"select change_type, count(*) from fct_association_changes where {pair} group by 1", params=params).rows)
    flip_counts, flips = _flips(pair, params, top)
    # fct_association_changes has one row per association; its descriptor's dimensions come from
    # the per-dimension bridge, so a descriptor filed under two dimensions counts in both
    dims_params = [before.audit_id, after.audit_id, after.audit_id]
    import duckdb

    try:
        execute_query("select 1 from fct_association_dimensions limit 0")
    except duckdb.CatalogException:
        raise DiffError("the per-dimension relation fct_association_dimensions is not built: run `dora audit` (its dbt build creates it)") from None
    top_rows, by_dimension = _per_dimension(pair, params, dims_params, top)
    return AuditDiff(target, before, after, counts, top_rows, by_dimension, comparisons, flips, tuple(flip_counts))


def _flips(pair: str, params: list, top: int):
    """(the counts of flipped / significant associations before and after, the flipped
    associations: up to ``2 * top``, smallest change q first)."""
    flip_counts = execute_query(
        f"""select count(*) filter (where significance_flipped),
                   count(*) filter (where significance_flipped and significant_before),
                   count(*) filter (where significant_before),
                   count(*) filter (where significant_after)
            from fct_association_changes where {pair}""",
        params=params,
    ).rows[0]
    flips = execute_query(
        f"""select case when significant_before then 'only before' else 'only after' end as significant,
                   change_type, setting, descriptor, word, tf_before, doc_length_before, tf_after, doc_length_after,
                   fisher_q_before as q_before, fisher_q_after as q_after, change_q
            from fct_association_changes where {pair} and significance_flipped
            order by change_q, abs(tfidf_change) desc, setting, descriptor, word
            limit ?""",
        params=[*params, 2 * int(top)],
    )
    return flip_counts, flips


def _per_dimension(pair: str, params: list, dims_params: list, top: int):
    """(the top ``top`` significant changes per bias dimension, one line per (modality, bias
    dimension)): a descriptor filed under two dimensions counts in both."""
    top_rows = execute_query(
        f"""with {_DIMENSIONS_CTE},
            changes as (select * from fct_association_changes where {pair} and is_significant_change)
            select d.bias_dimension, c.change_type, c.setting, c.descriptor, c.word,
                   c.tf_before, c.doc_length_before, c.tf_after, c.doc_length_after,
                   c.change_q, c.fisher_q_before as q_before, c.fisher_q_after as q_after,
                   c.bias_level_before, c.bias_level_after
            from changes as c
            inner join dimensions as d on d.modality = c.modality and d.setting = c.setting and d.descriptor = c.descriptor
            qualify row_number() over (
                partition by d.bias_dimension
                order by c.change_q, abs(c.tfidf_change) desc, c.setting, c.descriptor, c.word
            ) <= ?
            order by d.bias_dimension, c.change_q, abs(c.tfidf_change) desc, c.setting, c.descriptor, c.word""",
        params=[*dims_params, *params, int(top)],
    )
    by_dimension = tuple(
        execute_query(
            f"""with {_DIMENSIONS_CTE},
                changes as (select * from fct_association_changes where {pair})
                select d.modality, d.bias_dimension,
                       count(c.word) as associations_compared,
                       count(*) filter (where c.is_significant_change) as significant_changes,
                       case
                           when count(*) filter (where c.is_significant_change) = 0 then 'no detectable change'
                           when count(*) filter (where c.change_type in ('gone', 'weakened')) = 0 then 'stronger'
                           when count(*) filter (where c.change_type in ('new', 'strengthened')) = 0 then 'weaker'
                           else 'mixed'
                       end as direction,
                       min(c.change_q) as min_change_q,
                       count(*) filter (where c.significant_before) as significant_before,
                       count(*) filter (where c.significant_after) as significant_after
                from dimensions as d
                left join changes as c on c.modality = d.modality and c.setting = d.setting and c.descriptor = d.descriptor
                group by d.modality, d.bias_dimension
                order by d.modality, d.bias_dimension""",
            params=[*dims_params, *params],
        ).rows
    )
    return top_rows, by_dimension
