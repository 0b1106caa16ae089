"""The gate's ``regression`` tests as one sign-flip family (``settings.statistics.method``).

Every ``regression`` test of the gate (each suite, metric and group) enters one family decided
by worker/evals/verdict/multiplicity.py: studentized, flakiness-weighted paired sums, the exact
joint null of all of them by flipping whole examples, and the weighted step-down min-P procedure, so
the false-alarm rate of the whole gate stays at most alpha while the strong dependence of a suite's
test and its groups' tests is used instead of paid for (Holm pays for each). Suites hold different
examples, so their examples are stacked on one axis and flipped independently.

How alpha is split (the shares v of the tests, `alpha_shares`): each metric's tests share one
part; with ``primary: true`` metrics, those share ``primary_share`` of the whole and the others
the rest (a graphical procedure of Bretz et al. 2009 whose weight passes on in proportion when
a test is rejected); within a metric the whole-suite test gets ``1 - group_share`` and its
groups split ``group_share``. Example weights come from earlier runs
(worker/evals/verdict/flakiness.py); without them every example weighs 1, and on pass/fail values
the test is then exactly McNemar's (sign-flip of the discordant pairs).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from worker.evals.score import lower_is_better
from worker.evals.types import GateRule, PairedComparison, StatisticsSettings
from worker.evals.verdict.comparisons import gated_groups
from worker.evals.verdict.flakiness import history_weights
from worker.evals.verdict.multiplicity import test_family
from worker.evals.verdict.paired import PairedSuite, mean_over_repeats
from worker.evals.verdict.stats import FloatArray

#: Seed of the sign patterns (mixed with the suites' names so reruns repeat exactly).
SEED = 20240925
#: The name of the adjustment in reports.
ADJUSTMENT = "sign-flip min-P"
#: Earlier values of a suite's examples: metric -> example id -> values of the earlier runs.
History = Mapping[str, Mapping[str, Sequence[float]]]


@dataclass(frozen=True)
class FamilySuite:
    """One suite's part of the family.

    Attributes:
        name: the suite; paired: its paired values; rules: its gate rules by metric.
        min_items: smallest group tested on its own.
        history: earlier runs of its examples (for weights), or None.
        weights: the example weights, shape (n, m), when already known (else from history).
    """

    name: str
    paired: PairedSuite
    rules: Mapping[str, GateRule]
    min_items: int
    history: History | None = None
    weights: FloatArray | None = None


@dataclass(frozen=True)
class _Test:
    suite: str
    metric: str
    group: str


def alpha_shares(suites: Sequence[FamilySuite], options: StatisticsSettings
                 ) -> dict[tuple[str, str, str], float]:
    """Return the share (summing to 1) of alpha of every ``regression`` test, by (suite,
    metric, group); see the module docstring. Groups without a value of the metric get none."""
    metrics = [(s, m) for s in suites for m in s.paired.metrics
               if s.rules[m].regression_alpha is not None]
    primary = [(s, m) for s, m in metrics if s.rules[m].primary]
    shares: dict[tuple[str, str, str], float] = {}
    for suite, metric in metrics:
        if primary:
            own = len(primary) if suite.rules[metric].primary else len(metrics) - len(primary)
            part = (options.primary_share if suite.rules[metric].primary
                    else 1 - options.primary_share) / own
        else:
            part = 1 / len(metrics)
        groups = _valued_groups(suite, metric)
        group_part = options.group_share if groups else 0.0
        shares[(suite.name, metric, "")] = part * (1 - group_part)
        for label in groups:
            shares[(suite.name, metric, label)] = part * group_part / len(groups)
    total = sum(shares.values())
    return {key: value / total for key, value in shares.items()} if total else shares


def split_note(suites: Sequence[FamilySuite], options: StatisticsSettings) -> str:
    """Return one sentence saying how alpha was split over the family's tests (`alpha_shares`).

    Names ``primary_share`` and ``group_share`` with their values, the primary metrics, and
    each metric's starting share of alpha for its whole-suite test and for each group test
    (shares of the gate's alpha, 0-1, 4 significant digits); empty without a ``regression``
    test. At most 6 metrics are listed, then how many more.
    """
    shares = alpha_shares(suites, options)
    if not shares:
        return ""
    metrics = [(s, m) for s in suites for m in s.paired.metrics
               if s.rules[m].regression_alpha is not None]
    primary = [f"{s.name} {m}" for s, m in metrics if s.rules[m].primary]
    others = [f"{s.name} {m}" for s, m in metrics if not s.rules[m].primary]
    if primary and others:
        text = (f"primary_share {options.primary_share:g} of alpha went to the metrics marked "
                f"primary: true ({', '.join(primary[:6])}) and the rest to the other "
                f"{len(others)} ({', '.join(others[:6])}{', ...' if len(others) > 6 else ''})")
    elif len(metrics) == 1:
        text = f"{metrics[0][0].name} {metrics[0][1]} is the only tested metric"
    else:
        text = f"alpha was split evenly over the {len(metrics)} tested metrics"
    grouped = any(key[2] for key in shares)
    if grouped:
        text += (f"; within a metric, group_share {options.group_share:g} of its part went to "
                 f"its group tests (evenly) and the rest to its whole-suite test")
    parts = []
    for suite, metric in metrics[:6]:
        groups = [v for (name, m, g), v in shares.items() if (name, m) == (suite.name, metric)
                  and g]
        part = f"{suite.name} {metric} {shares[(suite.name, metric, '')]:.4g}"
        if groups:
            part += f" + {len(groups)} groups × {groups[0]:.4g}"
        parts.append(part)
    more = f", and {len(metrics) - 6} more" if len(metrics) > 6 else ""
    alphas = {s.rules[m].regression_alpha for s, m in metrics}
    which = "its rule's regression alpha" if len(alphas) > 1 else "alpha"
    return (f"How alpha was split (settings.statistics): {text}. Each test starts at {which} × "
            f"its share ({'; '.join(parts)}{more}); a rejected test passes its share on to the "
            "rest (Bretz et al. 2009).")


def _valued_groups(suite: FamilySuite, metric: str) -> list[str]:
    j = suite.paired.metrics.index(metric)
    valid = _valid(suite.paired)[:, j]
    groups = np.array(suite.paired.groups, dtype=object)
    return [g for g in gated_groups(suite.paired, suite.min_items)[0]
            if bool(np.any(valid & (groups == g)))]


def _valid(paired: PairedSuite) -> NDArray[np.bool_]:
    return ~np.isnan(mean_over_repeats(paired.base)) & ~np.isnan(mean_over_repeats(paired.head))


def weighted_differences(suite: FamilySuite) -> FloatArray:
    """Return w_i (head_i - base_i), oriented so a drop is negative, 0 where not paired.

    Shape (n, m); the weights come from ``suite.history`` (`example_history`).
    """
    paired = suite.paired
    sign = np.array([-1.0 if lower_is_better(m) else 1.0 for m in paired.metrics])
    oriented = (mean_over_repeats(paired.head) - mean_over_repeats(paired.base)) * sign
    weights: FloatArray | float = 1.0
    if suite.weights is not None:
        weights = suite.weights
    elif suite.history:
        weights = history_weights(example_history(suite))
    return np.where(np.isnan(oriented), 0.0, oriented * weights)


def example_history(suite: FamilySuite) -> FloatArray:
    """Return the earlier values of the paired examples, shape (n, m, H), NaN where unknown.

    For a lower-is-better metric the values are used as they are (the weights depend only on
    spread, not direction).
    """
    history = suite.history or {}
    paired = suite.paired
    depth = max((len(v) for rows in history.values() for v in rows.values()), default=0)
    found = np.full((len(paired.ids), len(paired.metrics), depth), np.nan)
    for j, metric in enumerate(paired.metrics):
        rows = history.get(metric, {})
        for i, example_id in enumerate(paired.ids):
            values = rows.get(example_id, ())
            found[i, j, :len(values)] = values
    return found


def adjust_family(suites: Sequence[FamilySuite], comparisons: list[PairedComparison],
                  options: StatisticsSettings) -> list[PairedComparison]:
    """Return ``comparisons`` with the family's p-values of every ``regression`` test set.

    Args:
        suites: the paired suites of the gate, in config order.
        comparisons: the comparisons of those suites (worker/evals/verdict/comparisons.py).
        options: the base config's ``settings.statistics``.

    Returns:
        The comparisons in the same order; those of a ``regression`` test get ``p_family``,
        ``p_adjusted`` and the adjustment's name, the others are unchanged.
    """
    found = family_p_values(suites, options)
    return [_with(c, found.get((c.suite, c.metric, c.group))) for c in comparisons]


def family_p_values(suites: Sequence[FamilySuite], options: StatisticsSettings
                    ) -> dict[tuple[str, str, str], tuple[float, float]]:
    """Return (marginal p, adjusted p) of every ``regression`` test, by (suite, metric, group).

    Empty when no suite has a ``regression`` rule.
    """
    shares = alpha_shares(suites, options)
    if not shares:
        return {}
    x, scopes, weights, tests = _stack(suites, shares)
    seed = SEED ^ zlib.crc32("\0".join(s.name for s in suites).encode("utf-8"))
    result = test_family(x, scopes, weights, draws=options.draws, seed=seed)
    columns = x.shape[1]
    found: dict[tuple[str, str, str], tuple[float, float]] = {}
    for scope, labels in enumerate(tests):
        for column, test in labels.items():
            k = scope * columns + column
            found[(test.suite, test.metric, test.group)] = (float(result.p_values[k]),
                                                            float(result.p_adjusted[k]))
    return found


def family_arrays(suites: Sequence[FamilySuite], options: StatisticsSettings
                  ) -> tuple[FloatArray, NDArray[np.bool_], FloatArray]:
    """Return the family's inputs: differences x (N, C), scopes (S, N) and shares (S, C).

    What `family_p_values` hands to worker/evals/verdict/multiplicity.py, for a sequential look
    (worker/evals/verdict/sequential.py); x is all zeros and the shares empty when no suite
    has a ``regression`` rule.
    """
    shares = alpha_shares(suites, options)
    x, scopes, weights, _ = _stack(suites, shares)
    return x, scopes, weights


def _with(c: PairedComparison, values: tuple[float, float] | None) -> PairedComparison:
    if values is None or c.test == "none":
        return c
    return replace(c, p_family=values[0], p_adjusted=values[1], adjustment=ADJUSTMENT)


def _stack(suites: Sequence[FamilySuite], shares: Mapping[tuple[str, str, str], float]
           ) -> tuple[FloatArray, NDArray[np.bool_], FloatArray, list[dict[int, _Test]]]:
    """Stack the suites' examples on one axis: x (N, C), scopes (S, N), weights (S, C)."""
    blocks = [weighted_differences(s) for s in suites]
    total = sum(b.shape[0] for b in blocks)
    columns = sum(b.shape[1] for b in blocks)
    x = np.zeros((total, columns))
    scopes: list[NDArray[np.bool_]] = []
    weights: list[FloatArray] = []
    tests: list[dict[int, _Test]] = []
    row = column = 0
    for suite, block in zip(suites, blocks, strict=True):
        n, m = block.shape
        x[row:row + n, column:column + m] = block
        groups = np.array(suite.paired.groups, dtype=object)
        for label in ["", *gated_groups(suite.paired, suite.min_items)[0]]:
            rows = np.zeros(total, dtype=bool)
            rows[row:row + n] = True if not label else groups == label
            share = np.zeros(columns)
            labels: dict[int, _Test] = {}
            for j, metric in enumerate(suite.paired.metrics):
                share[column + j] = shares.get((suite.name, metric, label), 0.0)
                if share[column + j] > 0:
                    labels[column + j] = _Test(suite.name, metric, label)
            scopes.append(rows)
            weights.append(share)
            tests.append(labels)
        row, column = row + n, column + m
    return x, np.array(scopes).reshape(len(scopes), total), np.array(weights).reshape(
        len(weights), columns), tests
