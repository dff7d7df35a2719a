"""Statistical DuckDB UDFs for the association marts, and the dbt-duckdb plugin that adds them.

Source of the definitions: BiasDora (seed 004) and ``docs/method.md#3-associations`` ("Association
analytics"). Only two pieces of the method need numerical code that SQL does not have:

* ``fisher_greater(a, b, c, d)``: the one-sided (over-representation) p-value of Fisher's
  exact test on the 2x2 table ``[[a, b], [c, d]]``, identical to
  ``scipy.stats.fisher_exact(table, alternative="greater").pvalue``.
* ``normal_sf(z)``: the standard normal survival function ``1 - Phi(z)``, used for the
  paper's z-score p-value of a tf-idf value.

Both are vectorised (Arrow in, Arrow out): DuckDB calls them once per data chunk (2,048
rows), not once per row. Both map SQL NULL inputs to NULL outputs. Only ``scipy.special`` is
imported here; ``scipy.stats`` (~0.5 s to import, paid at every dbt start otherwise) only
when a tiny or extreme table needs it (:mod:`analytics.fisher`).

dbt-duckdb loads this module from the profile (``plugins: [{module: analytics.duckdb_plugin}]``)
and calls :meth:`Plugin.configure_connection` on the warehouse connection; tests call
:func:`register_functions` on their own connection. A family's own functions live in its own
module (``analytics.counterfactual_stats``), named by its landing contract (``DUCKDB_FUNCTIONS``
in ``ingestion/contracts/<family>.py``); the plugin registers them too
(:func:`register_family_functions`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import special

from analytics.fisher import fisher_greater_pvalues

try:  # the plugin base class only exists where dbt-duckdb is installed
    from dbt.adapters.duckdb.plugins import BasePlugin
except ImportError:  # pragma: no cover - plain DuckDB use without dbt
    BasePlugin = object

__all__ = [
    "Plugin",
    "chi2_stratified_p",
    "detectable_effect_size",
    "fisher_greater",
    "fisher_two_sided",
    "mann_whitney_p",
    "mcnemar_p",
    "normal_sf",
    "pearson_p",
    "pearson_r",
    "register_family_functions",
    "register_functions",
]


def _valid_mask(*arrays: pa.Array) -> np.ndarray:
    """True where none of ``arrays`` is NULL."""
    mask = np.ones(len(arrays[0]), dtype=bool)
    for arr in arrays:
        if arr.null_count:
            mask &= ~np.asarray(pc.is_null(arr))
    return mask


def _to_int64(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr.cast(pa.int64()), 0), dtype=np.int64)


def fisher_p_greater(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """One-sided Fisher's exact p-value for tables ``[[a, b], [c, d]]``, elementwise.

    BiasDora (seed 004) / docs/method.md#3-associations: a = tf(d,w), b = other words of d,
    c = occurrences of w in other descriptors, d = all other words; "greater" tests
    over-representation of w in d's document.

    Equals scipy 1.17 ``fisher_exact(..., alternative="greater")`` (P(X >= a) for X ~
    Hypergeometric(a+b+c+d, a+b, a+c)) to ~1e-10 relative, ~100x faster on paper-scale T2T
    tables: the tail is summed by :func:`analytics.fisher.fisher_greater_pvalues` (stable
    log-gamma differences + exact term ratios, 8 terms per vectorised step) instead of one
    Boost ``hypergeom.cdf`` per table. 1.0 when a row or column sum is zero, capped at 1.0.
    Tables with a negative cell give NaN (scipy raises). That function handles the
    degenerate and invalid tables itself, so this is a plain call (no second pass).
    """
    return fisher_greater_pvalues(a, b, c, d)


def fisher_greater(a: pa.Array, b: pa.Array, c: pa.Array, d: pa.Array) -> pa.Array:
    """DuckDB Arrow UDF ``fisher_greater(a, b, c, d) -> DOUBLE`` (see :func:`fisher_p_greater`).

    Source: BiasDora (seed 004), docs/method.md#3-associations. NULL in any argument -> NULL;
    a negative cell -> NULL (not a contingency table).
    """
    mask = _valid_mask(a, b, c, d)
    p = fisher_p_greater(_to_int64(a), _to_int64(b), _to_int64(c), _to_int64(d))
    mask &= ~np.isnan(p)
    return pa.array(p, type=pa.float64(), mask=~mask)


# --- change significance between audits (two-sided Fisher) ---------------------
def fisher_two_sided(a: pa.Array, b: pa.Array, c: pa.Array, d: pa.Array) -> pa.Array:
    """DuckDB Arrow UDF ``fisher_two_sided(a, b, c, d) -> DOUBLE``: two-sided Fisher's exact p.

    Equals ``scipy.stats.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue`` to
    ~1e-10 relative (:func:`analytics.fisher_two_sided.fisher_two_sided_pvalues`); used by
    ``fct_association_changes`` on [[tf_before, rest_before], [tf_after, rest_after]].
    NULL in any argument or a negative cell -> NULL; a zero row or column sum -> 1.0.
    """
    from analytics.fisher_two_sided import fisher_two_sided_pvalues

    mask = _valid_mask(a, b, c, d)
    p = fisher_two_sided_pvalues(_to_int64(a), _to_int64(b), _to_int64(c), _to_int64(d))
    mask &= ~np.isnan(p)
    return pa.array(p, type=pa.float64(), mask=~mask)


def judge_kappa_linear(matrix):
    """DuckDB UDF ``judge_kappa_linear(INTEGER[][]) -> DOUBLE`` (agg_judge_agreement).

    Linearly weighted Cohen's kappa of a 2-rater reliability matrix (NULL = no rating), by
    ``sklearn.metrics.cohen_kappa_score(weights="linear")``
    (:func:`analytics.agreement.cohen_kappa_linear`); NULL when undefined.
    """
    from analytics.agreement import cohen_kappa_linear

    return cohen_kappa_linear(matrix)


def judge_alpha_ordinal(matrix):
    """DuckDB UDF ``judge_alpha_ordinal(INTEGER[][]) -> DOUBLE`` (agg_judge_agreement).

    Krippendorff's alpha (ordinal, Likert 1-5) of a reliability matrix (raters x items, NULL =
    missing), by the ``krippendorff`` package (:func:`analytics.agreement.krippendorff_alpha_ordinal`).
    """
    from analytics.agreement import krippendorff_alpha_ordinal

    return krippendorff_alpha_ordinal(matrix)


# --- end of the section --------------------------------------------------------------------


# --- family change tests (dora diff --family): statistics in analytics/change_tests.py --------
def mann_whitney_p(before, after):
    """DuckDB UDF ``mann_whitney_p(DOUBLE[], DOUBLE[]) -> DOUBLE``: two-sided Mann-Whitney U p
    (``scipy.stats.mannwhitneyu``; :func:`analytics.change_tests.mann_whitney_pvalue`), used by
    ``fct_max_toxicity_change_tests``. NULL when a side has no value."""
    from analytics.change_tests import mann_whitney_pvalue

    return mann_whitney_pvalue(before, after)


def chi2_stratified_p(before, after):
    """DuckDB UDF ``chi2_stratified_p(INTEGER[][], INTEGER[][]) -> DOUBLE``: stratified Pearson
    chi-square homogeneity p of two audits' count tables (:func:`analytics.change_tests.chi2_stratified_pvalue`),
    used by ``fct_modscan_change_tests``. NULL when no stratum has answers in both audits."""
    from analytics.change_tests import chi2_stratified_pvalue

    return chi2_stratified_pvalue(before, after)


def mcnemar_p(b, c):
    """DuckDB UDF ``mcnemar_p(BIGINT, BIGINT) -> DOUBLE``: exact McNemar p of b and c discordant
    pairs (``statsmodels``; :func:`analytics.change_tests.mcnemar_pvalue`), used by
    ``fct_audit_comparisons`` for the parse rate on the probe rows both audits probed."""
    from analytics.change_tests import mcnemar_pvalue

    return mcnemar_pvalue(b, c)


def detectable_effect_size(n1, n2, alpha, power):
    """DuckDB UDF ``detectable_effect_size(DOUBLE, DOUBLE, DOUBLE, DOUBLE) -> DOUBLE``: the smallest
    Cohen's h two samples of n1 and n2 observations detect (``statsmodels`` NormalIndPower;
    :func:`analytics.change_tests.detectable_effect_size`), used by the change-test marts' power columns."""
    from analytics.change_tests import detectable_effect_size as solve

    return solve(n1, n2, alpha, power)


