"""Vectorised one-sided Fisher's exact test: fast at paper scale, equal to scipy's to ~1e-10.

BiasDora (seed 004, Section 3 and Appendix A.4) / docs/method.md#3-associations: for a descriptor d and a
word w of one (audit, modality, setting), the 2x2 table is ``[[a, b], [c, d]]`` with
a = tf(d, w), b = other words of d's document, c = occurrences of w in other documents,
d = all other words; the p-value is the one-sided (over-representation) Fisher's exact test,
``scipy.stats.fisher_exact(table, alternative="greater").pvalue`` =
P(X >= a) for X ~ Hypergeometric(N = a+b+c+d, K = a+b, n = a+c).

Why not call scipy per element: ``scipy.stats.hypergeom`` evaluates each probability with
Boost, which for populations below ~10^5 (a T2T setting at paper scale has ~77,000 words)
uses an exact prime-factorisation method costing ~0.4 ms per table; 250,000 tables then take
~100 s. Here (``benchmarks/bench_analytics_scale.py`` measures both):

1. the probability of one table, log P(X = x) = ln C(K, x) + ln C(N-K, n-x) - ln C(N, n), is
   computed from differences of log-gamma values, each difference evaluated stably with
   Stirling's series and ``log1p`` (:func:`lgamma_diff`), so no large log-gamma values are
   subtracted from each other: relative error ~1e-12 in the probability (against exact
   arithmetic, mpmath); scipy itself is off by up to ~2e-10 for populations over ~10^5
   (Boost's Lanczos path), which bounds the difference between the two;
2. the tail is summed with the exact term ratio
   P(x+1)/P(x) = (K-x)(n-x) / ((x+1)(N-K-n+x+1)): when a is above the mean K n / N, the upper
   tail P(X >= a) directly (terms fall geometrically); otherwise 1 - P(X <= a-1), the lower
   tail being at most ~0.6 there so the subtraction loses nothing. Terms are made a block of
   8 at a time for all tables still summing (a cumulative product of the ratios along the
   block: one vectorised step per 8 terms, not one per term), and a table stops when its
   block's last term is below 1e-17 of the running sum or the support ends.

At paper scale (1.2M tables, ``benchmarks/bench_analytics_scale.py``) this costs ~0.5 us per
table, against ~40 us for the vectorised ``scipy.stats.hypergeom.sf`` and ~340 us for one
``scipy.stats.fisher_exact`` call. ``scipy.stats`` is imported only when a table needs it (it
takes ~0.5 s to import, paid by every dbt process that loads the UDF plugin otherwise).

Tables of at most 170 words in all use scipy as is (Boost's exact factorial tables: cheap and
bit-identical). Tables where the log-gamma differences are too large for the accuracy above
(documents of over ~10^5 words in a tiny corpus) fall back to scipy for their first term. ``tests/test_fisher.py``
checks equality with ``scipy.stats.fisher_exact`` to 1e-9 relative (docs/method.md) on thousands of
tables in every regime, and accuracy to 1e-11 against exact arithmetic.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["fisher_greater_pvalues", "hypergeom_logpmf", "lgamma_diff"]

_STIRLING_MIN = 10.0
#: log-probabilities whose pieces exceed this magnitude use scipy (error ~4e-16 x magnitude)
_MAX_STABLE_MAGNITUDE = 2.5e5
_TAIL_RTOL = 1e-17
#: tail terms per vectorised step (paper scale: a tail needs ~9 terms at the median, 16 at p90, ~110 at most)
_TAIL_BLOCK = 8
#: up to this population scipy (Boost) uses exact factorial tables: cheap, so it is used as is
_SCIPY_MAX_N = 170


def _stirling_correction(z: np.ndarray) -> np.ndarray:
    """lnGamma(z) - [(z - 1/2) ln z - z + ln(2 pi)/2] for z >= 10 (error < 2e-14)."""
    z2 = z * z
    return (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * z2)) / z2) / z2) / z


def _stirling_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """lnGamma(a) - lnGamma(b) for a, b >= 10 by Stirling's series (see :func:`lgamma_diff`)."""
    d = a - b
    return (b - 0.5) * np.log1p(d / b) + d * (np.log(a) - 1.0) + _stirling_correction(a) - _stirling_correction(b)


