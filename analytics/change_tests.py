"""Change tests between two audits of a probe family's headline metric (``dora diff --family``).

SQL builds each test's inputs (the per-unit values or the count tables of the two audits,
``dbt_project/models/marts/<family>/fct_*_change_tests.sql``); these functions only compute the
statistic, with scipy, and are registered as DuckDB UDFs by
:func:`analytics.duckdb_plugin.register_functions` (one call per compared row, not per answer):

* ``mann_whitney_p(before DOUBLE[], after DOUBLE[]) -> DOUBLE``: two-sided Mann-Whitney U
  p-value, ``scipy.stats.mannwhitneyu(before, after, alternative="two-sided").pvalue``
  (scipy's default ``method="auto"``: exact below 8 values per side without ties, else the
  normal approximation with tie correction and continuity correction). Used for counterfactual
  MaxToxicity (Howard et al., seed 003, section 3.3 Eq. 1: a mean over (set, seed) units of a
  per-set max - min; the units are the samples, their distribution is bounded and skewed).
* ``chi2_stratified_p(before INTEGER[][], after INTEGER[][]) -> DOUBLE``: homogeneity of two
  audits' answer counts, stratified by instance. ``before[j]`` and ``after[j]`` are the count
  vectors of stratum j (same length, same category order); each stratum gives the Pearson
  statistic and degrees of freedom of ``scipy.stats.chi2_contingency([before[j], after[j]],
  correction=False)`` on its non-empty columns, and the p-value is
  ``scipy.stats.chi2.sf(sum of statistics, sum of dof)``. Used for ModSCAN S_bias (seed 000
  Eq. 2 / docs/families/modscan.md#s_bias: S_bias is a function of the per-instance selection counts and the
  N/A count, so the two audits' S_bias can only differ when those count tables differ).

* ``pearson_r(x DOUBLE[], y DOUBLE[]) -> DOUBLE`` and ``pearson_p(x DOUBLE[], y DOUBLE[]) -> DOUBLE``:
  ``scipy.stats.pearsonr(x, y)``'s statistic and two-sided p-value (t-test of r with n - 2
  degrees of freedom). Not a change test: the LVLM vs LLM MaxToxicity correlation of Howard et
  al. (seed 003) section 5.1 ("the Pearson correlation coefficient between the MaxToxicity of
  LVLM-LLM pairs"), used by ``agg_lvlm_llm_max_toxicity``.

* ``mcnemar_p(b BIGINT, c BIGINT) -> DOUBLE``: exact McNemar test of paired binary outcomes,
  ``statsmodels.stats.contingency_tables.mcnemar([[0, b], [c, 0]], exact=True).pvalue``
  (McNemar 1947; exact: the two-sided binomial test of b successes in b + c trials at 1/2).
  ``b`` and ``c`` are the discordant pairs (yes before / no after, no before / yes after); the
  concordant cells do not enter the test. Used for the parse rate of two audits on the probe
  rows both probed (the same prompts: ``fct_audit_comparisons``).
* ``detectable_effect_size(n1 DOUBLE, n2 DOUBLE, alpha DOUBLE, power DOUBLE) -> DOUBLE``: the
  smallest Cohen's h (h = |2 asin sqrt(p1) - 2 asin sqrt(p2)|, Cohen 1988 ch. 6) a two-sided
  test of two independent proportions with n1 and n2 observations detects with probability
  ``power`` at level ``alpha``: ``statsmodels.stats.power.NormalIndPower().solve_power(
  effect_size=None, nobs1=n1, ratio=n2 / n1, alpha=alpha, power=power,
  alternative="two-sided")``, i.e. the root of Phi(h sqrt(n) - z) + Phi(-h sqrt(n) - z) = power
  with n = n1 n2 / (n1 + n2) and z = Phi^-1(1 - alpha / 2), about (z + Phi^-1(power)) / sqrt(n).
  The normal approximation of the change tests' Fisher test: how large a change of a share
  (a word's share of a document, an item share) two audits of this size could have seen.

All return NULL when the test has no data (a side without a value / no stratum with both
sides answered / no observation). Only ``scipy.stats`` / ``statsmodels`` are imported, and only
at the first call.
"""

from __future__ import annotations

import math

__all__ = ["chi2_stratified", "chi2_stratified_pvalue", "detectable_effect_size", "mann_whitney_pvalue", "mcnemar_pvalue", "pearson"]


def mann_whitney_pvalue(before, after) -> float | None:
    """Two-sided Mann-Whitney U p-value of two samples (sequences of floats; None / NaN skipped).

    Returns ``scipy.stats.mannwhitneyu(before, after, alternative="two-sided").pvalue``, or
    None when a side has no value. 1.0 when every value of both sides is equal (no evidence of
    a change; scipy itself returns 1.0 or NaN there depending on the method).
    """
    from scipy import stats

    x = [float(v) for v in (before or []) if v is not None and not math.isnan(v)]
    y = [float(v) for v in (after or []) if v is not None and not math.isnan(v)]
    if not x or not y:
        return None
    if min(x + y) == max(x + y):
        return 1.0
    p = float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    return None if math.isnan(p) else p


