"""LLM suite metrics: scores, classification, latency percentiles, cost, tokens, judge errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from worker.evals.score.metrics import KNOWN_METRICS, is_known_metric, suite_metrics
from worker.evals.score.metrics_llm import (
    LOWER_IS_BETTER,
    classification_metrics,
    is_classification,
    lower_is_better,
    percentile,
)
from worker.evals.types import AssertionResult, ExampleResult


def result(expected: object = None, output: object = None, *, passed: bool = True,
           errored: bool = False, unscored: bool = False, latency_ms: float = 0.0,
           cost_usd: float | None = None, usage: dict[str, int] | None = None,
           assertions: tuple[AssertionResult, ...] = (), label: str | None = None,
           ) -> ExampleResult:
    return ExampleResult("x", 1, passed, errored, output, expected, assertions=assertions,
                         latency_ms=latency_ms, cost_usd=cost_usd, usage=usage or {},
                         unscored=unscored, label=label)


def test_classification_matches_scikit_learns_definitions() -> None:
    truth = ["a", "a", "a", "b", "b", "c"]
    pred = ["a", "a", "b", "b", "c", "c"]
    metrics = classification_metrics([result(t, p) for t, p in zip(truth, pred, strict=True)])
    # Per label (precision, recall), worked out by hand from the definitions of
    # sklearn.metrics.precision_recall_fscore_support: a (1, 2/3), b (1/2, 1/2), c (1/2, 1).
    assert metrics["accuracy"] == pytest.approx(4 / 6)
    assert metrics["precision_a"] == 1.0 and metrics["recall_a"] == pytest.approx(2 / 3)
    assert metrics["precision_b"] == 0.5 and metrics["recall_b"] == 0.5
    assert metrics["precision_c"] == 0.5 and metrics["recall_c"] == 1.0
    f1 = {"a": 0.8, "b": 0.5, "c": 2 / 3}
    assert metrics["f1_macro"] == pytest.approx(sum(f1.values()) / 3)
    assert metrics["f1_weighted"] == pytest.approx((3 * 0.8 + 2 * 0.5 + 2 / 3) / 6)
    assert metrics["f1_micro"] == pytest.approx(4 / 6)
    assert metrics["precision_macro"] == pytest.approx(2 / 3)


def test_errored_targets_predict_nothing_and_unscored_examples_are_left_out() -> None:
    results = [result("a", "a"), result("a", None, errored=True, passed=False),
               result("b", None, errored=True, passed=False, unscored=True),
               result("b", "x", label="b")]
    metrics = suite_metrics(results)
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    assert metrics["recall_a"] == 0.5 and metrics["precision_a"] == 1.0
    assert metrics["f1_micro"] == pytest.approx(0.8)  # 2 hits, 0 false positives, 3 examples
    assert metrics["pass_rate"] == pytest.approx(2 / 3)  # the unscored one is no failure
    assert metrics["error_rate"] == 0.5


FREE_TEXT = ["Your refund was sent on Monday.", "We have reset your password.",
             "The parcel left our warehouse today.", "Sorry, that plan is no longer sold."]


def test_classification_metrics_only_for_labels_not_free_text_references() -> None:
    """Field case: a suite of free-text references got `precision_Your refund was sent on
    Monday.` and an `accuracy` of exact matches."""
    free = suite_metrics([result(t, t) for t in FREE_TEXT])
    assert not [m for m in free if m.startswith(("precision_", "recall_", "f1_"))]
    assert "accuracy" not in free and free["pass_rate"] == 1.0
    labels = suite_metrics([result(t, t) for t in ["billing", "bug", "other", "feature request"]
                            * 2])
    assert labels["accuracy"] == 1.0 and labels["precision_feature request"] == 1.0
    assert {m for m in labels if m.startswith("recall_")} == {
        "recall_billing", "recall_bug", "recall_other", "recall_feature request", "recall_macro"}


@pytest.mark.parametrize(("expected", "labels"), [
    (["billing", "bug", "billing", "bug"], True),
    (["a", "b", "c", "a", "b", "c"], True),
    ([1, 2, 1, 2], True),
    (["Paris", "Rome", "Oslo", "Lima"], False),  # short but all distinct: answers, not labels
    (FREE_TEXT * 2, False),
    (["billing", "bug", "billing", "a very long label indeed"], False),
    (["yes\nno", "yes\nno"], False),
    ([{"label": "a"}, {"label": "a"}], False),
    ([str(i % 21) for i in range(84)], False),  # more than 20 labels
])
def test_what_makes_expected_values_labels(expected: list[object], labels: bool) -> None:
    assert is_classification([result(e, e) for e in expected]) is labels


def test_a_classification_assertion_makes_any_suite_a_classification() -> None:
    check = AssertionResult("classification", True, 1.0, details={"label": "Paris"})
    results = [result(t, t, assertions=(check,)) for t in ["Paris", "Rome"]]
    assert is_classification(results) and "accuracy" in suite_metrics(results)
    repeated = [replace(result(t, t), repeat=r) for t in FREE_TEXT[:2] for r in range(4)]
    assert not is_classification(repeated)  # repeats do not make references labels


def test_percentiles_match_numpys_linear_method() -> None:
    values = [120.0, 80.0, 300.0, 95.0, 101.0, 99.0, 1000.0]
    for q in (50, 90, 99):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))
    metrics = suite_metrics([result(latency_ms=v) for v in values]
                            + [result(latency_ms=5000.0, errored=True, passed=False)])
    assert metrics["latency_p50"] == 101.0  # the errored example's time is left out
    assert metrics["latency_p99"] == pytest.approx(np.percentile(values, 99))


def test_cost_tokens_and_scores() -> None:
    judge = AssertionResult("llm_judge", True, 0.75)
    broken = AssertionResult("llm_judge", False, 0.0, "judge error", errored=True)
    results = [
        result(cost_usd=0.0024, usage={"input": 1000, "output": 200}, assertions=(judge,)),
        result(cost_usd=0.0016, usage={"input": 500, "output": 100},
               assertions=(AssertionResult("llm_judge", False, 0.25),), passed=False),
        result(usage={"input": 0, "output": 0}, assertions=(broken,), unscored=True,
               passed=False)]
    metrics = suite_metrics(results)
    assert metrics["cost_total"] == 0.004 and metrics["cost_mean"] == 0.002
    assert metrics["tokens_in_mean"] == 500 and metrics["tokens_out_mean"] == 100
    assert metrics["mean_score"] == 0.5 and metrics["assertion.llm_judge.mean_score"] == 0.5
    assert metrics["assertion.llm_judge.pass_rate"] == 0.5
    assert metrics["judge_error_rate"] == pytest.approx(1 / 3)
    assert "cost_total" not in suite_metrics([result()])  # unknown cost: unavailable


def test_metric_names_and_directions() -> None:
    for name in ("mean_score", "accuracy", "f1_macro", "latency_p90", "cost_total",
                 "tokens_out_mean", "win_rate", "judge_trap_accuracy", "precision_billing",
                 "recall_shipping", "assertion.llm_judge.mean_score", "judge_error_rate"):
        assert is_known_metric(name), name
    assert not is_known_metric("latency_p75") and not is_known_metric("bleu")
    assert set(LOWER_IS_BETTER) <= set(KNOWN_METRICS)
    assert lower_is_better("latency_p99") and lower_is_better("cost_mean")
    assert not lower_is_better("win_rate") and not lower_is_better("accuracy")
