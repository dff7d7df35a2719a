"""DuckDB UDF of the counterfactual marts: the Kruskal-Wallis test across groups. The family's
landing contract names this module (``DUCKDB_FUNCTIONS``), so dbt-duckdb's plugin
(``analytics/duckdb_plugin.py``) registers it on the warehouse connection.

Beyond Howard et al. (seed 003, section 4.4 reports group means only): dora adds a
Kruskal-Wallis H test across the intersectional groups of each (prompt, occupation), so a
user sees which gaps in the numeric ratings are significant. SQL has no rank test, so
``kruskal_p(values DOUBLE[], groups VARCHAR[]) -> DOUBLE`` calls ``scipy.stats.kruskal`` on
the values split by group (one call per aggregated row, i.e. per test, not per answer).
NULL when fewer than two groups have a value, or when every value is equal (H undefined).
"""

from __future__ import annotations

import math

import pyarrow as pa

__all__ = ["kruskal_pvalue", "register_functions"]


def kruskal_pvalue(values, groups) -> float | None:
    """Kruskal-Wallis p-value of ``values`` split by ``groups`` (two equal-length sequences;
    None entries skipped), ``scipy.stats.kruskal(*samples).pvalue``; ``None`` if < 2 groups
    or all values equal."""
    from scipy import stats

    if values is None or groups is None:
        return None
    samples: dict = {}
    for v, g in zip(values, groups, strict=True):
        if v is not None and g is not None and not math.isnan(v):
            samples.setdefault(g, []).append(float(v))
    if len(samples) < 2:
        return None
    flat = [v for s in samples.values() for v in s]
    if min(flat) == max(flat):
        return None
    p = stats.kruskal(*samples.values()).pvalue
    return None if p is None or math.isnan(p) else float(p)


def _kruskal_udf(values: pa.Array, groups: pa.Array) -> pa.Array:
    return pa.array([kruskal_pvalue(v, g) for v, g in zip(values.to_pylist(), groups.to_pylist(), strict=True)], type=pa.float64())


def register_functions(con) -> None:
    """Register ``kruskal_p(DOUBLE[], VARCHAR[]) -> DOUBLE`` on a DuckDB connection (idempotent)."""
    try:
        from duckdb.func import FunctionNullHandling, PythonUDFType  # duckdb >= 1.4
    except ImportError:  # pragma: no cover - older duckdb
        from duckdb.functional import FunctionNullHandling, PythonUDFType  # type: ignore[no-redef]
    try:
        con.remove_function("kruskal_p")
    except Exception:  # not registered yet
        pass
    con.create_function(
        "kruskal_p",
        _kruskal_udf,
        ["DOUBLE[]", "VARCHAR[]"],
        "DOUBLE",
        type=PythonUDFType.ARROW,
        null_handling=FunctionNullHandling.SPECIAL,
    )
