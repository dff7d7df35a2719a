"""``dora models list``: every registry target, each of its probe families' latest audit and that
audit's drift-check state.

Knows no family: the CLI passes which families a target runs and the drift results
(:func:`analytics.drift.evaluate_drift`, judged by the families' own checks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from analytics.drift import DriftResult, worst_state
from analytics.query import QueryResult, execute_query

__all__ = ["COLUMNS", "check_state", "models_overview"]

COLUMNS = (
    "target",
    "family",
    "modality",
    "backend",
    "model",
    "version_source",
    "current_version",
    "last_audit",
    "last_audit_version",
    "last_status",
    "last_at",
    "checks",
    "valid",
)


def check_state(results: Sequence[DriftResult]) -> str:
    """The ``checks`` cell of one (target, family): its worst state and the checks in it
    (``collapse: parse_rate``), ``ok`` when every check passed; ``first audit`` without results."""
    if not results:
        return "first audit"
    state = worst_state([r.state for r in results])
    if state == "ok":
        return "ok"
    return f"{state}: " + ", ".join(dict.fromkeys(r.check for r in results if r.state == state))


def _last_audits() -> dict[tuple[str, str], tuple]:
    """{(target, family): (audit_id, model_version, status, at)} of the latest audit (finished or
    not) of each target and family in ``dim_audits``; ``{}`` without a warehouse or the table."""
    import duckdb

    from analytics.query import WarehouseMissingError

    try:
        result = execute_query(
            """select target, family, audit_id, model_version, status, coalesce(finished_at, started_at) as at
               from dim_audits
               qualify row_number() over (partition by target, family order by started_at desc, audit_id desc) = 1"""
        )
    except (WarehouseMissingError, duckdb.CatalogException):  # no warehouse, or no dim_audits in it
        return {}
    return {(r[0], r[1]): r[2:] for r in result.rows}


def models_overview(
    registry,
    *,
    resolve: Callable[[object], str] | None = None,
    check: Callable[[object], str | None] | None = None,
    families_of: Callable[[object], Sequence[str]] | None = None,
    drift: Sequence[DriftResult] = (),
) -> QueryResult:
    """One row per (registry target, family it runs): the target's current version, the family's
    latest audit of it and the state of that audit's drift checks.

    Args:
        registry: a parsed :class:`ingestion.registry.Registry`.
        resolve: reads a target's current version (``models_inference.model_ref.resolve_version``,
            passed in by the CLI: analytics does not load models); it may raise any
            exception, shown as ``unreadable: ...``. None: versions are not read.
        check: a target's problem (one line) or ``None`` when ``dora audit --target`` would
            accept it; shown in the last column ``valid`` as ``ok`` or ``invalid: <reason>``.
            None: ``(not checked)``.
        families_of: the probe families a target runs (the CLI passes the registry's rule);
            None: the families its audits in ``dim_audits`` belong to, else one row with family ``-``.
        drift: the drift results of the targets' latest audits (``analytics.drift.evaluate_drift``).

    The ``checks`` column: ``ok``, ``change: <checks>``, ``collapse: <checks>``,
    ``not comparable: <checks>`` (the worst state of the family's latest pair), ``first audit``
    (a family audited once: nothing to compare), ``-`` (never audited). ``last_*`` is ``-`` when the
    warehouse does not exist yet, ``dim_audits`` was never built in it or the family never
    audited the target.

    Raises:
        WarehouseBusyError, WarehouseCorruptError: see :func:`analytics.query.connect_read_only`.
    """
    last = _last_audits()
    rows = []
    for t in registry.targets:
        if resolve is not None:
            try:
                current = resolve(t)
            except Exception as exc:  # noqa: BLE001 - any reason the version is unreadable is shown
                current = f"unreadable: {exc}"[:80]
        else:
            current = "(not read)"
        problem = check(t) if check is not None else None
        valid = "(not checked)" if check is None else (f"invalid: {problem}" if problem else "ok")
        if families_of is not None:
            families = list(families_of(t))
        else:
            families = sorted({f for target, f in last if target == t.name}) or ["-"]
        for family in families:
            audit_id, version, status, at = last.get((t.name, family), ("-", "-", "-", None))
            results = [r for r in drift if r.target == t.name and r.family == family]
            checks = "-" if audit_id == "-" else check_state(results)
            rows.append(
                (
                    t.name,
                    family,
                    t.modality,
                    t.backend,
                    t.model,
                    t.version.source,
                    current,
                    audit_id,
                    version,
                    status,
                    at.strftime("%Y-%m-%d %H:%M") if at else "-",
                    checks,
                    valid,
                )
            )
    return QueryResult(list(COLUMNS), rows)