def pearson_r(x, y):
    """DuckDB UDF ``pearson_r(DOUBLE[], DOUBLE[]) -> DOUBLE``: ``scipy.stats.pearsonr``'s r
    (:func:`analytics.change_tests.pearson`), used by ``agg_lvlm_llm_max_toxicity`` (Howard et
    al., seed 003, section 5.1). NULL with fewer than 3 pairs or a constant side."""
    from analytics.change_tests import pearson

    found = pearson(x, y)
    return None if found is None else found[0]


def pearson_p(x, y):
    """DuckDB UDF ``pearson_p(DOUBLE[], DOUBLE[]) -> DOUBLE``: ``scipy.stats.pearsonr``'s two-sided
    p-value (:func:`analytics.change_tests.pearson`); NULL where ``pearson_r`` is."""
    from analytics.change_tests import pearson

    found = pearson(x, y)
    return None if found is None else found[1]


# --- end family change tests ------------------------------------------------------------------


def normal_sf(z: pa.Array) -> pa.Array:
    """DuckDB Arrow UDF ``normal_sf(z) -> DOUBLE`` = 1 - Phi(z) = ``scipy.special.ndtr(-z)``.

    Source: BiasDora (seed 004), docs/method.md#3-associations: the paper's significance of a tf-idf
    value is ``1 - Phi((tfidf - mean) / sd)``. NULL in -> NULL out.
    """
    mask = _valid_mask(z)
    values = np.asarray(pc.fill_null(z.cast(pa.float64()), 0.0), dtype=np.float64)
    return pa.array(special.ndtr(-values), type=pa.float64(), mask=~mask)


