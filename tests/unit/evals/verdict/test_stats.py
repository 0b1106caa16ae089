"""Tests of `worker.evals.verdict.stats` against scipy references and slow reference
implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from worker.evals.verdict import stats


def bools(text: str) -> np.ndarray:
    return np.array([c == "1" for c in text], dtype=bool)


# --- McNemar -------------------------------------------------------------------------------

@pytest.mark.parametrize(("base", "head", "fixed", "broken"), [
    ("1111111111", "1111111111", 0, 0),        # all pass, no discordant pair
    ("0000000000", "0000000000", 0, 0),        # all fail
    ("1111100000", "0000000000", 0, 5),        # five broken, none fixed
    ("1111111000", "0001111111", 3, 3),        # balanced flips
    ("1111111100", "0000011111", 2, 5),
    ("1", "0", 0, 1),                          # n = 1
    ("", "", 0, 0),                            # n = 0
])
def test_mcnemar_counts_and_p_match_scipy_binomtest(base: str, head: str, fixed: int,
                                                    broken: int) -> None:
    result = stats.mcnemar_drop(bools(base), bools(head))
    assert (result.fixed, result.broken) == (fixed, broken)
    if fixed + broken == 0:
        assert result.p_value == 1.0  # no discordant pair: no division by zero, no evidence
    else:
        reference = sps.binomtest(broken, fixed + broken, 0.5, alternative="greater").pvalue
        assert result.p_value == pytest.approx(reference, rel=1e-12)


def test_mcnemar_exact_values() -> None:
    assert stats.mcnemar_p(5, 0) == 0.03125  # 2 ** -5
    assert stats.mcnemar_p(3, 3) == pytest.approx(0.65625)  # P(X >= 3), X ~ Bin(6, 1/2)
    assert stats.mcnemar_p(0, 4) == 1.0
    assert stats.mcnemar_p(0, 0) == 1.0


def test_mcnemar_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="same shape"):
        stats.mcnemar_drop(bools("10"), bools("1"))
    with pytest.raises(ValueError, match=">= 0"):
        stats.mcnemar_p(-1, 2)


# --- Wilcoxon signed-rank ------------------------------------------------------------------

@pytest.mark.parametrize("differences", [
    [-0.3, -0.1, -0.2, 0.05, -0.4, -0.25, 0.1, -0.15],            # no ties: exact
    [-1.0, -1.0, 0.5, -0.5, 0.0, 0.0, -1.0, 0.5, -0.5, -1.0],      # ties and zeros
    list(np.round(np.random.default_rng(3).normal(-0.1, 0.3, 80), 1)),  # ties, n > 50
    [-0.5],                                                          # n = 1
])
def test_signed_rank_matches_scipy(differences: list[float]) -> None:
    d = np.array(differences)
    result = stats.signed_rank_drop(d)
    reference = sps.wilcoxon(d, zero_method="wilcox", alternative="less")
    assert result.p_value == pytest.approx(float(reference.pvalue), rel=1e-12)
    assert result.statistic == float(reference.statistic)
    assert result.n_zero == int(np.sum(d == 0))
    assert result.n_nonzero == int(np.sum(d != 0))


def test_signed_rank_all_zero_and_empty_are_no_change() -> None:
    zero = stats.signed_rank_drop(np.zeros(20))
    assert (zero.p_value, zero.n_zero, zero.n_nonzero, zero.statistic) == (1.0, 20, 0, None)
    empty = stats.signed_rank_drop(np.zeros(0))
    assert (empty.p_value, empty.n_zero) == (1.0, 0)


def test_signed_rank_15_up_15_down_40_tied_is_not_a_regression() -> None:
    d = np.array([1.0] * 15 + [-1.0] * 15 + [0.0] * 40)
    result = stats.signed_rank_drop(d)
    reference = sps.wilcoxon(d, zero_method="wilcox", alternative="less").pvalue
    assert result.p_value == pytest.approx(float(reference), rel=1e-12)
    assert result.p_value == pytest.approx(0.5)
    assert (result.n_zero, result.n_nonzero) == (40, 30)
    assert stats.ZERO_METHOD == "wilcox"


def test_signed_rank_refuses_nan() -> None:
    with pytest.raises(ValueError, match="finite"):
        stats.signed_rank_drop(np.array([0.1, np.nan]))


# --- Bootstrap -----------------------------------------------------------------------------

def slow_bootstrap(d: np.ndarray, strata: np.ndarray, resamples: int,
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Resample in a Python loop with the same documented draws, averaging index by index."""
    rng = np.random.default_rng(seed)
    count = int(strata.max()) + 1
    draws = []
    for code in range(count):
        rows = np.flatnonzero(strata == code)
        size = stats.block_size(rows.size, resamples)
        blocks = [rng.integers(0, rows.size, size=(min(size, resamples - s), rows.size),
                               dtype=np.uint16) for s in range(0, resamples, size)]
        draws.append((rows, np.concatenate(blocks)))
    m = d.shape[1]
    overall = np.full((resamples, m), np.nan)
    per = np.full((count, resamples, m), np.nan)
    for b in range(resamples):
        for j in range(m):
            pooled: list[float] = []
            for code, (rows, idx) in enumerate(draws):
                picked = [d[rows[i], j] for i in idx[b] if not math.isnan(d[rows[i], j])]
                if picked:
                    per[code, b, j] = sum(picked) / len(picked)
                pooled += picked
            if pooled:
                overall[b, j] = sum(pooled) / len(pooled)
    return overall, per


