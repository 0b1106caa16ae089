"""Per-example values: their mean is exactly the suite metric, for every paired metric."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worker.evals.score.example_values import example_value, has_example_values, values_array
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import AssertionResult, ExampleResult


def varied_results() -> list[ExampleResult]:
    rng = np.random.default_rng(8)
    results = []
    for i in range(60):
        checks = [AssertionResult("equals", bool(rng.random() < 0.7), 0.0),
                  AssertionResult("llm_judge", False, float(rng.random()),
                                  errored=bool(rng.random() < 0.1))]
        checks[0] = AssertionResult("equals", checks[0].passed, float(checks[0].passed))
        if i % 7 == 0:
            checks.append(AssertionResult("regex", i % 2 == 0, float(i % 2 == 0)))
        errored = i % 11 == 0
        unscored = any(c.errored for c in checks) or i % 13 == 0
        results.append(ExampleResult(
            f"e{i}", i + 1, not errored and not unscored and all(c.passed for c in checks),
            errored, None if errored else "o", "want", None, tuple(checks),
            cost_usd=None if i % 5 == 0 else float(rng.random() / 100),
            usage={} if i % 4 == 0 else {"input": int(rng.integers(10, 99)), "output": 7},
            unscored=unscored))
    return results


METRICS = ["pass_rate", "error_rate", "judge_error_rate", "mean_score",
           "assertion.equals.pass_rate", "assertion.regex.pass_rate",
           "assertion.equals.mean_score", "assertion.llm_judge.mean_score",
           "assertion.llm_judge.pass_rate", "cost_mean", "tokens_in_mean", "tokens_out_mean"]


@pytest.mark.parametrize("metric", METRICS)
def test_mean_of_example_values_is_the_suite_metric(metric: str) -> None:
    results = varied_results()
    expected = suite_metrics(results)[metric]
    values = [v for r in results if (v := example_value(r, metric)) is not None]
    assert has_example_values(metric)
    # abs 1e-12: metrics_llm rounds cost_mean to 12 decimals.
    assert math.fsum(values) / len(values) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    array = values_array([[r] for r in results], [metric], 1)[:, 0, 0]
    assert np.nanmean(array) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_metrics_without_per_example_values() -> None:
    for metric in ("latency_p50", "cost_total", "accuracy", "f1_macro", "win_rate"):
        assert not has_example_values(metric)
        assert example_value(varied_results()[0], metric) is None
    assert np.isnan(values_array([[varied_results()[0]]], ["latency_p90"], 2)).all()
