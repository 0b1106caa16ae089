"""Tests of `worker.evals.verdict.power`: the minimum detectable drop against its formulas and a
simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from worker.evals.verdict import power


def test_min_significant_count() -> None:
    assert power.min_significant_count(0.05) == 5  # 2**-5 = 0.031 <= 0.05 < 2**-4
    assert power.min_significant_count(0.0625) == 4
    assert power.min_significant_count(0.01) == 7
    with pytest.raises(ValueError, match="alpha"):
        power.min_significant_count(0)


def test_mdd_binary_solves_connors_formula() -> None:
    z_a, z_b = sps.norm.ppf(0.95), sps.norm.ppf(0.8)
    for n, r in ((100, 0.05), (500, 0.02), (2000, 0.1)):
        d = power.mdd_binary(n, r, 0.05)
        psi = 2 * r + d
        assert n == pytest.approx((z_a * math.sqrt(psi) + z_b * math.sqrt(psi - d * d)) ** 2
                                  / d ** 2, rel=1e-6)
        assert power.n_needed_binary(d, r, 0.05) in (n, n + 1)
    assert power.mdd_binary(20, 0.0, 0.05) >= 5 / 20  # the exact test needs 5 broken pairs
    assert power.mdd_binary(4, 0.0, 0.05) == math.inf
    assert power.mdd_binary(200, 0.0, 0.05) < power.mdd_binary(200, 0.1, 0.05)
    assert power.mdd_binary(200, 0.1, 0.05) < power.mdd_binary(100, 0.1, 0.05)


def test_mdd_continuous_is_the_normal_formula_with_efficiency_3_over_pi() -> None:
    d = power.mdd_continuous(100, 0.2, 0.05)
    expected = (sps.norm.ppf(0.95) + sps.norm.ppf(0.8)) * 0.2 / math.sqrt(100 * 3 / math.pi)
    assert d == pytest.approx(expected, rel=1e-12)
    assert power.n_needed_continuous(d, 0.2, 0.05) == 100
    assert power.mdd_continuous(4, 0.2, 0.05) == math.inf
    assert power.mdd_continuous(50, 0.0, 0.05) == 0.0
    with pytest.raises(ValueError, match="drop"):
        power.n_needed_continuous(0.0, 0.1, 0.05)
    with pytest.raises(ValueError, match="drop"):
        power.n_needed_binary(0.0, 0.1, 0.05)


def test_mdd_matches_simulated_power_of_mcnemar() -> None:
    """At n = 400 the drop `mdd_binary` names is caught about 80% of the time (simulated)."""
    rng = np.random.default_rng(9)
    n, r, alpha = 400, 0.05, 0.05
    d = power.mdd_binary(n, r, alpha)
    draws = rng.multinomial(n, [r + d, r, 1 - 2 * r - d], size=2000)
    p = sps.binom.sf(draws[:, 0] - 1, draws[:, 0] + draws[:, 1], 0.5)
    assert 0.74 <= float(np.mean(p <= alpha)) <= 0.86
