"""Tests of `worker.evals.score.metrics`."""

from __future__ import annotations

import pytest

from worker.evals.score.metrics import KNOWN_METRICS, is_known_metric, suite_metrics
from worker.evals.types import AssertionResult, ExampleResult


def result(passed: bool, *assertions: tuple[str, bool], errored: bool = False) -> ExampleResult:
    checks = tuple(AssertionResult(kind, ok, float(ok)) for kind, ok in assertions)
    return ExampleResult("x", 1, passed, errored, None, None, assertions=checks)


def test_empty_suite_has_no_metrics() -> None:
    assert suite_metrics([]) == {}


def test_rates() -> None:
    results = [
        result(True, ("equals", True), ("contains", True)),
        result(False, ("equals", False), ("contains", True)),
        result(False, ("equals", False), ("contains", False), errored=True),
        result(True, ("contains", True), ("contains", True)),
        result(False, ("contains", True), ("contains", False)),
    ]
    metrics = suite_metrics(results)
    assert list(metrics)[:4] == ["pass_rate", "error_rate", "assertion.contains.pass_rate",
                                 "assertion.equals.pass_rate"]
    assert metrics["pass_rate"] == pytest.approx(2 / 5)
    assert metrics["error_rate"] == pytest.approx(1 / 5)
    # equals ran on 3 examples and passed on 1; contains ran on all 5, fully passed on 3.
    assert metrics["assertion.equals.pass_rate"] == pytest.approx(1 / 3)
    assert metrics["assertion.contains.pass_rate"] == pytest.approx(3 / 5)


def test_errored_example_fails_its_assertions_even_if_marked_passed() -> None:
    metrics = suite_metrics([result(False, ("regex", True), errored=True)])
    assert metrics == {"pass_rate": 0.0, "error_rate": 1.0, "assertion.regex.pass_rate": 0.0,
                       "judge_error_rate": 0.0, "mean_score": 0.0,
                       "assertion.regex.mean_score": 0.0, "median_score": 0.0,
                       "min_score": 0.0, "max_score": 0.0, "p10_score": 0.0}


def test_known_metrics() -> None:
    assert KNOWN_METRICS[:2] == ("pass_rate", "error_rate")
    assert is_known_metric("assertion.not_contains.pass_rate")
    assert not is_known_metric("assertion.fuzzy.pass_rate")
    assert not is_known_metric("accuracy_typo")