def lgamma_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ln Gamma(a) - ln Gamma(b), elementwise, for a, b >= 1, without cancellation.

    With d = a - b: (b - 1/2) log1p(d / b) + d (ln a - 1) + corr(a) - corr(b) (Stirling), whose
    terms have the size of the result; ``scipy.special.gammaln`` where min(a, b) < 10.

    Args:
        a, b: float arrays of the same shape (>= 1).

    Returns:
        float64 array of the same shape.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    big = (a >= _STIRLING_MIN) & (b >= _STIRLING_MIN)
    if big.all():  # the usual case: no masking needed
        return _stirling_diff(a, b)
    out = np.empty(np.broadcast(a, b).shape)
    if big.any():
        out[big] = _stirling_diff(a[big], b[big])
    small = ~big
    if small.any():
        as_, bs = a[small], b[small]
        # move the large argument onto the Stirling path: lnG(a) - lnG(b) = [lnG(a) - lnG(10)] + [lnG(10) - lnG(b)]
        ten = np.full(as_.shape, _STIRLING_MIN)
        val = special.gammaln(as_) - special.gammaln(bs)
        a_big, b_big = as_ >= _STIRLING_MIN, bs >= _STIRLING_MIN
        if a_big.any():
            val[a_big] = lgamma_diff(as_[a_big], ten[a_big]) + special.gammaln(_STIRLING_MIN) - special.gammaln(bs[a_big])
        if b_big.any():
            val[b_big] = special.gammaln(as_[b_big]) - special.gammaln(_STIRLING_MIN) - lgamma_diff(bs[b_big], ten[b_big])
        out[small] = val
    return out


def hypergeom_logpmf(x, N, K, n) -> tuple[np.ndarray, np.ndarray]:
    """ln P(X = x) for X ~ Hypergeometric(population N, K successes, n draws), elementwise.

    Returns:
        (log-probability, magnitude): the magnitude (sum of the absolute pieces) bounds the
        absolute error at ~4e-16 x magnitude.
    """
    x, N, K, n = (np.asarray(v, dtype=np.float64) for v in (x, N, K, n))
    lg_k = special.gammaln(K + 1)
    c_kx = lg_k - special.gammaln(x + 1) - special.gammaln(K - x + 1)
    d1 = lgamma_diff(N - K + 1, N + 1)
    d2 = lgamma_diff(N - n + 1, N - K - n + x + 1)
    d3 = lgamma_diff(n + 1, n - x + 1)
    magnitude = np.abs(lg_k) + np.abs(d1) + np.abs(d2) + np.abs(d3)
    return c_kx + d1 + d2 + d3, magnitude


def _first_terms(x, N, K, n) -> np.ndarray:
    logp, magnitude = hypergeom_logpmf(x, N, K, n)
    p = np.exp(logp)
    unstable = magnitude > _MAX_STABLE_MAGNITUDE
    if unstable.any():
        from scipy import stats  # rare fallback; scipy.stats costs ~0.5 s to import

        p[unstable] = stats.hypergeom.pmf(x[unstable], N[unstable], K[unstable], n[unstable])
    return p


def _tail_sum(x, first, K, n, N, bound, upward: bool) -> np.ndarray:
    """Sum of P(X = j) from j = x towards ``bound`` (up when ``upward``, else down), given P(X = x).

    Terms follow from the first by the exact ratios P(j+1)/P(j) = (K-j)(n-j) / ((j+1)(N-K-n+j+1))
    (upward) and P(j-1)/P(j) = j (N-K-n+j) / ((K-j+1)(n-j+1)) (downward). They are computed
    ``_TAIL_BLOCK`` at a time for every table still summing (a cumulative product of the ratios
    along a block), so a tail of t terms costs ceil(t / _TAIL_BLOCK) vectorised steps instead of
    t. A table stops when the bound is reached or the block's last term is below
    ``_TAIL_RTOL`` of its running sum (terms past the mode only fall, so the rest is
    negligible). A block may run past the support: the ratio leaving it is exactly 0 (the
    factor K-j or n-j is 0 at j = min(K, n); j or N-K-n+j is 0 at j = max(0, n+K-N)), the
    denominators stay >= 1, so every later term of the cumulative product is 0.
    """
    total = first.copy()
    term = first.copy()
    j = x.copy()
    steps = np.arange(_TAIL_BLOCK, dtype=np.float64)
    active = np.nonzero(((j < bound) if upward else (j > bound)) & (first > 0))[0]
    while active.size:
        Ka, na, Na = K[active, None], n[active, None], N[active, None]
        if upward:
            js = j[active, None] + steps  # the term index each ratio starts from
            ratio = (Ka - js) * (na - js) / ((js + 1.0) * (Na - Ka - na + js + 1.0))
        else:
            js = j[active, None] - steps
            ratio = js * (Na - Ka - na + js) / ((Ka - js + 1.0) * (na - js + 1.0))
        terms = term[active, None] * np.cumprod(ratio, axis=1)
        total[active] += terms.sum(axis=1)
        last = terms[:, -1]
        term[active] = last
        j[active] = j[active] + _TAIL_BLOCK if upward else j[active] - _TAIL_BLOCK
        more = (j[active] < bound[active]) if upward else (j[active] > bound[active])
        active = active[more & (last > _TAIL_RTOL * total[active])]
    return total


