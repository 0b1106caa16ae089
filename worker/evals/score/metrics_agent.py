"""Metrics of agent suites, from the traces of the answered examples (pure).

Each is the mean of one value per example, so base and head are compared example by example
(worker/evals/score/example_values.py); an example whose target errored, that is unscored, or
that reported no trace has no value:

- ``tool_success_rate``: the example's tool calls without an error / its tool calls (an
  example without tool calls has no value); the suite's value is the mean over examples (a
  macro average: each example weighs the same, however many calls it made).
- ``mean_steps``: the example's ``trace.steps`` (examples reporting steps).
- ``mean_tool_calls``: the number of the example's tool calls.

``mean_steps`` and ``mean_tool_calls`` are lower-is-better (gate them with ``max`` and
``max_increase``). A metric no example has a value for is absent: unavailable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from worker.evals.types import ExampleResult

AGENT_METRICS: tuple[str, ...] = ("tool_success_rate", "mean_steps", "mean_tool_calls")
AGENT_LOWER_IS_BETTER: tuple[str, ...] = ("mean_steps", "mean_tool_calls")


def agent_value(result: ExampleResult, metric: str) -> float:
    """Return one example's value of an agent metric (module docstring), NaN when none."""
    trace = result.trace
    if trace is None or result.errored or result.unscored:
        return math.nan
    if metric == "mean_tool_calls":
        return float(len(trace.tool_calls))
    if metric == "mean_steps":
        return math.nan if trace.steps is None else float(trace.steps)
    calls = trace.tool_calls
    return sum(c.error is None for c in calls) / len(calls) if calls else math.nan


def agent_metrics(results: Sequence[ExampleResult]) -> dict[str, float]:
    """Compute the metrics of the module docstring from a suite's example results."""
    metrics = {}
    for metric in AGENT_METRICS:
        values = [v for v in (agent_value(r, metric) for r in results) if not math.isnan(v)]
        if values:
            metrics[metric] = math.fsum(values) / len(values)
    return metrics
