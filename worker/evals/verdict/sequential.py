"""Group-sequential stopping of the gate's sign-flip family (``settings.sequential``; pure).

Head is answered in ``looks`` batches (cumulative sizes n_1 < ... < n_K = n, examples in a fixed
order that depends only on their ids). After each batch the gate looks at the examples seen so
far and either stops (fail or pass) or asks for the next batch.

**Failing early: alpha spending.** The false-alarm rate alpha of the whole gate is spent over
the looks by a Lan-DeMets spending function of the information fraction t = n_k / n (Lan &
DeMets 1983, Biometrika 70:659-663). The default, ``haybittle_peto``, spends a small constant
rate at the interim looks, ``alpha(t) = INTERIM_SHARE * alpha * t`` for t < 1 and alpha at
t = 1: at most `INTERIM_SHARE` (a fifth) of alpha over all interim looks, the rest kept for the
final look. It is the spending-function form of the Haybittle-Peto boundary (Haybittle 1971,
Br. J. Radiol. 44:793-797; Peto et al. 1976, Br. J. Cancer 34:585-612: a small fixed nominal
level at interim analyses, nearly all of alpha at the final one). Why not O'Brien-Fleming here:
its classic promise (a run that goes the whole way keeps nearly all of alpha) rests on one
statistic whose looks are strongly correlated (corr = sqrt(t_i / t_j)), so the rows that cross
early would mostly have crossed at the end anyway. The gate's statistic is the smallest of
about 60 tests, and which test attains it changes between looks: the looks are weakly
correlated, what the interim looks spend is lost almost one for one at the last look, and with
4 looks O'Brien-Fleming's interims spend 0.024 of 0.05 (``alpha(0.75)``): the last boundary fell
to 0.026-0.039, and power against a 5-point drop at n = 300 from 0.70 (full run) to 0.59
(bench/gate_sequential.py). The interim rate must still let a clear regression stop: the
smallest G a look can reach is about (1 + the tests of the largest weight) / patterns (the
null rows that are the maximum of one of those tests tie with it), about 0.003 with 10 metrics
and `DRAWS` patterns, so each interim look of 4 spends 0.0025 at alpha 0.05. Pocock type
``alpha(t) = alpha ln(1 + (e - 1) t)`` and O'Brien-Fleming type ``alpha(t) = 2 - 2 Phi(z_{1 -
alpha/2} / sqrt(t))`` remain available (they stop earlier, at a cost in power).

At look k the gate's statistic is the family's smallest adjusted p-value G_k (the first step
of the weighted step-down min-P of worker/evals/verdict/multiplicity.py, over the examples
seen). The boundaries c_1, ..., c_K are
set on the *joint* null distribution of (G_1, ..., G_K) drawn by the same whole-example sign
flips at every look (the patterns of the first n_i examples are those of look i, so a later
look recomputes exactly the earlier boundaries): c_k is the largest level at which the share of
sign patterns that reach look k without crossing an earlier boundary and cross c_k is at most
alpha(t_k) - alpha(t_{k-1}). Under no change the observed pattern is one more draw of that
group (the observed pattern is row 0 of the null, as in Phipson & Smyth 2010), so the chance
that the gate fails at any look is at most sum_k (alpha(t_k) - alpha(t_{k-1})) = alpha: the
sequential gate's false-alarm rate is that of the full run (the group-sequential permutation
test, Jennison & Turnbull 2000, *Group Sequential Methods with Applications to Clinical
Trials*, ch. 7 and 13). The final look decides at c_K <= alpha, so a run that goes the whole way
fails a little less often than the non-sequential gate (by what the early looks spent).

**Passing early: predictive futility.** Stopping to pass never adds a false alarm (it only
removes rejections: non-binding futility, Jennison & Turnbull 2000, section 10.6), but it costs
power. The gate stops to pass only when the predictive probability that the full run would
fail is below ``futility`` (default 0.1): for each test, the remaining examples' sum is
predicted from the examples seen (normal, with the uncertainty of the observed mean added:
Spiegelhalter, Freedman & Blackburn 1986, Control. Clin. Trials 7:8-17), the final critical value
is the alpha-quantile of the family's null at this look, and the tests' probabilities are added
(a union bound, so the prediction errs towards continuing). A true regression is stopped to pass
only while it does not show yet, so power falls by at most about ``futility``, with one
exception the prediction cannot see: a sparse regression (a few examples that break for good)
may have none of its breaks among the examples seen, and then nothing predicts it (with d
breaks, in a share t of the run seen, about (1 - t)^d of the time: 8 of 120 breaks at look 1 of
4 were missed 0.75^8 = 10% of the time, a field case). So a run stops to pass only from half
its examples on (`FUTILITY_FROM`): there the same miss is 0.5^8 = 0.4%, and 3% for 5 breaks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from worker.evals.verdict.multiplicity import SignGroup, drop_statistics, marginal_p, subgroup
from worker.evals.verdict.stats import FloatArray

#: Predictive probability of a failing full run under which a look stops to pass.
FUTILITY = 0.1
#: Smallest share of the run's examples seen before it may stop to pass (module docstring).
FUTILITY_FROM = 0.5
#: Fewest sign patterns of a look: early looks spend little alpha, and a boundary below
#: 1 / patterns cannot be crossed.
DRAWS = 4000
#: Share of alpha the interim looks of ``haybittle_peto`` spend together (module docstring).
INTERIM_SHARE = 0.2
Spending = Literal["haybittle_peto", "obrien_fleming", "pocock"]
Verdict = Literal["fail", "pass", "continue"]


@dataclass(frozen=True)
class Look:
    """What one look of a sequential gate decided.

    Attributes:
        look: this look, 1-based; looks: planned looks (K).
        seen: examples seen so far (n_k); total: examples of the full run (n).
        spent: alpha spent up to this look, ``alpha(t_k)``.
        level: this look's boundary c_k on the family's smallest adjusted p-value (0-1).
        family_p: the observed smallest adjusted p-value G_k (1 without a test).
        predictive: predictive probability (0-1) that the full run fails (0 at the last look).
        verdict: ``fail`` (G_k <= c_k), ``pass`` (predictive < futility) or ``continue``.
        spend: alpha spent at this look alone, ``alpha(t_k) - alpha(t_{k-1})``.
        smallest: the smallest G_k any sign pattern of the examples seen reaches (0-1); when
            it exceeds ``spend``, c_k is 0: no test can reject at this look.
        differing: examples seen whose base and head values differ (discordant pairs of a
            pass/fail metric).
    """

    look: int
    looks: int
    seen: int
    total: int
    spent: float
    level: float
    family_p: float
    predictive: float
    verdict: Verdict
    spend: float = 0.0
    smallest: float = 0.0
    differing: int = 0


def spent_alpha(t: float, alpha: float, spending: Spending) -> float:
    """Return the alpha spent by information fraction ``t`` (Lan & DeMets 1983).

    Args:
        t: information fraction, 0-1 (examples seen / examples of the full run).
        alpha: the one-sided level of the whole run, 0-1.
        spending: ``haybittle_peto``, ``obrien_fleming`` or ``pocock`` (module docstring).

    Returns:
        alpha(t), 0 at t = 0 and ``alpha`` at t = 1.

    Raises:
        ValueError: t or alpha outside 0-1.
    """
    from scipy import stats as sps  # ~60 MB and ~1 s of import: only when used
    if not 0 <= t <= 1 or not 0 < alpha < 1:
        raise ValueError(f"need 0 <= t <= 1 and 0 < alpha < 1, got {t}, {alpha}")
    if t == 0:
        return 0.0
    if spending == "haybittle_peto":
        return alpha if t == 1 else INTERIM_SHARE * alpha * t
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    return float(2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / math.sqrt(t)))


def look_sizes(total: int, looks: int) -> tuple[int, ...]:
    """Return the cumulative examples after each look: round(total * k / looks), increasing.

    Raises:
        ValueError: looks < 1 or total < looks.
    """
    if looks < 1 or total < looks:
        raise ValueError(f"need 1 <= looks <= total, got {looks} looks of {total}")
    return tuple(round(total * k / looks) for k in range(1, looks + 1))


def boundaries(g: FloatArray, spends: FloatArray) -> FloatArray:
    """Return each look's boundary on the joint null of the gate's statistic.

    Args:
        g: shape (N, k): G_i of every sign pattern (rows) at looks 1..k (columns).
        spends: shape (k,): alpha spent at each look alone, alpha(t_i) - alpha(t_{i-1}).

    Returns:
        Shape (k,): c_i, the largest value of column i such that the share of rows not
        crossed before look i with G_i <= c_i is at most spends[i]; 0 when there is none.
    """
    rows = g.shape[0]
    alive = np.ones(rows, dtype=bool)
    found = np.zeros(g.shape[1])
    for i in range(g.shape[1]):
        values = np.sort(g[alive, i])
        counts = np.searchsorted(values, values, side="right")
        allowed = values[counts <= spends[i] * rows * (1 + 1e-12)]
        found[i] = float(allowed[-1]) if allowed.size else 0.0
        alive &= ~(g[:, i] <= found[i])
    return found


def family_p(x: FloatArray, scopes: NDArray[np.bool_], weights: FloatArray,
             signs: SignGroup | FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return the gate's statistic G and the min-q statistic M under every sign pattern.

    Each test's p-value is its sign-flip p-value over the same patterns, exactly what the
    report's family (worker/evals/verdict/multiplicity.py) computes: with the same patterns
    (`subgroup`, same seed and number) G at the last look *is* the report's first
    step-down p-value, so the last look's boundary is set on the statistic that decides.

    Args:
        x: weighted oriented differences, shape (n, m) (worker/evals/verdict/signflip.py).
        scopes: shape (s, n); weights: shape (s, m), the tests' shares of alpha (0: untested).
        signs: the N patterns of the n examples (a `SignGroup` or a matrix of shape (N, n)),
            the first the observed one.

    Returns:
        (G, M), each shape (N,): M = min over tested k of p_k / v_k, G = share of rows with
        M* <= M (ties within the tolerance of worker/evals/verdict/multiplicity.py count).
    """
    members = weights.ravel() > 0
    null = drop_statistics(x, scopes, signs)
    p_null = marginal_p(null, null)
    q = p_null[:, members] / weights.ravel()[members]
    smallest = q.min(axis=1) if q.shape[1] else np.ones(null.shape[0])
    return marginal_p(-smallest[:, None], -smallest[:, None])[:, 0], smallest


