"""Judge agreement statistics, computed by the maintained libraries, for the dbt UDFs.

The LLM judge rates an association's bias level on the 5-point Likert scale of BiasDora
(seed 004, Section 3.3; docs/method.md#4-scoring). How far its ratings can be trusted is measured
by how often raters agree: the k runs of one judge (``--judge-runs k``) or several
judges (``--judge-model a,b``: comma-separated). The mart ``agg_judge_agreement`` lays the
ratings out as a reliability matrix (raters x associations, NULL = no parsed rating) and
calls these functions through the DuckDB UDFs of :mod:`analytics.duckdb_plugin`:

* :func:`cohen_kappa_linear`: linearly weighted Cohen's kappa of exactly two raters over the
  associations both rated, ``sklearn.metrics.cohen_kappa_score(a, b, weights="linear")``
  (Cohen 1968): 1 - sum w_ij O_ij / sum w_ij E_ij with w_ij = |i - j|; 1 = perfect agreement,
  0 = chance agreement, < 0 worse than chance. Labels 1-5 are passed explicitly, so a level
  nobody used still counts in the weights.
* :func:`krippendorff_alpha_ordinal`: Krippendorff's alpha, ordinal level, any number of
  raters, missing ratings allowed (``krippendorff.alpha(..., level_of_measurement="ordinal",
  value_domain=[1, 2, 3, 4, 5])``, Krippendorff 2011): 1 - D_observed / D_expected.

Both return ``None`` when the statistic is undefined (fewer than two rated items or no
variation at all: 0 / 0), never a made-up number. scikit-learn and krippendorff are imported
on first use (dbt loads the plugin in every process).
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

__all__ = ["LIKERT_DOMAIN", "cohen_kappa_linear", "krippendorff_alpha_ordinal"]

#: the judge's Likert levels (docs/method.md#4-scoring)
LIKERT_DOMAIN = (1, 2, 3, 4, 5)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def cohen_kappa_linear(matrix: Sequence[Sequence[int | None]] | None) -> float | None:
    """Linearly weighted Cohen's kappa of a 2-rater reliability matrix.

    Args:
        matrix: two rows (raters) of equal length (items); ``None`` = no rating. Items not
            rated by both are left out.

    Returns:
        ``sklearn.metrics.cohen_kappa_score(a, b, labels=[1..5], weights="linear")``, or
        ``None`` when the matrix has not exactly two rows, fewer than 2 items rated by both,
        or the statistic is undefined (both raters constant and equal: 0 / 0).

    Raises:
        ValueError: rows of different lengths.
    """
    if matrix is None or len(matrix) != 2:
        return None
    a_row, b_row = matrix
    if len(a_row) != len(b_row):
        raise ValueError(f"reliability matrix rows differ in length: {len(a_row)} != {len(b_row)}")
    pairs = [(a, b) for a, b in zip(a_row, b_row, strict=True) if a is not None and b is not None]
    if len(pairs) < 2:
        return None
    from sklearn.metrics import cohen_kappa_score

    a, b = zip(*pairs, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 0 / 0: nan (sklearn warns UndefinedMetricWarning), returned as None
        return _finite(cohen_kappa_score(a, b, labels=list(LIKERT_DOMAIN), weights="linear"))


def krippendorff_alpha_ordinal(matrix: Sequence[Sequence[int | None]] | None) -> float | None:
    """Krippendorff's alpha (ordinal) of a reliability matrix (raters x items, ``None`` = missing).

    Returns:
        ``krippendorff.alpha(reliability_data, level_of_measurement="ordinal",
        value_domain=[1, 2, 3, 4, 5])``, or ``None`` with fewer than two raters, fewer than
        one item rated twice, or no variation at all (undefined).

    Raises:
        ValueError: rows of different lengths.
    """
    if matrix is None or len(matrix) < 2:
        return None
    lengths = {len(row) for row in matrix}
    if len(lengths) != 1:
        raise ValueError(f"reliability matrix rows differ in length: {sorted(lengths)}")
    import numpy as np

    data = np.array([[np.nan if v is None else float(v) for v in row] for row in matrix], dtype=float)
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    if not pairable.any():
        return None
    values = data[~np.isnan(data)]
    if np.unique(values).size < 2:
        return None  # every rating equal: D_expected = 0, alpha undefined
    import krippendorff

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _finite(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=list(LIKERT_DOMAIN)))
