"""Paired statistics for the gate: tests, intervals, power and multiple comparisons (pure).

Every function takes plain numpy arrays and does no I/O. Differences are always oriented so
that a *drop* (head worse than base) is negative; callers flip lower-is-better metrics first.
Power and the minimum detectable drop are in worker/evals/verdict/power.py. Sources of each formula
are given in the function's docstring:

- exact McNemar test: McNemar (1947), Psychometrika 12:153-157, as a binomial test on the
  discordant pairs;
- Wilcoxon signed-rank test: Wilcoxon (1945), Biometrics Bulletin 1:80-83, via scipy;
- paired (stratified) bootstrap percentile interval: Efron & Tibshirani (1993), *An
  Introduction to the Bootstrap*, ch. 13; stratified resampling: Davison & Hinkley (1997),
  *Bootstrap Methods and their Application*, section 3.7;
- Holm (1979), Scand. J. Statist. 6:65-70, adjusted p-values as in Wright (1992), Biometrics
  48:1005-1013.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
#: How zero differences enter the signed-rank test: dropped before ranking (Wilcoxon's method).
ZERO_METHOD = "wilcox"
#: Default bootstrap resamples and interval level (fraction 0-1).
DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
#: Cells (resamples x examples) drawn at once: about 16 MB of indices and as much of counts.
BLOCK_CELLS = 2_000_000


@dataclass(frozen=True)
class McNemarResult:
    """An exact one-sided McNemar test of a drop.

    Attributes:
        fixed: pairs failing at base and passing at head.
        broken: pairs passing at base and failing at head.
        p_value: P(X >= broken) for X ~ Binomial(fixed + broken, 1/2); 1.0 without discordant
            pairs (no evidence of a drop, and no division by zero).
    """

    fixed: int
    broken: int
    p_value: float


@dataclass(frozen=True)
class SignedRankResult:
    """A one-sided Wilcoxon signed-rank test of a drop (head - base < 0).

    Attributes:
        n_nonzero: differences that entered the ranking.
        n_zero: zero differences, dropped before ranking (`ZERO_METHOD`).
        statistic: scipy's statistic (the sum of the ranks of positive differences), or None
            when no difference is non-zero.
        p_value: one-sided p-value; 1.0 when every difference is zero (no change).
    """

    n_nonzero: int
    n_zero: int
    statistic: float | None
    p_value: float


def mcnemar_drop(base: NDArray[np.bool_], head: NDArray[np.bool_]) -> McNemarResult:
    """Test whether head fails more paired examples than base (exact, one-sided).

    Args:
        base, head: pass/fail of the same n examples, shape (n,), in the same order.

    Returns:
        The counts of fixed and broken pairs and the exact one-sided p-value (equal to
        ``scipy.stats.binomtest(broken, fixed + broken, 0.5, alternative="greater").pvalue``).

    Raises:
        ValueError: the arrays differ in shape.
    """
    if base.shape != head.shape:
        raise ValueError(f"base and head must have the same shape, got {base.shape}, {head.shape}")
    broken = int(np.count_nonzero(base & ~head))
    fixed = int(np.count_nonzero(~base & head))
    return McNemarResult(fixed, broken, mcnemar_p(broken, fixed))


def mcnemar_p(broken: int, fixed: int) -> float:
    """Return the exact one-sided McNemar p-value P(Binomial(broken + fixed, 1/2) >= broken).

    Returns 1.0 when there is no discordant pair. Raises ValueError on negative counts.
    """
    from scipy import stats as sps  # ~60 MB and ~1 s of import: only when used
    if broken < 0 or fixed < 0:
        raise ValueError(f"counts must be >= 0, got broken={broken}, fixed={fixed}")
    if broken + fixed == 0:
        return 1.0
    return float(sps.binom.sf(broken - 1, broken + fixed, 0.5))


def signed_rank_drop(differences: FloatArray) -> SignedRankResult:
    """Test whether head - base tends to be negative (Wilcoxon signed-rank, one-sided).

    Zero differences are dropped before ranking (``zero_method="wilcox"``); scipy picks the
    exact distribution for small untied samples and the normal approximation otherwise.

    Args:
        differences: head - base per paired example, shape (n,); must be finite.

    Returns:
        The counts and the p-value; p = 1.0 when every difference is zero or n = 0.

    Raises:
        ValueError: a difference is NaN or infinite.
    """
    from scipy import stats as sps  # ~60 MB and ~1 s of import: only when used
    if not np.all(np.isfinite(differences)):
        raise ValueError("differences must be finite numbers")
    nonzero = int(np.count_nonzero(differences))
    zero = int(differences.size - nonzero)
    if nonzero == 0:
        return SignedRankResult(0, zero, None, 1.0)
    result = sps.wilcoxon(differences, zero_method=ZERO_METHOD, alternative="less")
    return SignedRankResult(nonzero, zero, float(result.statistic), float(result.pvalue))


def bootstrap_means(
    differences: FloatArray,
    strata: NDArray[np.intp],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[FloatArray, FloatArray]:
    """Resample paired examples within strata and return the resampled mean differences.

    For each stratum in code order and each block of up to ``block_size(n_s, resamples)``
    resamples, the draw is ``rng.integers(0, n_s, size=(block, n_s))`` with
    ``rng = numpy.random.default_rng(seed)``.
    An example is resampled as a whole; a NaN marks a metric it lacks, which is left out of that
    resample's mean. The overall mean of a resample pools all strata (stratified resampling).

    Args:
        differences: head - base, shape (n, m) for m metrics; NaN where not applicable.
        strata: stratum code 0..s-1 of each example, shape (n,) (all zeros: no strata).
        resamples: number of resamples B (>= 1).
        seed: the generator's seed, so reruns give the same numbers.

    Returns:
        ``(overall, per_stratum)`` of shapes (B, m) and (s, B, m); NaN where a resample held no
        value of a metric.

    Raises:
        ValueError: shapes disagree, a stratum code is negative, or resamples < 1.
    """
    n, m = differences.shape
    if strata.shape != (n,) or (n and int(strata.min()) < 0) or resamples < 1:
        raise ValueError("strata must have shape (n,) with codes >= 0, and resamples >= 1")
    count = int(strata.max()) + 1 if n else 0
    rng = np.random.default_rng(seed)
    present = ~np.isnan(differences)
    sums = np.zeros((count, resamples, m))
    sizes = np.zeros((count, resamples, m))
    for code in range(count):
        rows = np.flatnonzero(strata == code)
        gaps = ~present[rows].all(axis=0)  # metrics some example of the stratum lacks
        # One product gives the sums and, for metrics with gaps, how many values were drawn.
        table = np.hstack([np.where(present[rows], differences[rows], 0.0),
                           present[rows][:, gaps].astype(np.float64)])
        size, index_type = block_size(rows.size, resamples), _index_type(rows.size)
        for start in range(0, resamples, size):
            block = min(size, resamples - start)
            drawn = rng.integers(0, rows.size, size=(block, rows.size), dtype=index_type)
            product = _counts(drawn, rows.size) @ table
            sums[code, start:start + block] = product[:, :m]
            drawn = sizes[code, start:start + block]  # a view
            drawn[:] = rows.size
            drawn[:, gaps] = product[:, m:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums.sum(axis=0) / sizes.sum(axis=0), sums / sizes


def block_size(n: int, resamples: int) -> int:
    """Return how many resamples of n examples are drawn at once (about `BLOCK_CELLS` cells)."""
    return max(1, min(resamples, BLOCK_CELLS // max(n, 1)))


def _index_type(n: int) -> type[np.unsignedinteger[Any]]:
    """Return the smallest unsigned type that holds indices below n (fewer random bits)."""
    return np.uint16 if n <= 1 << 16 else np.uint32 if n <= 1 << 32 else np.uint64


def _counts(indices: NDArray[np.unsignedinteger[Any]], n: int) -> FloatArray:
    """Turn (block, n) drawn indices into (block, n) counts of how often each row was drawn.

    One ``numpy.bincount`` per resample: half the time of one over the whole block, which
    needs the indices widened to 64 bits with each row's offset added."""
    counts = np.empty(indices.shape, dtype=np.float64)
    for row, drawn in enumerate(indices):
        counts[row] = np.bincount(drawn, minlength=n)
    return counts


