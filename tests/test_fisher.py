"""The vectorised Fisher's exact test (analytics/fisher.py) equals scipy's, in every regime.

docs/method.md#3-associations: the association p-value "must equal scipy.stats.fisher_exact(...,
alternative="greater") to 1e-9 relative". Checked on every table with cells 0..8, on random
tables of the T2T regime (N < 10^5, where scipy is slow), the I2T regime (N up to 8 x 10^5)
and at the edges (tiny p, p near 1, the support bounds, degenerate and invalid tables).
"""

import itertools

import numpy as np
import pytest
from scipy import stats

from analytics.fisher import fisher_greater_pvalues, hypergeom_logpmf, lgamma_diff


def _scipy(a, b, c, d):
    return np.array([stats.fisher_exact([[w, x], [y, z]], alternative="greater").pvalue for w, x, y, z in zip(a, b, c, d, strict=True)])


def _rel(got, want):
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    rel[got == want] = 0.0
    return rel


def _random_tables(rng, m, k_max, n_max, extra_max):
    K = rng.integers(1, k_max, m)
    n = rng.integers(1, n_max, m)
    N = K + n + rng.integers(0, extra_max, m)
    lo, hi = np.maximum(0, n + K - N), np.minimum(K, n)
    uniform = lo + (rng.random(m) * (hi - lo + 1)).astype(np.int64)
    over = np.clip((K * n / N).astype(np.int64) + rng.integers(0, 20, m), lo, hi)  # over-represented
    x = np.where(rng.random(m) < 0.5, uniform, over)
    return x, K - x, n - x, N - K - n + x


def test_every_small_table_matches_scipy():
    a, b, c, d = (np.array(v) for v in zip(*itertools.product(range(9), repeat=4), strict=True))
    assert np.all(_rel(fisher_greater_pvalues(a, b, c, d), _scipy(a, b, c, d)) <= 1e-12)


@pytest.mark.parametrize(
    "regime,k_max,n_max,extra_max",
    [("t2t", 300, 3000, 100_000), ("i2t", 2000, 30_000, 800_000), ("mid", 200, 200, 2_000)],
)
def test_random_tables_match_scipy(regime, k_max, n_max, extra_max):
    rng = np.random.default_rng(6)
    a, b, c, d = _random_tables(rng, 1500, k_max, n_max, extra_max)
    got = fisher_greater_pvalues(a, b, c, d)
    want = _scipy(a, b, c, d)
    assert np.all(_rel(got, want) <= 1e-9), regime
    assert (want < 1e-20).any() and (want > 0.5).any()  # both tails were exercised


def test_edges_degenerate_and_invalid_tables():
    tables = [
        (0, 0, 0, 0),
        (0, 0, 1, 1),
        (1, 0, 0, 0),
        (0, 5, 0, 7),
        (3, 0, 4, 0),
        (5, 0, 0, 5),
        (1, 0, 1, 104_000),
        (40, 0, 0, 500_000),
        (0, 300, 5_000, 70_000),
        (300, 0, 2_000, 70_000),
        (150, 50, 0, 90_000),
        (1, 189, 0, 76_000),
        (12, 178, 4, 76_000),
    ]
    a, b, c, d = (np.array(v) for v in zip(*tables, strict=True))
    assert np.all(_rel(fisher_greater_pvalues(a, b, c, d), _scipy(a, b, c, d)) <= 1e-9)
    assert np.isnan(fisher_greater_pvalues(-1, 2, 3, 4))
    grid = fisher_greater_pvalues(np.array([[1, 2], [3, 4]]), 5, 6, 7)
    assert grid.shape == (2, 2) and np.allclose(grid, _scipy([1, 2, 3, 4], [5] * 4, [6] * 4, [7] * 4).reshape(2, 2))


def test_accurate_to_1e11_against_exact_arithmetic():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for a, b, c, d in [(6, 288, 8036, 604_825), (65, 2213, 18_335, 688_193), (13, 276, 6, 24_384), (3, 187, 40, 76_000)]:
        K, n, N = a + b, a + c, a + b + c + d
        exact = sum(mpmath.binomial(K, x) * mpmath.binomial(N - K, n - x) for x in range(a, min(K, n) + 1)) / mpmath.binomial(N, n)
        assert abs(float(fisher_greater_pvalues(a, b, c, d)) - float(exact)) <= 1e-11 * float(exact)


def test_log_gamma_differences_and_log_pmf():
    from scipy import special

    a = np.array([1.0, 5.0, 12.0, 1e3, 5e5, 5e5, 11.0])
    b = np.array([3.0, 9.5, 10.0, 2e3, 4.99e5, 20.0, 500_000.0])
    assert np.allclose(lgamma_diff(a, b), special.gammaln(a) - special.gammaln(b), rtol=1e-9, atol=1e-8)
    logp, magnitude = hypergeom_logpmf(np.array([3.0]), np.array([77_000.0]), np.array([190.0]), np.array([40.0]))
    assert np.isclose(logp[0], stats.hypergeom.logpmf(3, 77_000, 190, 40), rtol=1e-12) and magnitude[0] > 0


def test_tails_across_block_boundaries_and_support_ends():
    """Tails summed 8 terms per vectorised step (analytics/fisher.py): tails of 1 to
    ~200 terms, ending exactly at a block edge or inside one, and both support ends (the
    upper bound min(K, n) and the lower bound max(0, n + K - N)) reached mid-block."""
    tables = []
    for k in range(1, 40):  # upper tail ends at min(K, n) = hi after k - 1 more terms
        K, n, N = 200 + k, 40 + k, 1_000 + 10 * k
        x = n - (k - 1)
        tables.append((x, K - x, n - x, N - K - n + x))
    for k in range(1, 40):  # lower tail (a below the mean) runs down to max(0, n + K - N)
        K, n, N = 600 + 3 * k, 500 + 2 * k, 1_050 + k
        lo = n + K - N
        x = lo + k
        tables.append((x, K - x, n - x, N - K - n + x))
    rng = np.random.default_rng(16)
    for _ in range(300):  # long upper tails: big K and n in a mid-size population
        K, n = int(rng.integers(2_000, 20_000)), int(rng.integers(2_000, 20_000))
        N = K + n + int(rng.integers(0, 200_000))
        mean = K * n / N
        x = int(min(min(K, n), mean + rng.integers(1, 60)))
        tables.append((x, K - x, n - x, N - K - n + x))
    a, b, c, d = (np.array(v) for v in zip(*tables, strict=True))
    assert (d >= 0).all() and (b >= 0).all() and (c >= 0).all()
    assert np.all(_rel(fisher_greater_pvalues(a, b, c, d), _scipy(a, b, c, d)) <= 1e-9)


def test_plugin_import_does_not_load_scipy_stats():
    """Loading the UDF plugin (done at every dbt start) must not import scipy.stats (~0.5 s)."""
    import subprocess
    import sys

    code = "import sys, analytics.duckdb_plugin; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
