"""Vectorised two-sided Fisher's exact test: did an association's strength change between two audits?

(change significance between model versions). For one association (descriptor d,
word w) of one (modality, setting) compared between an earlier audit (before) and a later one
(after), the 2x2 table is::

    [[tf_before, doc_length_before - tf_before],
     [tf_after,  doc_length_after  - tf_after ]]

(rows: the two audits; columns: occurrences of w in d's document vs the rest of that document;
docs/method.md#3-associations defines tf and the document). The two-sided p-value is
``scipy.stats.fisher_exact(table, alternative="two-sided").pvalue``: the probability, under
independence with fixed margins (X ~ Hypergeometric(N = a+b+c+d, K = a+b, n = a+c)), of every
table at most as probable as the observed one:
``p = sum_x P(X = x) over {x : P(X = x) <= P(X = a) (1 + eps)}``.

scipy evaluates it with a binary search and two Boost tail calls per table (~0.3 ms each).
Here every table's whole support ``max(0, n+K-N) .. min(K, n)`` (small: the word's count in the
two audits' documents) is laid out in one flat (ragged) array, its log-probabilities computed at
once with :func:`analytics.fisher.hypergeom_logpmf` (stable log-gamma differences, relative
error ~1e-12), and the terms no more probable than the observed one summed per table with
``np.bincount``. Ties: scipy counts terms with P <= P(observed) x (1 + 1e-14) on Boost's
(exact to ~1e-15) probabilities; mathematically equal terms (mirror tables) differ here by
rounding of ~1e-12 at most, so the comparison uses a relative tolerance of 1e-9 (the R
``fisher.test`` convention is 1e-7). When the observed table is the most probable one the
p-value is exactly 1.0, as scipy's.

``tests/test_change_significance.py`` checks equality with scipy on thousands of tables
(symmetric tables and ties included) to 1e-9 relative.
"""

from __future__ import annotations

import numpy as np

from analytics.fisher import hypergeom_logpmf, tables_to_test

__all__ = ["fisher_two_sided_pvalues"]

#: relative tolerance of "at most as probable as the observed table" (log space)
_TIE_RTOL = 1e-9
#: ragged support points per vectorised chunk (memory bound: ~10 float64 arrays of this size)
_CHUNK_POINTS = 2_000_000


def _two_sided_chunk(A, B, C, D) -> np.ndarray:
    """Two-sided p-values of valid, non-degenerate tables (float arrays of one shape)."""
    K, n, N = A + B, A + C, A + B + C + D
    lo = np.maximum(0.0, n + K - N)
    hi = np.minimum(K, n)
    size = (hi - lo + 1).astype(np.int64)
    table = np.repeat(np.arange(A.size), size)
    starts = np.cumsum(size) - size
    x = lo[table] + (np.arange(table.size) - starts[table])
    logp, _ = hypergeom_logpmf(x, N[table], K[table], n[table])
    obs, _ = hypergeom_logpmf(A, N, K, n)
    threshold = obs + _TIE_RTOL * np.maximum(1.0, np.abs(obs))
    keep = logp <= threshold[table]
    pvalue = np.bincount(table, weights=np.where(keep, np.exp(logp), 0.0), minlength=A.size)
    # the observed table is (tied for) the most probable one: every table counts, p = 1 exactly
    mode_logp = np.full(A.size, -np.inf)
    np.maximum.at(mode_logp, table, logp)
    pvalue[obs >= mode_logp - _TIE_RTOL * np.maximum(1.0, np.abs(mode_logp))] = 1.0
    return np.minimum(pvalue, 1.0)


def fisher_two_sided_pvalues(a, b, c, d) -> np.ndarray:
    """Two-sided Fisher's exact p-values of tables ``[[a, b], [c, d]]``, elementwise.

    Same value as ``scipy.stats.fisher_exact([[a, b], [c, d]]).pvalue`` (alternative
    "two-sided", scipy >= 1.11) to ~1e-10 relative (see the module docstring).

    Args:
        a, b, c, d: integer arrays of one shape (counts; broadcast together).

    Returns:
        float64 array of p-values in [0, 1], same shape: 1.0 when a row or column sum is zero
        (as scipy); NaN for a table with a negative cell (scipy raises ``ValueError``).
    """
    out, idx, (A, B, C, D), shape = tables_to_test(a, b, c, d)
    if idx.size == 0:
        return out.reshape(shape)
    size = np.minimum(A + B, A + C) - np.maximum(0.0, (A + C) + (A + B) - (A + B + C + D)) + 1
    res = np.empty(idx.size)
    # chunks of tables whose supports add up to at most _CHUNK_POINTS (one huge table = one chunk)
    cum = np.cumsum(size)
    start = 0
    while start < idx.size:
        done = cum[start - 1] if start else 0.0
        stop = max(int(np.searchsorted(cum, done + _CHUNK_POINTS, side="right")), start + 1)
        res[start:stop] = _two_sided_chunk(A[start:stop], B[start:stop], C[start:stop], D[start:stop])
        start = stop
    out[idx] = res
    return out.reshape(shape)