def percentile_interval(means: FloatArray, level: float = DEFAULT_LEVEL) -> FloatArray:
    """Return the bootstrap percentile interval of each column.

    Args:
        means: resampled statistics, shape (B, m); NaN entries are ignored.
        level: coverage, fraction in (0, 1).

    Returns:
        Shape (m, 2): lower and upper bounds (numpy's linear percentile); NaN for a column
        without values.
    """
    tail = (1.0 - level) / 2.0 * 100.0
    result = np.full((means.shape[1], 2), np.nan)
    for column in range(means.shape[1]):
        values = means[:, column]
        values = values[~np.isnan(values)]
        if values.size:
            result[column] = np.percentile(values, [tail, 100.0 - tail])
    return result


def holm_adjust(p_values: FloatArray) -> FloatArray:
    """Return Holm step-down adjusted p-values (Holm 1979; adjusted form per Wright 1992).

    The i-th smallest of m p-values becomes max over j <= i of min(1, (m - j + 1) p_(j)), so
    comparing each adjusted value with alpha keeps the family-wise error rate at alpha.

    Args:
        p_values: shape (m,); NaN entries are left out of the family and stay NaN.

    Returns:
        Adjusted p-values, shape (m,), in the input order.
    """
    adjusted = np.full(p_values.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p_values))
    if valid.size == 0:
        return adjusted
    order = valid[np.argsort(p_values[valid], kind="stable")]
    scaled = p_values[order] * (valid.size - np.arange(valid.size))
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


@dataclass(frozen=True)
class RepeatNoise:
    """Run-to-run noise measured from repeated runs of the same examples.

    Attributes:
        repeats: the largest number of repeats of an example.
        sd: pooled within-example standard deviation (score units), NaN without repeats.
        flip_rate: fraction 0-1 of examples whose repeats disagree.
    """

    repeats: int
    sd: float
    flip_rate: float


def repeat_noise(scores: FloatArray) -> RepeatNoise:
    """Estimate run-to-run noise from scores of shape (n examples, R repeats), NaN = missing.

    The pooled SD is sqrt(mean of per-example sample variances) over examples with at least two
    repeats; NaN (and flip rate 0) when none has two.
    """
    counts = np.sum(~np.isnan(scores), axis=1)
    usable = scores[counts >= 2]
    if usable.shape[0] == 0:
        return RepeatNoise(int(counts.max(initial=0)), math.nan, 0.0)
    variances = np.nanvar(usable, axis=1, ddof=1)
    flips = np.nanmax(usable, axis=1) != np.nanmin(usable, axis=1)
    return RepeatNoise(int(counts.max()), float(math.sqrt(float(np.mean(variances)))),
                       float(np.mean(flips)))