def register_functions(con) -> None:
    """Register ``fisher_greater`` and ``normal_sf`` on a DuckDB connection (idempotent)."""
    try:
        from duckdb.func import FunctionNullHandling, PythonUDFType  # duckdb >= 1.4
    except ImportError:  # pragma: no cover - older duckdb
        from duckdb.functional import FunctionNullHandling, PythonUDFType  # type: ignore[no-redef]

    specs = [
        ("fisher_greater", fisher_greater, ["BIGINT", "BIGINT", "BIGINT", "BIGINT"], "DOUBLE"),
        ("normal_sf", normal_sf, ["DOUBLE"], "DOUBLE"),
        ("fisher_two_sided", fisher_two_sided, ["BIGINT", "BIGINT", "BIGINT", "BIGINT"], "DOUBLE"),
    ]
    native_specs = [  # one call per agreement row (few rows), Python lists in
        ("judge_kappa_linear", judge_kappa_linear, ["INTEGER[][]"], "DOUBLE"),
        ("judge_alpha_ordinal", judge_alpha_ordinal, ["INTEGER[][]"], "DOUBLE"),
        ("mann_whitney_p", mann_whitney_p, ["DOUBLE[]", "DOUBLE[]"], "DOUBLE"),  # family change tests
        ("chi2_stratified_p", chi2_stratified_p, ["INTEGER[][]", "INTEGER[][]"], "DOUBLE"),  # family change tests
        ("mcnemar_p", mcnemar_p, ["BIGINT", "BIGINT"], "DOUBLE"),  # paired parse rates of two audits
        ("detectable_effect_size", detectable_effect_size, ["DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE"], "DOUBLE"),
        ("pearson_r", pearson_r, ["DOUBLE[]", "DOUBLE[]"], "DOUBLE"),  # LVLM vs LLM correlation
        ("pearson_p", pearson_p, ["DOUBLE[]", "DOUBLE[]"], "DOUBLE"),
    ]
    for name, func, params, returns in native_specs:
        try:
            con.remove_function(name)
        except Exception:  # not registered yet
            pass
        con.create_function(name, func, params, returns, type=PythonUDFType.NATIVE, null_handling=FunctionNullHandling.SPECIAL)
    for name, func, params, returns in specs:
        try:
            con.remove_function(name)
        except Exception:  # not registered yet
            pass
        con.create_function(
            name,
            func,
            params,
            returns,
            type=PythonUDFType.ARROW,
            null_handling=FunctionNullHandling.SPECIAL,
        )


def register_family_functions(con) -> None:
    """Register every family's own DuckDB functions on a connection: each module its landing
    contract names (``DUCKDB_FUNCTIONS``, :func:`ingestion.contracts.duckdb_function_modules`),
    by its ``register_functions(con)``.

    Raises:
        ModuleNotFoundError: a named module does not exist.
    """
    import importlib

    from ingestion.contracts import duckdb_function_modules

    for name in duckdb_function_modules():
        importlib.import_module(name).register_functions(con)


class Plugin(BasePlugin):
    """dbt-duckdb plugin: registers the shared statistical UDFs and every family's own on the
    warehouse connection."""

    def configure_connection(self, conn) -> None:  # noqa: D102 - see BasePlugin
        from ingestion.landing_location import register_landing

        register_functions(conn)
        register_family_functions(conn)
        register_landing(conn)  # a landing zone on object storage: read through its fsspec filesystem
