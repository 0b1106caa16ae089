"""Compute the paired statistics of one suite: per metric and group, tests, intervals, MDD (pure).

A metric whose paired values are all 0 or 1 is tested with the exact McNemar test, any other
with the Wilcoxon signed-rank test; both one-sided for a drop. The 95% interval of head - base
comes from one seeded bootstrap of the suite, stratified by group when grouping, so reruns give
the same numbers. See worker/evals/verdict/stats.py and worker/evals/verdict/power.py for the
formulas and their sources.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from worker.evals.score import lower_is_better
from worker.evals.types import PairedComparison
from worker.evals.verdict import stats
from worker.evals.verdict.paired import PairedSuite, mean_over_repeats
from worker.evals.verdict.power import DEFAULT_POWER, mdd_binary, mdd_continuous
from worker.evals.verdict.stats import FloatArray

#: Seed of the bootstrap, mixed with the suite name (CRC-32) so suites draw differently.
SEED = 20240611


@dataclass(frozen=True)
class StatSettings:
    """How the statistics are computed.

    Attributes:
        resamples: bootstrap resamples (2,000 by default).
        level: interval coverage, fraction 0-1 (0.95).
        seed: base seed of the bootstrap.
        power: power of the minimum detectable drop, fraction 0-1 (0.8).
    """

    resamples: int = stats.DEFAULT_RESAMPLES
    level: float = stats.DEFAULT_LEVEL
    seed: int = SEED
    power: float = DEFAULT_POWER


#: The settings the gate uses unless told otherwise.
DEFAULT_SETTINGS = StatSettings()


@dataclass(frozen=True)
class _Scope:
    label: str
    rows: NDArray[np.bool_]
    interval: FloatArray  # (m, 2), oriented (drop negative)


def gated_groups(paired: PairedSuite, min_items: int) -> tuple[list[str], list[str]]:
    """Return the group labels with at least ``min_items`` paired examples, and the others."""
    labels = sorted(set(paired.groups) - {""})
    sizes = {label: paired.groups.count(label) for label in labels}
    return ([g for g in labels if sizes[g] >= min_items],
            [f"{g} ({sizes[g]})" for g in labels if sizes[g] < min_items])


def scope_counts(paired: PairedSuite, min_items: int) -> list[int]:
    """Return, per metric, how many scopes (the suite and its large groups) have a paired value.

    The gate uses it to size the Holm family before computing anything.
    """
    valid = ~np.isnan(mean_over_repeats(paired.base)) & ~np.isnan(mean_over_repeats(paired.head))
    groups = np.array(paired.groups, dtype=object)
    scopes = [np.ones(len(paired.ids), dtype=bool)]
    scopes += [groups == label for label in gated_groups(paired, min_items)[0]]
    return [sum(bool(np.any(valid[:, j] & rows)) for rows in scopes)
            for j in range(len(paired.metrics))]


def compare_suite(
    suite: str,
    paired: PairedSuite,
    mdd_alphas: Sequence[float],
    min_items: int = 5,
    settings: StatSettings = DEFAULT_SETTINGS,
) -> list[PairedComparison]:
    """Compare base and head of one suite for every metric, overall and in each large group.

    Args:
        suite: the suite name (mixed into the seed).
        paired: the paired values (see `worker.evals.verdict.paired.pair_suite`).
        mdd_alphas: one-sided level of each metric's minimum detectable drop.
        min_items: smallest group compared.
        settings: resamples, level, seed and power.

    Returns:
        One comparison per metric and scope (the suite first, then groups in label order);
        ``p_adjusted`` is None (the gate adjusts over the whole family).
    """
    sign = np.array([-1.0 if lower_is_better(m) else 1.0 for m in paired.metrics])
    base, head = mean_over_repeats(paired.base), mean_over_repeats(paired.head)
    oriented = (head - base) * sign
    labels = sorted(set(paired.groups))
    codes = np.array([labels.index(g) for g in paired.groups], dtype=np.intp)
    seed = settings.seed ^ zlib.crc32(suite.encode("utf-8"))
    overall, per_group = stats.bootstrap_means(oriented, codes, resamples=settings.resamples,
                                               seed=seed)
    scopes = [_Scope("", np.ones(len(paired.ids), dtype=bool),
                     stats.percentile_interval(overall, settings.level))]
    for label in gated_groups(paired, min_items)[0]:
        code = labels.index(label)
        scopes.append(_Scope(label, codes == code,
                             stats.percentile_interval(per_group[code], settings.level)))
    found = []
    for j, metric in enumerate(paired.metrics):
        valid = ~np.isnan(oriented[:, j])
        for scope in scopes:
            rows = valid & scope.rows
            found.append(_compare(suite, metric, scope, paired, (base, head, oriented), rows, j,
                                  sign[j], mdd_alphas[j], settings.power))
    return found


def _compare(suite: str, metric: str, scope: _Scope, paired: PairedSuite,
             arrays: tuple[FloatArray, FloatArray, FloatArray], rows: NDArray[np.bool_],
             j: int, sign: float, mdd_alpha: float, power: float) -> PairedComparison:
    base, head, oriented = (a[rows, j] for a in arrays)
    n = int(rows.sum())
    interval = scope.interval[j] * sign if n >= 2 else None
    low, high = (None, None) if interval is None else (float(min(interval)), float(max(interval)))
    repeats, noise = _noise(paired, rows, j, sign)
    base_mean, head_mean = _avg(base), _avg(head)
    common: dict[str, Any] = {
        "suite": suite, "metric": metric, "group": scope.label, "n": n,
        "added": 0 if scope.label else len(paired.added),
        "removed": 0 if scope.label else len(paired.removed),
        "base": base_mean, "head": head_mean,
        "delta": None if base_mean is None or head_mean is None else head_mean - base_mean,
        "ci_low": low, "ci_high": high, "p_adjusted": None, "mdd_alpha": mdd_alpha,
        "repeats": repeats, "noise_sd": noise}
    if n == 0:
        return PairedComparison(**common, test="none", p_value=None, fixed=None, broken=None,
                                n_zero=0, mdd=math.inf)
    good_base, good_head = (base, head) if sign > 0 else (1 - base, 1 - head)
    if _binary(good_base) and _binary(good_head):
        test = stats.mcnemar_drop(good_base == 1, good_head == 1)
        flip_rate = (test.fixed + test.broken) / (2 * n)
        return PairedComparison(**common, test="mcnemar", p_value=test.p_value, fixed=test.fixed,
                                broken=test.broken, n_zero=n - test.fixed - test.broken,
                                mdd=mdd_binary(n, flip_rate, mdd_alpha, power))
    ranked = stats.signed_rank_drop(oriented)
    sd = float(np.std(oriented, ddof=1)) if n >= 2 else math.inf
    return PairedComparison(**common, test="wilcoxon", p_value=ranked.p_value, fixed=None,
                            broken=None, n_zero=ranked.n_zero,
                            mdd=mdd_continuous(n, sd, mdd_alpha, power))


def _avg(values: FloatArray) -> float | None:
    return float(np.mean(values)) if values.size else None


def _binary(values: FloatArray) -> bool:
    return bool(np.all((values == 0) | (values == 1)))


def _noise(paired: PairedSuite, rows: NDArray[np.bool_], j: int,
           sign: float) -> tuple[int, float | None]:
    if paired.base.shape[2] < 2:
        return 1, None
    both = np.concatenate([paired.base[rows, j, :], paired.head[rows, j, :]]) * sign
    noise = stats.repeat_noise(both)
    return noise.repeats, None if math.isnan(noise.sd) else noise.sd
