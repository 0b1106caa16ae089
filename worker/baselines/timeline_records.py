"""Build the quality history's records from runs and gate reports (pure; no I/O).

What worker/baselines/timeline.py writes: per suite and side a `SuiteRecord` (every metric with
its 95% interval, the gate's delta and interval where the report has one, the rule verdicts,
cost and calls) and the examples as compact rows (`ExampleRows`), shapes of
worker/history_contract.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from worker.evals.score import example_value, has_example_values
from worker.evals.types import (
    ExampleResult,
    GateReport,
    PairedComparison,
    RuleOutcome,
    RunResult,
    SuiteResult,
)
from worker.history_contract import (
    ERRORED,
    FAILED,
    PASSED,
    UNSCORED,
    ExampleRows,
    MetricRecord,
    Side,
    SuiteRecord,
    VerdictRecord,
    dumps,
    encode_examples,
    example_field,
    suite_field,
)

#: Most value columns of a suite's examples (`ExampleRows.metrics`).
MAX_EXAMPLE_METRICS = 8
#: Metrics whose per-example value the row's status already says, or that are usage.
_NOT_COLUMNS = frozenset({"pass_rate", "error_rate", "judge_error_rate", "cost_mean",
                          "tokens_in_mean", "tokens_out_mean"})
#: z of a two-sided 95% interval.
_Z95 = 1.959963984540054


def interval(values: Sequence[float]) -> tuple[float, float] | None:
    """Return a 95% interval of the mean of ``values``, or None for fewer than 2.

    Values all 0 or 1 (pass/fail) get the Wilson score interval (Wilson 1927; Agresti & Coull
    1998, "Approximate is better than exact"), which stays inside [0, 1] and is sound at rates
    near 0 or 1; other values the normal approximation mean +- 1.96 * sd / sqrt(n).
    """
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    if all(v in (0.0, 1.0) for v in values):
        z2 = _Z95 * _Z95
        centre = (mean + z2 / (2 * n)) / (1 + z2 / n)
        half = _Z95 * math.sqrt(mean * (1 - mean) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        return max(centre - half, 0.0), min(centre + half, 1.0)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = _Z95 * sd / math.sqrt(n)
    return mean - half, mean + half


def _round(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 4)


def metric_records(result: SuiteResult,
                   compared: Sequence[PairedComparison] = ()) -> dict[str, MetricRecord]:
    """Return each metric of ``result`` with its interval (`interval`, where the metric has
    per-example values) and, from ``compared`` (the gate's whole-suite comparisons), its
    delta, delta interval and adjusted p-value."""
    found: dict[str, MetricRecord] = {}
    deltas = {c.metric: c for c in compared if c.suite == result.name and not c.group}
    for name, value in sorted(result.metrics.items()):
        record = MetricRecord(value=float(value))
        values = [v for r in result.examples if (v := example_value(r, name)) is not None] \
            if has_example_values(name) else []
        if (ci := interval(values)) is not None:
            record["ci_low"], record["ci_high"] = ci
        if (c := deltas.get(name)) is not None:
            for key, got in (("delta", c.delta), ("delta_ci_low", c.ci_low),
                             ("delta_ci_high", c.ci_high), ("p_adjusted", c.p_adjusted)):
                if got is not None and math.isfinite(got):
                    record[key] = float(got)  # type: ignore[literal-required]  # keys above
        found[name] = record
    return found


def example_rows(result: SuiteResult) -> ExampleRows:
    """Return ``result``'s examples, one compact row per example id (`ExampleRows`).

    The value columns are the suite's metrics with per-example values but those the status
    says (pass and error rates) and usage, pass rates first, at most `MAX_EXAMPLE_METRICS`; a
    column equal to an earlier one on every example (the mean score of a pass/fail assertion)
    is left out.
    """
    names = sorted((m for m in result.metrics if m not in _NOT_COLUMNS and has_example_values(m)),
                   key=lambda m: (not m.endswith("pass_rate"), m))
    draws: dict[str, list[ExampleResult]] = {}
    for example in result.examples:
        draws.setdefault(example.id, []).append(example)
    columns: dict[str, list[float | None]] = {}
    for metric in names:
        values = [_mean([example_value(r, metric) for r in repeats]) for repeats in draws.values()]
        if values not in columns.values() and len(columns) < MAX_EXAMPLE_METRICS:
            columns[metric] = values
    rows = [[example_id, repeats[0].line, example_status(repeats),
             *(c[i] for c in columns.values())]
            for i, (example_id, repeats) in enumerate(draws.items())]
    return ExampleRows(dataset=result.dataset, metrics=list(columns), rows=rows)


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return _round(sum(got) / len(got)) if got else None


def example_status(repeats: Sequence[ExampleResult]) -> int:
    """Return an example's status code over its draws (`ExampleRows`): `UNSCORED` when no
    draw was scored, `ERRORED` when a scored one errored, `PASSED` when every scored one
    passed, else `FAILED`."""
    scored = [r for r in repeats if not r.unscored]
    if not scored:
        return UNSCORED
    if any(r.errored for r in scored):
        return ERRORED
    return PASSED if all(r.passed for r in scored) else FAILED


def suite_record(name: str, side: Side, result: SuiteResult,
                 outcomes: Sequence[RuleOutcome] = (),
                 compared: Sequence[PairedComparison] = ()) -> SuiteRecord:
    """Return the record of suite ``result`` (shown as ``name``) at ``side``; ``outcomes`` and
    ``compared`` are the gate's (head side), filtered here to the suite."""
    verdicts = [VerdictRecord(metric=o.metric, rule=o.rule, status=o.status, group=o.group,
                              reason=o.reason[:300])
                for o in outcomes if o.suite == result.name]
    return SuiteRecord(
        suite=name, side=side, dataset=result.dataset, examples=len(result.examples),
        passed=sum(1 for e in result.examples if e.passed),
        metrics=metric_records(result, compared), verdicts=verdicts,
        cost_usd=round(result.spend.cost_usd, 6), provider_calls=result.spend.provider_calls,
        cache_hits=result.spend.cache_hits, stopped=result.stopped or "")


def scoped_suite(folder: str, suite: str) -> str:
    """Return a suite as the history names it: ``<folder>: <suite>`` in a config's folder."""
    return f"{folder}: {suite}" if folder else suite


def suite_fields(folder: str, side: Side, run: RunResult | None, report: GateReport | None,
                  ) -> tuple[list[str], list[str | bytes]]:
    """Return (run hash field/value pairs, examples hash pairs) of a run's suites at a side."""
    fields: list[str] = []
    blobs: list[str | bytes] = []
    for result in (run.suites.values() if run is not None else ()):
        name = scoped_suite(folder, result.name)
        outcomes = report.outcomes if report is not None and side == "head" else ()
        compared = report.comparisons if report is not None and side == "head" else ()
        fields += [suite_field(side, name), dumps(suite_record(name, side, result, outcomes,
                                                                compared))]
        blobs += [example_field(side, name), encode_examples(example_rows(result))]
    return fields, blobs
