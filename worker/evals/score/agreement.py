"""How well a judge agrees with people: agreement, Cohen's kappa, MAE, correlations (pure).

Inputs are paired ratings of the same items, human first, judge second, as integers on one
scale: 0 (fail) and 1 (pass), or 1-5. Formulas:

- agreement: the share of items rated alike, fraction 0-1.
- Cohen's kappa: (p_o - p_e) / (1 - p_e), p_e from the two raters' marginal frequencies
  (Cohen 1960, "A coefficient of agreement for nominal scales"); weighted kappa: 1 - sum(w * O)
  / sum(w * E) with O the observed and E the chance-expected confusion matrix and w the
  disagreement weights |i - j| (``linear``) or (i - j)^2 (``quadratic``) over the scale's
  categories (Cohen 1968, "Weighted kappa"). Both raters always agreeing on one category
  gives 1.0 (perfect agreement; the formula's 0/0).
- MAE: the mean absolute difference, in scale points.
- Pearson's r and Spearman's rho: scipy.stats.pearsonr / spearmanr; NaN when a side is constant.
- Intervals: 95% percentile bootstrap over items (Efron and Tibshirani 1993, ch. 13), seeded,
  `BOOTSTRAP_RESAMPLES` draws; resamples where the statistic is undefined are left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Weights = Literal["linear", "quadratic"]
#: Bootstrap resamples per interval, and the seed that makes reports repeat exactly.
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 17
#: Two-sided level of the intervals.
CONFIDENCE = 0.95

Ratings = Sequence[int]


def agreement(human: Ratings, judge: Ratings) -> float:
    """Share of items the judge rated as the human did, fraction 0-1 (NaN without items)."""
    if not human:
        return math.nan
    return sum(h == j for h, j in zip(human, judge, strict=True)) / len(human)


def confusion(human: Ratings, judge: Ratings, categories: Sequence[int]) -> list[list[int]]:
    """Return the confusion matrix: row = human's category, column = judge's, counts."""
    index = {c: i for i, c in enumerate(categories)}
    matrix = [[0] * len(categories) for _ in categories]
    for h, j in zip(human, judge, strict=True):
        matrix[index[h]][index[j]] += 1
    return matrix


def kappa(human: Ratings, judge: Ratings, categories: Sequence[int],
          weights: Weights | None = None) -> float:
    """Cohen's kappa, unweighted or weighted (formulas in the module doc), in [-1, 1].

    Args:
        human, judge: paired ratings; every value is one of ``categories``.
        categories: the scale's categories in order (their distance weighs disagreements).
        weights: None (unweighted), ``linear`` or ``quadratic``.

    Returns:
        Kappa; NaN without items.

    Raises:
        KeyError: a rating outside ``categories``.
    """
    if not human:
        return math.nan
    observed = np.asarray(confusion(human, judge, categories), dtype=float)
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    k = len(categories)
    distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
    w = (distance > 0).astype(float) if weights is None else \
        distance if weights == "linear" else distance ** 2
    chance = float((w * expected).sum())
    if chance == 0.0:
        return 1.0  # both always gave one same category: nothing to disagree on
    return 1.0 - float((w * observed).sum()) / chance


def mae(human: Ratings, judge: Ratings) -> float:
    """Mean absolute difference of the ratings, in scale points (NaN without items)."""
    if not human:
        return math.nan
    return sum(abs(h - j) for h, j in zip(human, judge, strict=True)) / len(human)


def pearson(human: Ratings, judge: Ratings) -> float:
    """Pearson's r (scipy.stats.pearsonr); NaN with under 2 items or a constant side."""
    from scipy import stats  # ~60 MB and ~1 s of import: only when used
    if len(human) < 2 or len(set(human)) < 2 or len(set(judge)) < 2:
        return math.nan
    return float(stats.pearsonr(human, judge).statistic)


def spearman(human: Ratings, judge: Ratings) -> float:
    """Spearman's rho (scipy.stats.spearmanr, ties averaged); NaN as `pearson`."""
    from scipy import stats  # ~60 MB and ~1 s of import: only when used
    if len(human) < 2 or len(set(human)) < 2 or len(set(judge)) < 2:
        return math.nan
    return float(stats.spearmanr(human, judge).statistic)


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap interval (NaN bounds when it cannot be resampled)."""

    value: float
    low: float
    high: float


Statistic = Callable[[Ratings, Ratings], float]


def bootstrap(human: Ratings, judge: Ratings, statistic: Statistic,
              resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Estimate:
    """Return ``statistic`` on the items and its 95% percentile bootstrap interval.

    Items are resampled in pairs with replacement (numpy's seeded PCG64), so the interval
    repeats exactly for a seed.
    """
    value = statistic(human, judge)
    n = len(human)
    if n < 2:
        return Estimate(value, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    h, j = np.asarray(human), np.asarray(judge)
    draws = []
    for rows in rng.integers(0, n, size=(resamples, n)):
        drawn = statistic(h[rows].tolist(), j[rows].tolist())
        if math.isfinite(drawn):
            draws.append(drawn)
    if not draws:
        return Estimate(value, math.nan, math.nan)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Estimate(value, float(low), float(high))
