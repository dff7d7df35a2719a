"""``dora diff``: what changed between two audits of the same registry target.

Reads the marts ``dim_audits`` (finished audits per target, in order),
``fct_association_changes`` (every earlier/later pair of audits of a target; per association
a two-sided Fisher change test, its BH q-value ``change_q`` and the change type, doc block
``change_type``) and the per-dimension bridge ``fct_association_dimensions`` read-only, and
reports how many listed associations changed significantly (change_q < 0.05), the count of
each change type, a line per audited bias dimension (an association counts under every
dimension of its descriptor, as in ``dora report``), and the top significant changes per bias
dimension ranked by ``change_q`` (then by ``|tfidf_change|``). Every number comes from SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from analytics.query import QueryResult, format_q, format_result, run_query

#: change types of fct_association_changes (`gone` was `dropped`)
CHANGE_TYPES = ("new", "gone", "strengthened", "weakened", "unchanged")


class DiffError(ValueError):
    """The target or an audit reference is unknown, ambiguous, or the pair is not in order."""


@dataclass(frozen=True)
class AuditRef:
    """One finished audit of a target: id, model version, its position (audit_seq) and its
    modality (audits are compared only with audits of the same modality)."""

    audit_id: str
    model_version: str
    audit_seq: int
    modality: str = "t2t"


@dataclass(frozen=True)
class AuditDiff:
    """The comparison of two audits: counts per change type and the top changes."""

    target: str
    before: AuditRef
    after: AuditRef
    counts: dict[str, int]
    top: QueryResult
    #: one row per (modality, bias dimension) either audit probed: (modality, bias_dimension,
    #: associations compared, significant changes, direction, min change q, significant
    #: associations before, after); an association counts under every dimension of its descriptor
    by_dimension: tuple = ()

    def text(self, fmt: str = "table") -> str:
        """Human-readable report (``fmt`` = table) or the top rows as csv / json."""
        if fmt != "table":
            return format_result(self.top, fmt)
        total = sum(self.counts.values())
        significant = total - self.counts.get("unchanged", 0)
        lines = [
            f"dora diff {self.target}: {self.before.audit_id} (version {self.before.model_version}) -> "
            f"{self.after.audit_id} (version {self.after.model_version})",
            f"  {significant} of {total} associations (significant in either audit) changed significantly "
            "(two-sided Fisher change test, BH change q < 0.05): "
            + ", ".join(f"{t} {self.counts.get(t, 0)}" for t in CHANGE_TYPES if t != "unchanged")
            + f"; no detectable change {self.counts.get('unchanged', 0)}",
        ]
        for modality, dim, compared, n_sig, direction, min_q, sig_before, sig_after in self.by_dimension:
            lines.append(f"    {modality} {dim}: {n_sig} of {compared} changed significantly: {direction} "
                         f"(min change q {format_q(min_q)}); significant associations {sig_before} -> {sig_after}")
        if not self.top.rows:
            lines.append("  no significant change between these audits")
            return "\n".join(lines)
        dim_col = self.top.columns.index("bias_dimension")
        dims = sorted({r[dim_col] or "(none)" for r in self.top.rows})
        for dim in dims:
            rows = [r[:dim_col] + r[dim_col + 1 :] for r in self.top.rows if (r[dim_col] or "(none)") == dim]
            cols = self.top.columns[:dim_col] + self.top.columns[dim_col + 1 :]
            lines += ["", f"  {dim} (top changes by change q):"]
            lines += ["    " + ln for ln in format_result(QueryResult(cols, rows)).splitlines()]
        return "\n".join(lines)


def finished_audits(target: str, family: str = "biasdora") -> list[AuditRef]:
    """The finished audits of ``target`` by probe ``family`` in order (``dim_audits.audit_seq``).

    Only one family's audits are listed: a VLStereoSet or ModSCAN audit of the same model
    measures something else, and comparing it with a T2T audit would report every association
    as gone.

    Raises:
        DiffError: the target has no finished audit of the family (the message lists the known targets).
    """
    rows = run_query(
        "select audit_id, model_version, audit_seq, modality from dim_audits "
        "where target = ? and family = ? and status = 'finished' order by audit_seq",
        params=[target, family],
    ).rows
    if not rows:
        known = [r[0] for r in run_query("select distinct target from dim_audits order by 1").rows]
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


def resolve_pair(target: str, from_ref: str | None = None, to_ref: str | None = None) -> tuple[AuditRef, AuditRef]:
    """The (before, after) audits: by audit id or model version; defaults: latest vs the one before.

    Raises:
        DiffError: unknown / ambiguous reference, a single audit, or before not earlier than after.
    """
    audits = finished_audits(target)
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
        raise DiffError(f"--from {before.audit_id} is a {before.modality} audit and --to {after.audit_id} a "
                        f"{after.modality} one: audits are compared only within one modality")
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


def audit_diff(target: str, from_ref: str | None = None, to_ref: str | None = None, *, top: int = 5) -> AuditDiff:
    """Compare two finished audits of ``target`` (see :func:`resolve_pair`).

    Args:
        top: significant changes shown per bias dimension, smallest change q first
            (associations without a significant change are counted, never listed).

    Raises:
        DiffError (also when ``fct_association_dimensions`` is not built), plus the read errors
        of :func:`analytics.query.run_query`.
    """
    if top < 1:
        raise DiffError(f"--top must be >= 1, got {top}")
    before, after = resolve_pair(target, from_ref, to_ref)
    pair, params = "from_audit_id = ? and to_audit_id = ?", [before.audit_id, after.audit_id]
    counts = dict(
        run_query(f"select change_type, count(*) from fct_association_changes where {pair} group by 1", params=params).rows
    )
    # fct_association_changes has one row per association; its descriptor's dimensions come from
    # the per-dimension bridge, so a descriptor filed under two dimensions counts in both
    dims_params = [before.audit_id, after.audit_id, after.audit_id]
    import duckdb

    try:
        run_query("select 1 from fct_association_dimensions limit 0")
    except duckdb.CatalogException:
        raise DiffError("the per-dimension relation fct_association_dimensions is not built: "
                        "run `dora audit` (its dbt build creates it)") from None
    top_rows = run_query(
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
        run_query(
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
    return AuditDiff(target, before, after, counts, top_rows, by_dimension)


def models_overview(registry, *, resolve: Callable[[object], str] | None = None,
                    check: Callable[[object], str | None] | None = None) -> QueryResult:
    """``dora models list``: every registry target with its current version and last audit.

    Args:
        registry: a parsed :class:`ingestion.registry.Registry`.
        resolve: reads a target's current version (``models_inference.model_ref.resolve_version``,
            passed in by the CLI: analytics does not load models); it may raise any
            exception, shown as ``unreadable: ...``. None: versions are not read.
        check: a target's problem (one line) or ``None`` when ``dora audit --target`` would
            accept it (the CLI passes ``orchestration.cli.target.check_target``); shown in the
            last column ``valid`` as ``ok`` or ``invalid: <reason>``. None: ``(not checked)``.

    The last audit is the latest finished-or-not audit of the target in ``dim_audits`` (by
    ``started_at``); ``-`` when the warehouse does not exist yet or the target was never audited.
    """
    from analytics.query import WarehouseMissingError

    last: dict[str, tuple] = {}
    try:
        result = run_query(
            """select target, audit_id, model_version, status, coalesce(finished_at, started_at) as at
               from dim_audits
               qualify row_number() over (partition by target order by started_at desc, audit_id desc) = 1"""
        )
        last = {r[0]: r[1:] for r in result.rows}
    except WarehouseMissingError:
        pass
    rows = []
    for t in registry.targets:
        if resolve is not None:
            try:
                current = resolve(t)
            except Exception as exc:  # noqa: BLE001 - any reason the version is unreadable is shown
                current = f"unreadable: {exc}"[:80]
        else:
            current = "(not read)"
        audit_id, version, status, at = last.get(t.name, ("-", "-", "-", None))
        problem = check(t) if check is not None else None
        valid = "(not checked)" if check is None else (f"invalid: {problem}" if problem else "ok")
        rows.append(
            (t.name, t.modality, t.backend, t.model, t.version.source, current, audit_id, version, status,
             at.strftime("%Y-%m-%d %H:%M") if at else "-", valid)
        )
    columns = ["target", "modality", "backend", "model", "version_source", "current_version",
               "last_audit", "last_audit_version", "last_status", "last_at", "valid"]
    return QueryResult(columns, rows)
