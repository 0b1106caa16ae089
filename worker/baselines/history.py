"""Per-example flakiness evidence from stored baselines of earlier commits (pure).

A stored baseline (worker/baselines/store.py) is one suite's result at one commit under a
`BaselineKey`: the suite's config, dataset and fingerprint (target, prompt, files on its
command line, assertions, judges: worker/evals/run/fingerprint.py). Two records with the same
key at different commits are two runs of the same examples with nothing that produces or
scores their outputs changed: an A/A pair, like the runs of ``llmgate calibrate``. An example
whose value differs between them flipped under no change, which is the evidence of flakiness
worker/evals/verdict/flakiness.py turns into weights.

`stored_history` returns those values in the gate's ``history`` shape (suite -> metric ->
example id -> one value per earlier run), which worker/pipeline/trees.py hands to the sign-flip
family with the calibration's.

Two rules keep the weights honest:

- **This pull request's own base draw is left out** (``exclude_sha``, the base commit being
  gated). The sign-flip family keeps its false-alarm rate only when the weights are fixed
  without looking at the data being tested (worker/evals/verdict/multiplicity.py: under no
  change the observed signs must be fair coins independent of the weights). Weights computed
  from base's own values would depend on the draw that is tested: an example that happened to
  fail at base would look flaky and count for less exactly when it is the example that could
  show a regression. So the weights are the same whether or not base's result is in the store
  (tests/unit/baselines/test_history.py checks it).
- **Cached answers are not draws.** An example whose target answer came from the response
  cache repeats an earlier answer; counting it would make every cached example look perfectly
  stable. Such an example is left out of that run (NaN), as is an unscored one.

Weights change power, never the false-alarm rate, as long as they do not depend on the pull
request's draws: the sign-flip null holds given the |head - base| of every example, so any
weights fixed without the observed signs keep the level (Pesarin 2001, *Multivariate
Permutation Tests*, ch. 2; the argument of worker/evals/verdict/multiplicity.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from worker.baselines.store import Baseline
from worker.evals.score import example_value
from worker.evals.types import ExampleResult

#: Most earlier stored runs of one suite key read for weights (the newest first).
MAX_STORED_RUNS = 10
#: suite -> metric -> example id -> values of earlier runs (fractions 0-1 for rates).
History = dict[str, dict[str, dict[str, list[float]]]]


def stored_history(records: Sequence[Baseline], metrics: Mapping[str, Sequence[str]],
                   exclude_sha: str) -> History:
    """Return the examples' values in earlier stored runs, the gate's ``history`` shape.

    Args:
        records: stored baselines, each one suite at one commit; only those whose key equals
            another record's of the same suite are comparable, so the caller passes records
            of one `BaselineKey` per suite (worker/baselines/reuse.py).
        metrics: suite name -> the gate's metrics with per-example values
            (worker/evals/score/example_values.py `has_example_values`).
        exclude_sha: the commit being gated as base; its records are never read (module
            docstring), nor is any record of a suite not in ``metrics``.

    Returns:
        suite -> metric -> example id -> one value per record, newest record first, each the
        mean over the example's repeats in that run (0-1 for pass/fail metrics); NaN where the
        example was cached, unscored or has no value of the metric in that run. A suite with
        no usable record is absent.
    """
    found: History = {}
    usable = [r for r in records if r.sha != exclude_sha and r.result.name in metrics]
    usable.sort(key=lambda r: -r.created_at)
    runs: dict[str, int] = {}
    for record in usable:
        suite = record.result.name
        if runs.get(suite, 0) >= MAX_STORED_RUNS:
            continue
        index = runs.get(suite, 0)
        runs[suite] = index + 1
        rows = found.setdefault(suite, {})
        for metric in metrics[suite]:
            values = _run_values(record.result.examples, metric)
            column = rows.setdefault(metric, {})
            for example_id in values.keys() | column.keys():
                column.setdefault(example_id, [math.nan] * index).append(
                    values.get(example_id, math.nan))
    return found


def merged(first: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]],
           second: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]]) -> History:
    """Return two histories as one: per suite, metric and example, ``first``'s runs then
    ``second``'s (an example absent from one side gets NaN for that side's runs)."""
    found: History = {}
    for suite in first.keys() | second.keys():
        left, right = first.get(suite, {}), second.get(suite, {})
        rows: dict[str, dict[str, list[float]]] = {}
        for metric in left.keys() | right.keys():
            a, b = left.get(metric, {}), right.get(metric, {})
            depth_a = max((len(v) for v in a.values()), default=0)
            depth_b = max((len(v) for v in b.values()), default=0)
            rows[metric] = {i: _padded(a.get(i, ()), depth_a) + _padded(b.get(i, ()), depth_b)
                            for i in a.keys() | b.keys()}
        found[suite] = rows
    return found


def _padded(values: Sequence[float], depth: int) -> list[float]:
    return [*values, *([math.nan] * (depth - len(values)))]


def _run_values(examples: Sequence[ExampleResult], metric: str) -> dict[str, float]:
    """Example id -> the mean of ``metric`` over its usable repeats in one run (none: absent)."""
    draws: dict[str, list[float]] = {}
    for result in examples:
        value = None if result.cached or result.unscored else example_value(result, metric)
        draws.setdefault(result.id, [])
        if value is not None:
            draws[result.id].append(value)
    return {i: sum(v) / len(v) if v else math.nan for i, v in draws.items()}