def chi2_stratified(before, after) -> tuple[float, int] | None:
    """Summed Pearson chi-square statistic and degrees of freedom over strata (see the module doc).

    Args:
        before, after: lists of strata, each a list of non-negative counts (one per answer
            category, same order in both audits); stratum j of ``before`` is compared with
            stratum j of ``after``.

    Returns:
        (statistic, dof), or None when no stratum has answers on both sides. Columns empty in
        both audits are dropped; a stratum with a single non-empty column adds (0, 0).

    Raises:
        ValueError: different numbers of strata, different stratum lengths or a negative count
            (naming the stratum).
    """
    from scipy import stats

    if before is None or after is None:
        return None
    if len(before) != len(after):
        raise ValueError(f"chi2_stratified: {len(before)} strata before, {len(after)} after")
    statistic, dof, used = 0.0, 0, 0
    for j, (b, a) in enumerate(zip(before, after, strict=True)):
        if b is None or a is None:
            continue
        b, a = [int(v or 0) for v in b], [int(v or 0) for v in a]
        if len(b) != len(a):
            raise ValueError(f"chi2_stratified: stratum {j} has {len(b)} counts before and {len(a)} after")
        if min(b + a, default=0) < 0:
            raise ValueError(f"chi2_stratified: stratum {j} has a negative count")
        if sum(b) == 0 or sum(a) == 0:
            continue  # one audit has no answer for this instance: nothing to compare
        used += 1
        cols = [k for k in range(len(b)) if b[k] + a[k] > 0]
        if len(cols) < 2:
            continue  # both audits gave the same single answer: statistic 0 on 0 dof
        result = stats.chi2_contingency([[b[k] for k in cols], [a[k] for k in cols]], correction=False)
        statistic += float(result.statistic)
        dof += int(result.dof)
    return (statistic, dof) if used else None


def chi2_stratified_pvalue(before, after) -> float | None:
    """``scipy.stats.chi2.sf(statistic, dof)`` of :func:`chi2_stratified`; 1.0 on 0 dof, None without data."""
    from scipy import stats

    summed = chi2_stratified(before, after)
    if summed is None:
        return None
    statistic, dof = summed
    return 1.0 if dof == 0 else float(stats.chi2.sf(statistic, dof))


def pearson(x, y) -> tuple[float, float] | None:
    """Pearson's r and its two-sided p-value of paired samples (``x[i]`` with ``y[i]``).

    Returns ``scipy.stats.pearsonr(x, y)`` as (statistic, pvalue), or None when fewer than 3
    pairs have both values (no p-value: n - 2 < 1 degrees of freedom), the lists differ in
    length, or a side is constant (r undefined). Pairs with a None / NaN side are skipped.
    """
    from scipy import stats

    if x is None or y is None or len(x) != len(y):
        return None
    pairs = [(float(a), float(b)) for a, b in zip(x, y, strict=True) if a is not None and b is not None and not math.isnan(a) and not math.isnan(b)]
    if len(pairs) < 3:
        return None
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    if min(xs) == max(xs) or min(ys) == max(ys):
        return None
    res = stats.pearsonr(xs, ys)
    return float(res.statistic), float(res.pvalue)


def mcnemar_pvalue(b, c) -> float | None:
    """Exact McNemar p-value of ``b`` and ``c`` discordant pairs (see the module doc).

    Returns ``statsmodels.stats.contingency_tables.mcnemar([[0, b], [c, 0]], exact=True).pvalue``
    (1.0 when b = c = 0: no discordant pair, no evidence of a change), or None when a count is
    None or negative.
    """
    if b is None or c is None or b < 0 or c < 0:
        return None
    if b + c == 0:
        return 1.0
    from statsmodels.stats.contingency_tables import mcnemar

    return float(mcnemar([[0, int(b)], [int(c), 0]], exact=True).pvalue)


def detectable_effect_size(n1, n2, alpha, power) -> float | None:
    """Smallest Cohen's h detectable with ``n1`` and ``n2`` observations (see the module doc).

    Args:
        n1, n2: observations of the two samples (e.g. the words of a document in each audit);
            may be fractional (a median).
        alpha: two-sided significance level, in (0, 1).
        power: the probability of detecting a change of that size, in (0, 1).

    Returns:
        ``NormalIndPower().solve_power(effect_size=None, nobs1=n1, ratio=n2 / n1, alpha=alpha,
        power=power, alternative="two-sided")``, or None when a side has fewer than one
        observation or an argument is None.

    Raises:
        ValueError: alpha or power outside (0, 1).
    """
    if n1 is None or n2 is None or alpha is None or power is None or n1 < 1 or n2 < 1:
        return None
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"detectable_effect_size: alpha {alpha} and power {power} must be in (0, 1)")
    from statsmodels.stats.power import NormalIndPower

    return float(
        NormalIndPower().solve_power(
            effect_size=None, nobs1=float(n1), ratio=float(n2) / float(n1), alpha=float(alpha), power=float(power), alternative="two-sided"
        )
    )