def sequential_look(x: FloatArray, scopes: NDArray[np.bool_], weights: FloatArray,
                    sizes: tuple[int, ...], *, alpha: float, spending: Spending = "haybittle_peto",
                    draws: int = DRAWS, seed: int = 0, futility: float = FUTILITY) -> Look:
    """Decide one look of the sequential gate (module docstring).

    Args:
        x: weighted oriented differences of the examples seen so far, in look order, shape
            (n_k, m): drop negative, 0 where not paired.
        scopes: shape (s, n_k): the examples of each scope (suite, groups).
        weights: shape (s, m): each test's share of alpha (0: not tested).
        sizes: cumulative examples after each planned look (`look_sizes`); n_k must be one.
        alpha: the gate's one-sided level, 0-1.
        spending: the spending function; draws: random sign patterns; seed: their seed (the
            same at every look of one run).
        futility: predictive probability of a failing full run under which it stops to pass.

    Returns:
        The `Look`.

    Raises:
        ValueError: n_k is not one of ``sizes`` or the shapes disagree.
    """
    seen, total = x.shape[0], sizes[-1]
    if seen not in sizes or scopes.shape != (scopes.shape[0], seen):
        raise ValueError(f"{seen} examples is not a planned look of {sizes} "
                         f"(scopes {scopes.shape})")
    k = sizes.index(seen)
    signs = subgroup(total, draws, seed)
    looks = [family_p(x[:n], scopes[:, :n], weights, signs.prefix(n)) for n in sizes[:k + 1]]
    g = np.column_stack([found for found, _ in looks])
    spent = [spent_alpha(n / total, alpha, spending) for n in sizes[:k + 1]]
    levels = boundaries(g, np.diff(np.array([0.0, *spent])))
    observed = float(g[0, k])
    if observed <= levels[k]:
        verdict: Verdict = "fail"
        predictive = 1.0
    elif k == len(sizes) - 1:
        verdict, predictive = "pass", 0.0
    else:
        critical = float(np.quantile(looks[k][1], alpha))
        predictive = predictive_failure(x, scopes, weights, total, critical)
        early = seen < FUTILITY_FROM * total  # a sparse regression may not show yet
        verdict = "pass" if predictive < futility and not early else "continue"
    spends = np.diff(np.array([0.0, *spent]))
    differing = int(np.count_nonzero(np.any(x != 0, axis=1)))
    return Look(k + 1, len(sizes), seen, total, spent[k], float(levels[k]), observed,
                predictive, verdict, float(spends[k]), float(g[:, k].min()), differing)