def tables_to_test(a, b, c, d):
    """The 2x2 tables ``[[a, b], [c, d]]`` of a vectorised Fisher test, sorted into those with a
    p-value fixed by their shape and those left to compute (both one- and two-sided tests).

    Args:
        a, b, c, d: integer counts, broadcast to one shape.

    Returns:
        ``(out, idx, (A, B, C, D), shape)``: ``out`` the flat float64 p-values, NaN for a table
        with a negative cell (scipy raises ``ValueError``) and 1.0 for a table with a zero row
        or column sum (as scipy); ``idx`` the flat positions still to compute; ``A..D`` their
        counts as float64; ``shape`` the broadcast shape to give the result back.
    """
    a, b, c, d = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in (a, b, c, d)))
    shape = a.shape
    a, b, c, d = (v.ravel() for v in (a, b, c, d))
    out = np.full(a.shape, np.nan, dtype=np.float64)
    valid = (a >= 0) & (b >= 0) & (c >= 0) & (d >= 0)
    degenerate = valid & (((a + b) == 0) | ((c + d) == 0) | ((a + c) == 0) | ((b + d) == 0))
    out[degenerate] = 1.0
    idx = np.nonzero(valid & ~degenerate)[0]
    return out, idx, tuple(v[idx].astype(np.float64) for v in (a, b, c, d)), shape


def fisher_greater_pvalues(a, b, c, d) -> np.ndarray:
    """One-sided ("greater") Fisher's exact p-values of tables ``[[a, b], [c, d]]``, elementwise.

    Same value as ``scipy.stats.fisher_exact([[a, b], [c, d]], alternative="greater").pvalue``
    (to ~1e-10 relative; see the module docstring for the method): 1.0 when a row or column
    sum is zero, capped at 1.0; NaN for a table with a negative cell (scipy raises).

    Args:
        a, b, c, d: integer arrays of one shape (counts).

    Returns:
        float64 array of p-values, same shape.
    """
    out, idx, (A, B, C, D), shape = tables_to_test(a, b, c, d)
    if idx.size == 0:
        return out.reshape(shape)
    K, n, N = A + B, A + C, A + B + C + D
    lo, hi = np.maximum(0.0, n + K - N), np.minimum(K, n)
    res = np.empty(idx.size)
    # tiny tables (N <= 170): scipy's own form, exact factorial tables and fast, bit-identical
    tiny = N <= _SCIPY_MAX_N
    if tiny.any():
        from scipy import stats  # imported on first use: ~0.5 s, not paid by paper-scale tables

        res[tiny] = np.minimum(stats.hypergeom.cdf(B[tiny], N[tiny], K[tiny], B[tiny] + D[tiny]), 1.0)
    upper = ~tiny & (A * N > K * n)  # a above the mean K n / N: sum the upper tail

    u = np.nonzero(upper)[0]
    if u.size:
        x, Ku, nu, Nu = A[u], K[u], n[u], N[u]
        res[u] = np.minimum(_tail_sum(x, _first_terms(x, Nu, Ku, nu), Ku, nu, Nu, hi[u], upward=True), 1.0)

    low = np.nonzero(~tiny & ~upper)[0]
    if low.size:
        x, Kl, nl, Nl, ll = A[low] - 1.0, K[low], n[low], N[low], lo[low]
        term = np.zeros(low.size)
        inside = x >= ll
        if inside.any():
            term[inside] = _first_terms(x[inside], Nl[inside], Kl[inside], nl[inside])
        res[low] = np.clip(1.0 - _tail_sum(x, term, Kl, nl, Nl, ll, upward=False), 0.0, 1.0)

    out[idx] = res
    return out.reshape(shape)
