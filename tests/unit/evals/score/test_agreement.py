"""Judge-versus-human statistics match scikit-learn's and scipy's to 1e-9."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from worker.evals.score import agreement

sklearn_metrics = pytest.importorskip("sklearn.metrics")  # a test dependency only

SCALE = [1, 2, 3, 4, 5]


def _pairs(seed: int, n: int, categories: list[int]) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    human = [rng.choice(categories) for _ in range(n)]
    judge = [h if rng.random() < 0.6 else rng.choice(categories) for h in human]
    return human, judge


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_scikit_learn(seed: int, weights: agreement.Weights | None) -> None:
    human, judge = _pairs(seed, 40, SCALE)
    ours = agreement.kappa(human, judge, SCALE, weights)
    theirs = sklearn_metrics.cohen_kappa_score(human, judge, labels=SCALE, weights=weights)
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_binary_kappa_and_confusion_match_scikit_learn() -> None:
    human, judge = _pairs(11, 30, [0, 1])
    assert agreement.kappa(human, judge, [0, 1]) == pytest.approx(
        sklearn_metrics.cohen_kappa_score(human, judge), abs=1e-9)
    assert agreement.confusion(human, judge, [0, 1]) == \
        sklearn_metrics.confusion_matrix(human, judge, labels=[0, 1]).tolist()
    assert agreement.agreement(human, judge) == pytest.approx(
        sklearn_metrics.accuracy_score(human, judge), abs=1e-9)


def test_hand_computed_table() -> None:
    """Cohen's (1960) kind of table: 20 pass/pass, 5 pass/fail, 10 fail/pass, 15 fail/fail."""
    human = [1] * 25 + [0] * 25
    judge = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2 / 0.5
    assert agreement.kappa(human, judge, [0, 1]) == pytest.approx(0.4, abs=1e-12)
    assert agreement.agreement(human, judge) == pytest.approx(0.7, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_correlations_and_mae_match_scipy(seed: int) -> None:
    human, judge = _pairs(seed, 25, SCALE)
    assert agreement.pearson(human, judge) == pytest.approx(
        stats.pearsonr(human, judge).statistic, abs=1e-9)
    assert agreement.spearman(human, judge) == pytest.approx(
        stats.spearmanr(human, judge).statistic, abs=1e-9)
    assert agreement.mae(human, judge) == pytest.approx(
        sklearn_metrics.mean_absolute_error(human, judge), abs=1e-9)


def test_degenerate_inputs() -> None:
    assert agreement.kappa([1, 1], [1, 1], [0, 1]) == 1.0
    assert math.isnan(agreement.kappa([], [], [0, 1]))
    assert math.isnan(agreement.pearson([3, 3, 3], [1, 2, 3]))
    assert math.isnan(agreement.agreement([], []))


def test_bootstrap_interval_is_seeded_and_covers_the_value() -> None:
    human, judge = _pairs(3, 60, [0, 1])
    first = agreement.bootstrap(human, judge, agreement.agreement)
    again = agreement.bootstrap(human, judge, agreement.agreement)
    assert first == again
    assert first.low < first.value < first.high
    assert first.low >= 0.0 and first.high <= 1.0
    one = agreement.bootstrap([1], [1], agreement.agreement)
    assert one.value == 1.0 and math.isnan(one.low)
