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
*subgroup* of the sign flips (`subgroup`, 2**k >= draws + 1 members, the observed one
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


@dataclass(frozen=True)
class SignGroup:
    """A group of 2**size sign patterns of n examples, kept as one code per example.

    Pattern c (0 <= c < 2**size) gives example i the sign ``(-1) ** popcount(c & codes[i])``:
    row 0 is the observed pattern (all +1), and the rows are a group under the product (the
    codes of a product are the XOR of the codes). Both kinds of patterns the family uses are
    such groups: enumerating every pattern of k active examples gives the j-th of them the
    code 2**j (others 0), and `subgroup_signs`' random subgroup gives example i the bits of the
    generators that flip it.

    Kept as codes, the patterns never take memory of shape (2**size, n) (164 MB for 10,000
    examples and 2,048 patterns), and `sums` needs no product with such a matrix: examples with
    one code have the same sign in every pattern, so the signed sums are the Walsh-Hadamard
    transform of the per-code sums (the matrix ``(-1) ** popcount(c & t)`` is Sylvester's
    Hadamard matrix, Sylvester 1867), O(n m + size 2**size m) instead of O(2**size n m).

    Attributes:
        codes: shape (n,), int64 in [0, 2**size).
        size: bits of a code; the group has 2**size patterns.
    """

    codes: NDArray[np.int64]
    size: int

    @property
    def patterns(self) -> int:
        """The number of patterns, 2**size."""
        return 1 << self.size

    def prefix(self, n: int) -> SignGroup:
        """The same patterns on the first n examples only (again a group)."""
        return SignGroup(self.codes[:n], self.size)

    def matrix(self) -> FloatArray:
        """Every pattern as a row, shape (2**size, n) of +1.0/-1.0 (tests, small groups)."""
        bits = np.arange(self.patterns, dtype=np.int64)[:, None] & self.codes[None, :]
        parity = np.zeros(bits.shape, dtype=np.int64)
        for bit in range(self.size):
            parity ^= (bits >> bit) & 1
        return np.asarray(1.0 - 2.0 * parity, dtype=np.float64)

    def sums(self, values: FloatArray) -> FloatArray:
        """Return ``matrix() @ values``, shape (2**size, c), for values of shape (n, c).

        Values are summed per code (one ``numpy.bincount``), then transformed in place by the
        fast Walsh-Hadamard butterfly (a + b, a - b per bit). Sums may differ from the matrix
        product in the last bits (another order of addition).
        """
        count, columns = self.patterns, values.shape[1]
        index = (self.codes[:, None] * columns + np.arange(columns)).ravel()
        table = np.bincount(index, weights=values.ravel(), minlength=count * columns)
        table = table.reshape(count, columns)
        half = 1
        while half < count:
            pairs = table.reshape(count // (2 * half), 2, half, columns)
            low = pairs[:, 0].copy()
            pairs[:, 0] += pairs[:, 1]
            pairs[:, 1] = low - pairs[:, 1]
            half *= 2
        return np.asarray(table, dtype=np.float64)


def sign_patterns(active: int, n: int, draws: int, seed: int,
                  columns: NDArray[np.intp]) -> tuple[SignGroup, bool]:
    """Return the sign patterns of the family, the first the observed (all +1).

    Args:
        active: examples with a non-zero difference; n: all examples.
        draws: random patterns when not enumerating.
        seed: seed of ``numpy.random.default_rng``.
        columns: the ``active`` columns that are flipped when enumerating (others stay +1).

    Returns:
        The patterns and whether they are every pattern of the active columns (2**active rows,
        enumerated in binary order after the observed one: column ``columns[j]`` is flipped in
        the rows whose bit j is set).
    """
    if active <= EXACT_MAX:
        codes = np.zeros(n, dtype=np.int64)
        codes[columns] = 1 << np.arange(active, dtype=np.int64)
        return SignGroup(codes, active), True
    return subgroup(n, draws, seed), False


def subgroup(n: int, draws: int, seed: int) -> SignGroup:
    """Return a random subgroup of the sign flips of n examples, 2**k patterns, row 0 all +1.

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
        seed: seed of ``numpy.random.default_rng`` for the generators (generator b flips
            example i when its draw is 1; example i's code holds bit b then).

    Returns:
        The 2**k patterns (at least draws + 1) as a `SignGroup`.
    """
    size = max(1, math.ceil(math.log2(draws + 1)))
    generators = np.random.default_rng(seed).integers(0, 2, size=(size, n), dtype=np.int64)
    codes = (generators << np.arange(size, dtype=np.int64)[:, None]).sum(axis=0)
    return SignGroup(np.asarray(codes, dtype=np.int64), size)


def subgroup_signs(n: int, draws: int, seed: int) -> FloatArray:
    """Return `subgroup`'s patterns as a matrix, shape (2**k, n), row 0 all +1 (tests)."""
    return subgroup(n, draws, seed).matrix()


def drop_statistics(x: FloatArray, scopes: NDArray[np.bool_],
                    signs: SignGroup | FloatArray) -> FloatArray:
    """Return the studentized drop statistic of every test under every sign pattern.

    Args:
        x: weighted oriented differences, shape (n, m); 0 where an example has no value.
        scopes: shape (s, n): which examples each scope holds.
        signs: the N sign patterns, a `SignGroup` or a matrix of shape (N, n).

    Returns:
        Shape (N, s * m): column ``scope * m + metric``; 0 where a scope's differences are all 0.

    Every scope's sums come from the differences masked by scope (shape (n, s * m): an example
    outside a scope adds an exact 0), in one pass: `SignGroup.sums`, or one matrix product.
    Sums may differ from a product per scope in the last bit (another order of addition); ties
    are compared within `TIE_TOLERANCE`.
    """
    count, m = scopes.shape[0], x.shape[1]
    patterns = signs.patterns if isinstance(signs, SignGroup) else signs.shape[0]
    if count == 0:
        return np.zeros((patterns, 0))
    masked = scopes.astype(np.float64)[:, :, None] * x[None, :, :]  # (s, n, m)
    spread = np.sqrt(np.einsum("snm,snm->sm", masked, masked)).reshape(count * m)
    flat = masked.transpose(1, 0, 2).reshape(x.shape[0], count * m)
    sums = signs.sums(flat) if isinstance(signs, SignGroup) else signs @ flat
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(spread > 0, -sums / spread, 0.0), dtype=np.float64)


def marginal_p(null: FloatArray, values: FloatArray) -> FloatArray:
    """Return, per column, the share of ``null`` rows at least as large as each of ``values``.

    Args:
        null: shape (N, k), the null distribution of each column.
        values: shape (r, k): the statistics to rank (ties within `TIE_TOLERANCE` count).

    Returns:
        Shape (r, k), fractions in (0, 1] when ``values`` are rows of ``null``.

    Each column is searched with its values in increasing order (numpy's binary search starts
    from the previous key's place when keys increase), then put back in row order: the same
    counts as searching in row order, in about 0.6x the time (2,048 x 60, bench/gate_speed.py's
    looks). When ``values`` is ``null`` (every caller: each row ranked among its own column)
    one argsort gives both the sorted null and the order.
    """
    count = null.shape[0]
    table = np.ascontiguousarray(values.T)  # (k, r): one column per row, contiguous
    order = np.argsort(table, axis=1)
    ordered = np.take_along_axis(table, order, axis=1)
    slack = np.abs(ordered)
    np.maximum(slack, 1.0, out=slack)
    slack *= TIE_TOLERANCE
    keys = ordered - slack  # increasing as the values
    if values is not null:
        ordered = np.sort(np.ascontiguousarray(null.T), axis=1)
    below = np.empty(table.shape)
    for k in range(table.shape[0]):
        below[k] = np.searchsorted(ordered[k], keys[k], side="left")
    found = np.empty(table.shape)
    np.put_along_axis(found, order, below, axis=1)
    np.subtract(count, found, out=found)
    found /= count
    return np.asarray(found.T, dtype=np.float64)  # (r, k)


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
                        signs.patterns)


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
