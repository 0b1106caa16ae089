"""A family of paired drop tests decided together by sign flips: weighted step-down min-P (pure).

Each test is one metric in one scope (the suite, or one group). Its statistic is the
studentized weighted sum of the oriented paired differences x_i = w_i (head_i - base_i), drop
negative: ``T = -sum(x_i) / sqrt(sum(x_i ** 2))`` over the scope's examples (0 when every x_i is
0). Under "no change" base and head of an example are exchangeable, so each example's
difference is as likely to be +x_i as -x_i, whatever x_i is: flipping the signs of whole
examples (the same flip for every metric and scope of that example) draws from the exact joint
null distribution of all statistics, with their dependence kept (Fisher 1935, *The Design of
Experiments*, section 21; Pesarin 2001, *Multivariate Permutation Tests*, ch. 2). The weights
w_i must be fixed without looking at the signs (worker/evals/verdict/flakiness.py takes them from
earlier runs), so they change power, never the false-alarm rate.

The family is decided by the weighted step-down min-P procedure: Westfall & Young (1993),
*Resampling-Based Multiple Testing*, Algorithm 2.8 (min-P over resampled marginal p-values,
Ge, Dudoit & Speed 2003, Test 12:1-77, section 4), with weights v_k as in Westfall, Kropf & Finos
(2004), "Weighted FWE-controlling methods in high-dimensional situations", IMS Lecture Notes 47:
143-154 (q_k = p_k / v_k). It is the closed test of every intersection by its own weighted min-P
(`closed_test_p` checks that on small families), so the family-wise error rate is at most alpha
under any dependence of the tests; with equal weights and independent tests it is Holm's
method, and when a test is rejected its weight passes to the others in proportion to theirs
(Bretz, Maurer, Brannath & Posch 2009, Stat. Med. 28:586-604, weighted Holm as a graph).

With at most `EXACT_MAX` examples carrying a non-zero difference every sign pattern is
enumerated and p-values are exact (``#{T* >= T} / 2**k``); otherwise the patterns are a random
*subgroup* of the sign flips (`subgroup_signs`, 2**k >= draws + 1 members, the observed one
first) and ``#{T* >= T} / 2**k`` is exact for that fixed subgroup (Hemerik & Goeman 2018), so
the gate's seed, fixed so reruns repeat, cannot lift the false-alarm rate above alpha.

Why the family-wise error rate is at most alpha by construction: let G be the patterns (the
full group, or the subgroup). Under "no change" of the true null tests, the observed sign of
every example is a fair coin independent of |x| (and of the weights and confirm re-runs, which
are chosen from |head - base| and earlier runs only: worker/evals/verdict/confirm.py), so the
observed differences are g0 x for a uniform g0 in G, and the multiset of the statistics over G
is the same whichever member was observed. Every marginal p-value of every pattern
(`marginal_p` ranks each row among the same multiset) and so each intersection's min-q is a
function of that multiset and of the observed member's place in it; the local test of an
intersection rejects when the observed min-q is among the smallest alpha share of the
multiset's, which happens for at most an alpha share of the equally likely members. The
step-down is that closed test's shortcut (the min-P over a subset is at most the min-P over a
superset, subset pivotality of sign flips of whole examples), so the family-wise error is at
most alpha. Ties count against rejection (`TIE_TOLERANCE`). With confirm re-runs an example's
value is the mean of its draws on each side; the two sides' draws stay exchangeable as a block,
which is the same flip of that example's mean difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from worker.evals.verdict.stats import FloatArray

#: Largest number of examples with a non-zero difference whose 2**k sign patterns are enumerated.
EXACT_MAX = 12
#: Random sign patterns when not enumerating.
DEFAULT_DRAWS = 2000
#: Relative tolerance under which two statistics count as tied (float sums in another order).
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class FamilyResult:
    """The tests of a family decided together.

    Attributes:
        statistics: observed studentized drop statistic of each test, shape (k,) (larger is a
            clearer drop).
        p_values: marginal one-sided sign-flip p-value of each test, shape (k,).
        p_adjusted: weighted step-down min-P adjusted p-value, shape (k,): reject test j at
            level alpha when ``p_adjusted[j] <= alpha``; NaN for a test of weight 0 (outside
            the family).
        exact: every sign pattern was enumerated (p-values exact), else Monte Carlo.
        patterns: sign patterns the null distribution holds (the observed one included).
    """

    statistics: FloatArray
    p_values: FloatArray
    p_adjusted: FloatArray
    exact: bool
    patterns: int


def sign_patterns(active: int, n: int, draws: int, seed: int,
                  columns: NDArray[np.intp]) -> tuple[FloatArray, bool]:
    """Return sign patterns of shape (N, n), the first the observed (all +1).

    Args:
        active: examples with a non-zero difference; n: all examples.
        draws: random patterns when not enumerating.
        seed: seed of ``numpy.random.default_rng``.
        columns: the ``active`` columns that are flipped when enumerating (others stay +1).

    Returns:
        The patterns and whether they are every pattern of the active columns (2**active rows,
        enumerated in binary order after the observed one).
    """
    if active <= EXACT_MAX:
        codes = np.arange(1 << active, dtype=np.int64)
        bits = (codes[:, None] >> np.arange(active, dtype=np.int64)) & 1
        signs = np.ones((1 << active, n))
        signs[:, columns] = 1.0 - 2.0 * bits
        return signs, True
    return subgroup_signs(n, draws, seed), False


def subgroup_signs(n: int, draws: int, seed: int) -> FloatArray:
    """Return a random subgroup of the sign flips of n examples, shape (2**k, n), row 0 all +1.

    k = ceil(log2(draws + 1)) random sign vectors generate the group: row c is the product of
    the generators whose bit is set in c (row 0 the identity, the observed pattern). Because
    the rows form a group, the observed pattern times the group is the same set of patterns
    whichever of its members was observed, and under "no change" each member is equally likely
    to be the observed one: a test that ranks the observed statistic among the group's is exact
    for this fixed group, whatever the seed (Hemerik & Goeman 2018, "Exact testing with random
    permutations", TEST 27:811-825, Theorem 2). Independent random patterns (Phipson & Smyth
    2010) are exact only on average over the seeds, so a gate with one fixed seed could exceed
    alpha by the Monte-Carlo error of its one draw of patterns (about 0.007 at 1000 draws).
    A prefix of the columns (the first n_k examples of a sequential look) is again a group.

    Args:
        n: examples (columns); draws: patterns wanted besides the observed (>= 1).
        seed: seed of ``numpy.random.default_rng`` for the generators.

    Returns:
        The 2**k patterns (at least draws + 1), each group member once per code.
    """
    size = max(1, math.ceil(math.log2(draws + 1)))
    generators = np.random.default_rng(seed).integers(0, 2, size=(size, n), dtype=np.int64)
    codes = np.arange(1 << size, dtype=np.int64)
    bits = (codes[:, None] >> np.arange(size, dtype=np.int64)) & 1
    return np.asarray(1.0 - 2.0 * ((bits @ generators) & 1), dtype=np.float64)


def drop_statistics(x: FloatArray, scopes: NDArray[np.bool_], signs: FloatArray) -> FloatArray:
    """Return the studentized drop statistic of every test under every sign pattern.

    Args:
        x: weighted oriented differences, shape (n, m); 0 where an example has no value.
        scopes: shape (s, n): which examples each scope holds.
        signs: shape (N, n) sign patterns.

    Returns:
        Shape (N, s * m): column ``scope * m + metric``; 0 where a scope's differences are all 0.
    """
    columns = []
    for rows in scopes:
        part = x[rows]
        spread = np.sqrt(np.sum(part * part, axis=0))
        sums = signs[:, rows] @ part
        with np.errstate(invalid="ignore", divide="ignore"):
            columns.append(np.where(spread > 0, -sums / spread, 0.0))
    return np.hstack(columns) if columns else np.zeros((signs.shape[0], 0))


def marginal_p(null: FloatArray, values: FloatArray) -> FloatArray:
    """Return, per column, the share of ``null`` rows at least as large as each of ``values``.

    Args:
        null: shape (N, k), the null distribution of each column.
        values: shape (r, k): the statistics to rank (ties within `TIE_TOLERANCE` count).

    Returns:
        Shape (r, k), fractions in (0, 1] when ``values`` are rows of ``null``.
    """
    count = null.shape[0]
    ordered = np.sort(null, axis=0)
    found = np.empty(values.shape)
    for k in range(null.shape[1]):
        slack = TIE_TOLERANCE * np.maximum(np.abs(values[:, k]), 1.0)
        found[:, k] = count - np.searchsorted(ordered[:, k], values[:, k] - slack, side="left")
    return np.asarray(found / count, dtype=np.float64)


def step_down_min_p(p_null: FloatArray, p_observed: FloatArray, weights: FloatArray) -> FloatArray:
    """Return weighted step-down min-P adjusted p-values (Westfall & Young 1993, Alg. 2.8).

    Tests are taken in increasing q = p / v; the r-th gets the share of null rows whose smallest
    q* over the tests not yet taken is at most its q, made monotone (Westfall, Kropf & Finos
    2004 for the weights).

    Args:
        p_null: marginal p-values under each sign pattern, shape (N, k).
        p_observed: observed marginal p-values, shape (k,).
        weights: v_k >= 0, shape (k,); tests of weight 0 are outside the family (NaN).

    Returns:
        Shape (k,), in [0, 1], NaN outside the family.
    """
    adjusted = np.full(p_observed.shape, np.nan)
    members = np.flatnonzero(weights > 0)
    if members.size == 0:
        return adjusted
    q_observed = p_observed[members] / weights[members]
    q_null = p_null[:, members] / weights[members]
    order = np.argsort(q_observed, kind="stable")
    # Smallest q* over the tests from position r onwards, for every r (suffix minima).
    suffix = np.minimum.accumulate(q_null[:, order[::-1]], axis=1)[:, ::-1]
    slack = TIE_TOLERANCE * np.maximum(q_observed[order], 1.0)
    shares = np.mean(suffix <= (q_observed[order] + slack)[None, :], axis=0)
    adjusted[members[order]] = np.minimum(np.maximum.accumulate(shares), 1.0)
    return adjusted


def test_family(x: FloatArray, scopes: NDArray[np.bool_], weights: FloatArray, *,
                draws: int = DEFAULT_DRAWS, seed: int = 0) -> FamilyResult:
    """Test every metric in every scope for a drop, deciding the family together.

    Args:
        x: weighted oriented differences w_i (head_i - base_i), shape (n, m); drop negative;
            0 (not NaN) where an example has no value of a metric.
        scopes: shape (s, n) booleans: the examples of each scope (the suite first).
        weights: shape (s, m): the share of alpha of each test (any scale; 0: not tested).
        draws: random sign patterns when not enumerating (>= 1).
        seed: seed of the patterns, so reruns give the same p-values.

    Returns:
        Statistics and p-values in the order ``scope * m + metric``.

    Raises:
        ValueError: shapes disagree, a value is not finite, a weight is negative, or draws < 1.
    """
    n, m = x.shape
    if scopes.ndim != 2 or scopes.shape[1] != n or weights.shape != (scopes.shape[0], m):
        raise ValueError(f"shapes disagree: x {x.shape}, scopes {scopes.shape}, "
                         f"weights {weights.shape}")
    if not np.all(np.isfinite(x)) or np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise ValueError("differences must be finite and weights finite and >= 0")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    x = np.where(weights.any(axis=0), x, 0.0)  # metrics outside the family flip nothing
    columns = np.flatnonzero((x != 0).any(axis=1))
    signs, exact = sign_patterns(columns.size, n, draws, seed, columns)
    null = drop_statistics(x, scopes, signs)
    p_null = marginal_p(null, null)
    p_observed = p_null[0]
    return FamilyResult(null[0], p_observed,
                        step_down_min_p(p_null, p_observed, weights.ravel()), exact,
                        signs.shape[0])


def closed_test_p(p_null: FloatArray, p_observed: FloatArray, weights: FloatArray) -> FloatArray:
    """Return adjusted p-values by full closed testing with weighted min-P local tests (slow).

    Each intersection I of the family is tested by the share of null rows with
    ``min_{k in I} q*_k <= min_{k in I} q_k``; a test's adjusted p-value is the largest over
    the intersections holding it (Marcus, Peritz & Gabriel 1976, Biometrika 63:655-660). It
    enumerates 2**k - 1 intersections, for tests of `step_down_min_p` on small families.
    """
    members = [int(k) for k in np.flatnonzero(weights > 0)]
    adjusted = np.full(p_observed.shape, np.nan)
    adjusted[members] = 0.0
    for code in range(1, 1 << len(members)):
        chosen = [k for bit, k in enumerate(members) if code >> bit & 1]
        q_null = (p_null[:, chosen] / weights[chosen]).min(axis=1)
        bound = float((p_observed[chosen] / weights[chosen]).min())
        local = float(np.mean(q_null <= bound + TIE_TOLERANCE * max(bound, 1.0)))
        adjusted[chosen] = np.maximum(adjusted[chosen], local)
    return adjusted