def test_bootstrap_equals_a_slow_loop_with_the_same_seed() -> None:
    rng = np.random.default_rng(11)
    d = rng.normal(size=(23, 3))
    d[[2, 5, 17], 1] = np.nan
    d[:, 2] = np.nan
    d[4, 2] = 0.5  # a metric only one example has
    strata = np.array([0] * 10 + [1] * 13, dtype=np.intp)
    fast = stats.bootstrap_means(d, strata, resamples=300, seed=7)
    slow = slow_bootstrap(d, strata, 300, 7)
    np.testing.assert_allclose(fast[0], slow[0], rtol=1e-12, atol=1e-14, equal_nan=True)
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-12, atol=1e-14, equal_nan=True)


def test_bootstrap_is_seeded_and_its_interval_matches_numpy_percentiles() -> None:
    d = np.linspace(-1, 0.6, 40)[:, None]
    zero = np.zeros(40, dtype=np.intp)
    first = stats.bootstrap_means(d, zero, resamples=500, seed=3)[0]
    again = stats.bootstrap_means(d, zero, resamples=500, seed=3)[0]
    other = stats.bootstrap_means(d, zero, resamples=500, seed=4)[0]
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    interval = stats.percentile_interval(first)
    assert interval.shape == (1, 2)
    np.testing.assert_allclose(interval[0], np.percentile(first[:, 0], [2.5, 97.5]))
    assert interval[0, 0] < d.mean() < interval[0, 1]


def test_bootstrap_of_identical_runs_is_zero_width_and_handles_n0() -> None:
    overall, _ = stats.bootstrap_means(np.zeros((20, 2)), np.zeros(20, dtype=np.intp),
                                       resamples=50, seed=1)
    assert np.array_equal(stats.percentile_interval(overall), np.zeros((2, 2)))
    empty, per = stats.bootstrap_means(np.zeros((0, 2)), np.zeros(0, dtype=np.intp),
                                       resamples=50, seed=1)
    assert np.all(np.isnan(empty)) and per.shape == (0, 50, 2)
    assert np.all(np.isnan(stats.percentile_interval(empty)))


def test_bootstrap_refuses_bad_strata() -> None:
    with pytest.raises(ValueError, match="strata"):
        stats.bootstrap_means(np.zeros((3, 1)), np.array([0, -1, 0], dtype=np.intp))
    with pytest.raises(ValueError, match="resamples"):
        stats.bootstrap_means(np.zeros((3, 1)), np.zeros(3, dtype=np.intp), resamples=0)


# --- Holm ----------------------------------------------------------------------------------

def test_holm_exact_values() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> cummax
    np.testing.assert_allclose(stats.holm_adjust(p), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(stats.holm_adjust(np.array([0.5, 0.9])), [1.0, 1.0])
    nan = stats.holm_adjust(np.array([np.nan, 0.02, 0.01]))
    assert math.isnan(nan[0])
    np.testing.assert_allclose(nan[1:], [0.02, 0.02])
    assert stats.holm_adjust(np.array([])).shape == (0,)


def holm_rejects(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's (1979) step-down procedure as defined: stop at the first p_(i) > alpha/(m-i+1)."""
    order = np.argsort(p, kind="stable")
    reject = np.zeros(p.size, dtype=bool)
    for rank, index in enumerate(order):
        if p[index] > alpha / (p.size - rank):
            break
        reject[index] = True
    return reject


def test_holm_adjusted_values_reject_exactly_as_the_step_down_procedure() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        p = rng.beta(0.4, 1.5, size=int(rng.integers(1, 30)))
        for alpha in (0.01, 0.05, 0.1):
            assert np.array_equal(stats.holm_adjust(p) <= alpha, holm_rejects(p, alpha))


# --- Noise from repeats --------------------------------------------------------------------

def test_repeat_noise() -> None:
    scores = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0.2, 0.4, np.nan], [0.5, np.nan,
                                                                             np.nan]])
    noise = stats.repeat_noise(scores)
    variances = [0.0, np.var([1, 0, 1], ddof=1), np.var([0.2, 0.4], ddof=1)]
    assert noise.repeats == 3
    assert noise.sd == pytest.approx(math.sqrt(np.mean(variances)))
    assert noise.flip_rate == pytest.approx(2 / 3)
    single = stats.repeat_noise(np.array([[1.0], [0.0]]))
    assert math.isnan(single.sd) and single.flip_rate == 0.0 and single.repeats == 1