def predictive_failure(x: FloatArray, scopes: NDArray[np.bool_], weights: FloatArray,
                       total: int, critical: float) -> float:
    """Return the predictive probability (union bound, 0-1) that the full run fails.

    Args:
        x, scopes, weights: as `sequential_look`, over the n_k examples seen.
        total: examples of the full run; each scope is assumed to grow in proportion.
        critical: the family's critical min-q (a test fails when p / v <= critical).

    Returns:
        min(1, sum over tests of P(final statistic >= its critical value)), each final sum
        predicted as normal with mean S + r mu and variance r s^2 (1 + r / n_s) (module
        docstring); a test without a non-zero difference yet adds 0.
    """
    from scipy import stats as sps  # ~60 MB and ~1 s of import: only when used
    seen = x.shape[0]
    probability = 0.0
    for scope, share in zip(scopes, weights, strict=True):
        count = int(scope.sum())
        if count == 0:
            continue
        part = x[scope]
        rest = count * (total - seen) / seen
        for j in np.flatnonzero(share > 0):
            column = part[:, j]
            q_sum = float(np.sum(column * column))
            if q_sum == 0:
                continue
            mean = float(column.mean())
            variance = max(q_sum / count - mean * mean, 1e-12)
            z = float(sps.norm.isf(min(critical * share[j], 1.0)))
            final_spread = math.sqrt(q_sum * (count + rest) / count)
            centre = float(column.sum()) + rest * mean
            spread = math.sqrt(rest * variance * (1 + rest / count))
            probability += float(sps.norm.cdf((-z * final_spread - centre) / spread))
    return min(probability, 1.0)
