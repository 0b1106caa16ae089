"""One number per example and metric: the values the paired statistics compare (pure).

A suite metric that is a mean over examples (worker/evals/score/metrics.py, metrics_llm.py) is the
mean of these values, so base and head can be compared example by example:

- ``pass_rate``: 1.0 passed, 0.0 failed, none when unscored;
- ``error_rate``: 1.0 when the target errored, none when it is unscored for it (base's target
  gave no answer: `target_left_out`); ``judge_error_rate``: 1.0 when an assertion errored;
- ``assertion.<type>.pass_rate``: 1.0 when every scored assertion of that type passed (and the
  target did not error); none when it has none, or when the example has no answer;
- ``mean_score`` / ``assertion.<type>.mean_score``: the mean score (0-1) of the scored
  assertions (of that type), 0.0 when the target errored; none when unscored;
- ``cost_mean`` (USD, answered examples), ``tokens_in_mean``, ``tokens_out_mean``;
- ``rc_correct``, ``rc_agree``, ``original_accuracy`` (consistency suites): the question's value
  on its original variant, none on the others (worker/evals/score/consistency.py).
- the RAG metrics (``recall_at_k``, ``faithfulness``...): as ``assertion.<name>.mean_score``.
- ``custom.<name>``: the value a per-example custom metric gave the example
  (worker/evals/score/custom_metrics.py), none without one.
- the agent metrics of worker/evals/score/metrics_agent.py (``tool_success_rate``,
  ``mean_steps``, ``mean_tool_calls``).

Percentiles, totals and classification metrics have no per-example value. Extraction walks each
example's assertions once (10,000 examples x 10 metrics in a few tens of milliseconds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from worker.evals.score.consistency import PER_QUESTION, question_value
from worker.evals.score.metrics_agent import AGENT_METRICS, agent_value
from worker.evals.score.metrics_llm import RAG_METRICS
from worker.evals.types import ExampleResult

_ASSERTION_METRIC = re.compile(r"assertion\.(?P<type>.+)\.(?P<kind>pass_rate|mean_score)\Z")
NAN = math.nan

#: Scores of the scored assertions by type, the types with a failed scored assertion, and the
#: scores of every scored assertion.
_Checks = tuple[dict[str, list[float]], set[str], list[float]]
Extractor = Callable[[ExampleResult, _Checks], float]


def has_example_values(metric: str) -> bool:
    """Return True when ``metric`` is a mean of per-example values."""
    return extractor(metric) is not None


def example_value(result: ExampleResult, metric: str) -> float | None:
    """Return one example's value of ``metric`` (module docstring), or None when none applies."""
    extract = extractor(metric)
    value = NAN if extract is None else extract(result, _checks(result))
    return None if math.isnan(value) else value


def values_array(rows: Sequence[Sequence[ExampleResult]], metrics: Sequence[str],
                 depth: int) -> NDArray[np.float64]:
    """Return values of shape (len(rows), len(metrics), depth): example, metric, repeat.

    ``rows[i]`` holds the repeats of example i (at most ``depth``); NaN marks a metric that does
    not apply, a metric without per-example values, or a missing repeat.
    """
    extractors = [extractor(m) or _none for m in metrics]
    filler = [NAN] * len(metrics)
    table: list[list[float]] = []
    for repeats in rows:
        for result in repeats:
            checks = _checks(result)
            table.append([f(result, checks) for f in extractors])
        table.extend([filler] * (depth - len(repeats)))
    values = np.array(table, dtype=np.float64).reshape(len(rows), depth, len(metrics))
    return values.transpose(0, 2, 1).copy()


def _none(result: ExampleResult, checks: _Checks) -> float:
    return NAN


def extractor(metric: str) -> Extractor | None:
    """Return the function giving one example's value of ``metric``, or None when it has none."""
    usage = _USAGE_EXTRACTORS.get(metric)
    if usage is not None:
        return usage
    if metric == "pass_rate":
        return lambda result, _: NAN if result.unscored else float(result.passed)
    if metric == "mean_score":
        return _mean_of_all
    if metric in PER_QUESTION:  # consistency suites: one value per question, on its original
        return lambda result, _: _or_nan(question_value(result, metric))
    if metric in RAG_METRICS:
        metric = f"assertion.{metric}.mean_score"
    if metric.startswith("custom."):  # a per-example custom metric's own values
        name = metric.removeprefix("custom.")
        return lambda result, _: result.custom.get(name, NAN)
    if metric in AGENT_METRICS:
        return lambda result, _: agent_value(result, metric)
    match = _ASSERTION_METRIC.match(metric)
    if match is None:
        return None
    kind = match["type"]
    if match["kind"] == "mean_score":
        return lambda result, checks: _mean_score(result, checks[0].get(kind))
    return lambda result, checks: _pass(result, checks, kind)


def _or_nan(value: float | None) -> float:
    return NAN if value is None else value


def _checks(result: ExampleResult) -> _Checks:
    scores: dict[str, list[float]] = {}
    failed: set[str] = set()
    every: list[float] = []
    for a in result.assertions:
        if a.errored:
            continue
        every.append(a.score)
        found = scores.get(a.type)
        if found is None:
            scores[a.type] = [a.score]
        else:
            found.append(a.score)
        if not a.passed:
            failed.add(a.type)
    return scores, failed, every


def _pass(result: ExampleResult, checks: _Checks, kind: str) -> float:
    if kind not in checks[0] or (result.unscored and result.errored):
        return NAN
    return float(kind not in checks[1] and not result.errored)


def _mean_of_all(result: ExampleResult, checks: _Checks) -> float:
    return _mean_score(result, checks[2] or None)


def _mean_score(result: ExampleResult, scores: list[float] | None) -> float:
    if scores is None or result.unscored:
        return NAN
    return 0.0 if result.errored else math.fsum(scores) / len(scores)


def target_left_out(result: ExampleResult) -> bool:
    """Whether ``result`` is unscored because its target gave no answer (error kind
    ``target``): only base's are, since base has no verdict there (worker/evals/verdict/
    base_targets.py); such an example is left out of ``error_rate`` too."""
    return result.unscored and result.errored and result.error_kind == "target"


def _error_rate(result: ExampleResult, checks: _Checks) -> float:
    return NAN if target_left_out(result) else float(result.errored)


def _judge_error_rate(result: ExampleResult, checks: _Checks) -> float:
    return float(any(a.errored for a in result.assertions))


def _cost(result: ExampleResult, checks: _Checks) -> float:
    return NAN if result.cost_usd is None or result.errored else float(result.cost_usd)


def _tokens(key: str) -> Extractor:
    def tokens(result: ExampleResult, checks: _Checks) -> float:
        return float(result.usage[key]) if key in result.usage else NAN
    return tokens


#: The extractors of the usage metrics, made once (a metric's name is not compared per
#: example).
_USAGE_EXTRACTORS: dict[str, Extractor] = {
    "error_rate": _error_rate, "judge_error_rate": _judge_error_rate, "cost_mean": _cost,
    "tokens_in_mean": _tokens("input"), "tokens_out_mean": _tokens("output"),
}
