"""The group-sequential boundaries (worker/evals/verdict/sequential.py) against independent
computations: scipy's normal distribution for the spending functions, loops over every sign
pattern for the statistic, the boundaries and the level; and the look order of
worker/pipeline/sequential.py."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from worker.evals.types import CommandTarget, Config, GateOptions, GateRule, Settings, SuiteConfig
from worker.evals.verdict.sequential import (
    boundaries,
    family_p,
    look_sizes,
    predictive_failure,
    sequential_look,
    spent_alpha,
)
from worker.pipeline.sequential import _interleave, only_regression, scale_alpha


def test_spending_functions_match_lan_demets() -> None:
    z = sps.norm.isf(0.025)
    for t in (0.1, 0.25, 0.5, 0.75):
        assert spent_alpha(t, 0.05, "obrien_fleming") == pytest.approx(
            2 * sps.norm.sf(z / math.sqrt(t)), abs=1e-12)
        assert spent_alpha(t, 0.05, "pocock") == pytest.approx(
            0.05 * math.log(1 + (math.e - 1) * t), abs=1e-12)
    for spending in ("obrien_fleming", "pocock"):
        assert spent_alpha(1.0, 0.05, spending) == pytest.approx(0.05, abs=1e-12)  # type: ignore[arg-type]
        assert spent_alpha(0.0, 0.05, spending) == 0.0  # type: ignore[arg-type]
    assert spent_alpha(0.5, 0.05, "obrien_fleming") == pytest.approx(0.005574596, abs=1e-9)
    with pytest.raises(ValueError):
        spent_alpha(1.5, 0.05, "pocock")


def test_look_sizes() -> None:
    assert look_sizes(300, 4) == (75, 150, 225, 300)
    assert look_sizes(10, 3) == (3, 7, 10)
    with pytest.raises(ValueError):
        look_sizes(3, 4)


def all_signs(n: int) -> np.ndarray:
    """Every sign pattern of n examples, the observed (all +1) first."""
    return np.array([[1.0 - 2.0 * ((code >> i) & 1) for i in range(n)]
                     for code in range(1 << n)])


def brute_g(x: np.ndarray, scopes: np.ndarray, weights: np.ndarray,
            signs: np.ndarray) -> np.ndarray:
    """G of every pattern by loops: sign-flip p of each studentized drop over the same
    patterns (the report's marginal p-value), min q, rank."""
    tests = []
    for scope, share in zip(scopes, weights, strict=True):
        for j in range(x.shape[1]):
            if share[j] <= 0:
                continue
            part = [x[i, j] for i in range(x.shape[0]) if scope[i]]
            spread = math.sqrt(sum(v * v for v in part))
            ts = [-sum(s[i] * x[i, j] for i in range(x.shape[0]) if scope[i]) / spread
                  if spread > 0 else 0.0 for s in signs]
            tests.append([(sum(u >= t - 1e-9 * max(abs(t), 1) for u in ts) / len(ts)) / share[j]
                          for t in ts])
    smallest = [min(q[b] for q in tests) for b in range(len(signs))]
    return np.array([sum(m <= v + 1e-9 * max(v, 1) for m in smallest) / len(smallest)
                     for v in smallest])


def test_the_statistic_matches_loops_over_every_pattern() -> None:
    rng = np.random.default_rng(3)
    x = rng.choice([-1.0, 0.0, 1.0], size=(7, 2)) * rng.uniform(0.5, 2, size=(7, 2))
    scopes = np.array([[True] * 7, [True, False] * 3 + [True]])
    weights = np.array([[0.4, 0.3], [0.2, 0.1]])
    signs = all_signs(7)
    found, _ = family_p(x, scopes, weights, signs)
    assert np.max(np.abs(found - brute_g(x, scopes, weights, signs))) < 1e-9


def brute_boundaries(g: np.ndarray, spends: list[float]) -> list[float]:
    alive = [True] * g.shape[0]
    found = []
    for i, spend in enumerate(spends):
        best = 0.0
        for value in sorted(set(g[:, i].tolist())):
            crossing = sum(1 for b in range(g.shape[0]) if alive[b] and g[b, i] <= value)
            if crossing <= spend * g.shape[0] * (1 + 1e-12) and \
                    any(alive[b] and g[b, i] == value for b in range(g.shape[0])):
                best = max(best, value)
        found.append(best)
        alive = [alive[b] and not g[b, i] <= best for b in range(g.shape[0])]
    return found


def test_boundaries_match_loops() -> None:
    rng = np.random.default_rng(5)
    g = np.round(rng.random((400, 3)), 2)  # ties, as discrete p-values have
    spends = [0.01, 0.02, 0.02]
    assert np.max(np.abs(boundaries(g, np.array(spends)) -
                         np.array(brute_boundaries(g, spends)))) < 1e-9


def test_over_every_pattern_the_looks_together_reject_at_most_alpha() -> None:
    """Under no change the observed pattern is any of the 2**n with equal chance: the share of
    patterns that the looks reject, each treated as the observed one, is the false-alarm rate."""
    rng = np.random.default_rng(11)
    n, sizes, alpha = 10, (6, 8, 10), 0.2  # the first look holds 64 distinct patterns
    x = rng.choice([-1.0, 1.0], size=(n, 2)) * rng.uniform(0.5, 2, size=(n, 2))
    scopes = np.ones((1, n), dtype=bool)
    weights = np.array([[0.5, 0.5]])
    signs = all_signs(n)
    g = np.column_stack([family_p(x[:k], scopes[:, :k], weights, signs[:, :k])[0]
                         for k in sizes])
    spent = [spent_alpha(k / n, alpha, "pocock") for k in sizes]
    levels = boundaries(g, np.diff(np.array([0.0, *spent])))
    rejected = np.any(g <= levels[None, :], axis=1)
    assert rejected.mean() <= alpha + 1e-12
    assert rejected.mean() > alpha / 2  # and spends most of it


def test_a_clear_drop_fails_early_and_no_difference_passes_from_half_the_examples() -> None:
    n = 200
    sizes = look_sizes(n, 4)
    scopes = np.ones((1, n), dtype=bool)
    weights = np.array([[1.0]])
    drop = np.zeros((n, 1))
    drop[::4] = -1.0  # every fourth example breaks
    early = sequential_look(drop[:100], scopes[:, :100], weights, sizes, alpha=0.05, seed=1)
    assert (early.look, early.verdict) == (2, "fail")
    assert early.family_p <= early.level <= early.spent
    # field case (tester, issue 15): 8 of 120 broken, none among look 1's 30 examples, passed
    # at look 1 while the full run failed (p = 0.003906): no early pass before half the run
    first = sequential_look(np.zeros((50, 1)), scopes[:, :50], weights, sizes, alpha=0.05)
    assert (first.look, first.verdict, first.predictive) == (1, "continue", 0.0)
    same = sequential_look(np.zeros((100, 1)), scopes[:, :100], weights, sizes, alpha=0.05)
    assert (same.look, same.verdict, same.predictive) == (2, "pass", 0.0)
    with pytest.raises(ValueError):
        sequential_look(np.zeros((60, 1)), scopes[:, :60], weights, sizes, alpha=0.05)


def test_predictive_failure_grows_with_the_drop_seen() -> None:
    rng = np.random.default_rng(2)
    scopes = np.ones((1, 100), dtype=bool)
    weights = np.array([[1.0]])
    found = []
    for broken in (0, 5, 10, 20):
        x = np.where(rng.random((100, 1)) < 0.05, 1.0, 0.0)
        x[:broken] = -1.0
        found.append(predictive_failure(x, scopes, weights, 300, 0.01))
    assert found == sorted(found) and found[0] < 0.05 < found[-1]


def test_the_look_order_interleaves_suites_look_by_look() -> None:
    counts, looks = [5, 3], 2
    positions = [np.arange(5), np.arange(3)]
    placed = _interleave(positions, counts, looks)
    # look 1: suite a's first 2 (round(2.5) = 2), suite b's first 2; look 2: the rest.
    assert placed[0].tolist() == [0, 1, 4, 5, 6]
    assert placed[1].tolist() == [2, 3, 7]
    order = sorted(itertools.chain(*placed))
    assert order == list(range(8))


def rule_config(**rule: object) -> Config:
    gate = {"pass_rate": GateRule("pass_rate", regression_alpha=0.05, **rule)}  # type: ignore[arg-type]
    suite = SuiteConfig("s", "d.jsonl", CommandTarget("x"), (), gate,
                        gate_options=GateOptions())
    return Config(1, (suite,), Settings())


def test_only_regression_rules_may_pass_early_and_scaling_touches_alpha_only() -> None:
    assert only_regression(rule_config(primary=True, line=3))
    assert not only_regression(rule_config(min=0.5))
    assert not only_regression(rule_config(max_new_failures=0))
    scaled = scale_alpha(rule_config(min=0.5), 0.5).suites[0].gate["pass_rate"]
    assert (scaled.regression_alpha, scaled.min) == (0.025, 0.5)


def test_haybittle_peto_spends_a_fifth_of_alpha_before_the_last_look() -> None:
    for t in (0.1, 0.25, 0.5, 0.75, 0.999):
        assert spent_alpha(t, 0.05, "haybittle_peto") == pytest.approx(0.2 * 0.05 * t, abs=1e-15)
    assert spent_alpha(1.0, 0.05, "haybittle_peto") == 0.05
    assert spent_alpha(0.0, 0.05, "haybittle_peto") == 0.0
    # the interims of 4 looks together spend 0.0075 (O'Brien-Fleming: 0.0236)
    assert spent_alpha(0.75, 0.05, "haybittle_peto") < spent_alpha(0.75, 0.05, "obrien_fleming")
