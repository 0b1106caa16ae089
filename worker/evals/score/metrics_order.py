"""Order statistics of the per-example score: ``median_score``, ``min_score``, ``max_score``,
``p10_score`` (pure).

An example's score is the one ``mean_score`` averages (worker/evals/score/example_values.py: the
mean score 0-1 of its scored assertions, 0.0 when the target errored), averaged over the
example's scored repeats, so each example counts once. Over those per-example scores:
``median_score`` is the 50th and ``p10_score`` the 10th percentile (linear interpolation
between order statistics, Hyndman and Fan's type 7, numpy's default), ``min_score`` the
lowest and ``max_score`` the highest. Unscored examples (provider and judge errors) are left
out; with none scored the metrics are absent (unavailable).

They are not means over examples, so the paired rules (``regression``,
``non_inferiority_margin``, ``max_new_failures``, ``max_example_drop``, ``min_detectable``)
do not apply to them: gate ``mean_score`` with those, and these with ``min`` and ``max_drop``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from worker.evals.score.example_values import example_value
from worker.evals.score.metrics_llm import percentile
from worker.evals.types import ExampleResult

#: The metrics of this module.
ORDER_METRICS: tuple[str, ...] = ("median_score", "min_score", "max_score", "p10_score")


def example_scores(results: Sequence[ExampleResult]) -> list[float]:
    """Return one score per example with a scored repeat (mean over its repeats), by first
    appearance."""
    found: dict[str, list[float]] = {}
    for result in results:
        value = example_value(result, "mean_score")
        if value is not None:
            found.setdefault(result.id, []).append(value)
    return [math.fsum(values) / len(values) for values in found.values()]


def order_metrics(results: Sequence[ExampleResult]) -> dict[str, float]:
    """Return the metrics of the module docstring; empty when no example was scored."""
    scores = example_scores(results)
    if not scores:
        return {}
    return {"median_score": percentile(scores, 50), "min_score": min(scores),
            "max_score": max(scores), "p10_score": percentile(scores, 10)}
