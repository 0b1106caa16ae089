"""The CAT consistency metrics on hand-computed cases (worker/evals/score/consistency.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.unit.evals.score.consistency_support import question, results_for, scored
from worker.evals.config.consistency import expand
from worker.evals.score.consistency import (
    aga,
    car_curve,
    consistency_metrics,
    core,
    core_closed,
    dtw,
    intervals,
    mca,
    questions,
    rc,
)
from worker.evals.score.example_values import example_value
from worker.evals.score.metrics import is_known_metric, suite_metrics
from worker.evals.types import ConsistencySpec, PerturbationSpec


def test_all_stable_and_right() -> None:
    found = questions(results_for({"q1": "AAAA", "q2": "AAAA"}))
    assert [(q.rc_correct, q.rc_agree) for q in found] == [(1.0, 1.0), (1.0, 1.0)]
    correct = [1.0, 1.0]
    assert car_curve(correct) == [(k / 10, 1.0) for k in range(11)]
    assert core(correct) == 1.0
    assert aga(correct, [1.0, 1.0], 1.0) == 1.0


def test_stable_but_wrong() -> None:
    # every variant names option B; A is right: fully agreeing, never correct
    (q,) = questions(results_for({"q1": "BBBB"}))
    assert (q.rc_correct, q.rc_agree) == (0.0, 1.0)
    curve = [m for _, m in car_curve([0.0])]
    assert curve == [1.0] + [0.0] * 10  # the worst curve: normDTW 0, so CORE 0
    assert core([0.0]) == 0.0
    assert aga([0.0], [1.0], 1.0) == 0.0
    assert mca([0.0], 0.0) == 1.0 and mca([0.0], 0.1) == 0.0


def test_unstable_but_sometimes_right() -> None:
    (q,) = questions(results_for({"q1": "AABC"}))
    assert (q.rc_correct, q.rc_agree) == (0.5, 0.5)
    # MCA is 1 up to c = 0.5 and 0 above: AUCAR = 0.5 + 0.05 = 0.55; DTW to the ideal is 5
    # (five zeros), DTW(ideal, worst) is 10, so normDTW = 0.5 and CORE = 0.275
    assert dtw([m for _, m in car_curve([0.5])], [1.0] * 11) == 5.0
    assert core([0.5]) == pytest.approx(0.275, abs=1e-12)
    assert aga([0.5], [0.5], 0.5) == 0.5
    assert aga([0.5], [0.5], 0.75) == 0.0


def test_the_three_together() -> None:
    results = results_for({"q1": "AAAA", "q2": "AAAA", "q3": "BBBB", "q4": "AABC"})
    metrics = consistency_metrics(results)
    # RC_correct (1, 1, 0, 0.5): MCA 1 at c=0, 0.75 to 0.5, 0.5 above. AUCAR = 0.0875 + 0.3 +
    # 0.0625 + 0.2 = 0.65; DTW = 5 x 0.25 + 5 x 0.5 = 3.75, normDTW = 0.625; CORE = 0.40625
    assert metrics["core"] == pytest.approx(0.40625, abs=1e-12)
    assert metrics["rc_correct"] == pytest.approx(0.625)
    assert metrics["rc_agree"] == pytest.approx(0.875)
    assert metrics["mca"] == 0.5  # MCA(1.0), the default threshold
    assert metrics["aga"] == pytest.approx(2 / 3)  # q1, q2, q3 agree fully
    assert metrics["original_accuracy"] == 0.75  # q3's original is wrong
    assert metrics["unparseable_rate"] == 0.0
    assert suite_metrics(results)["core"] == metrics["core"]
    assert all(is_known_metric(m) for m in metrics)


def test_unparseable_answers_are_counted_wrong_and_agree_with_nothing() -> None:
    results = results_for({"q1": ["A", None, None, "A"]})
    (q,) = questions(results)
    assert (q.rc_correct, q.rc_agree) == (0.5, 0.5)  # the two unreadable replies never agree
    assert consistency_metrics(results)["unparseable_rate"] == 0.5
    assert [r.passed for r in results] == [True, False, False, True]
    assert "unparseable" in results[1].assertions[0].message
    assert rc([(None, False), (None, False)]) == (0.0, 0.5)


def test_errored_variants_are_wrong_and_unscored_ones_left_out() -> None:
    examples = expand((question("q1"),), ConsistencySpec(
        (PerturbationSpec("format_change", 2),)), "q.jsonl")
    results = [scored(examples[0], "A"), scored(examples[1], None, errored=True),
               scored(examples[2], None, errored=True, unscored=True)]
    (q,) = questions(results)
    assert len(q.answers) == 2 and (q.rc_correct, q.rc_agree) == (0.5, 0.5)
    assert consistency_metrics(results)["unparseable_rate"] == 0.0


def test_thresholds_come_from_the_suite() -> None:
    spec = ConsistencySpec((PerturbationSpec("option_reorder", 3),), mca_threshold=0.5,
                           agreement=0.5)
    metrics = consistency_metrics(results_for({"q1": "AABC", "q2": "BBBB"}, spec))
    assert metrics["mca"] == 0.5  # q1 has RC_correct 0.5 >= 0.5
    assert metrics["aga"] == 0.25  # both agree >= 0.5: mean of 0.5 and 0


def test_per_question_values_sit_on_the_original_variant() -> None:
    results = results_for({"q1": "AABC", "q2": "AAAA"})
    values = [example_value(r, "rc_agree") for r in results]
    assert values == [0.5, None, None, None, 1.0, None, None, None]
    assert [example_value(r, "original_accuracy") for r in results[::4]] == [1.0, 1.0]


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate() -> None:
    results = results_for({f"q{i}": "AAAA" if i % 3 else "AABC" for i in range(12)})
    found = questions(results)
    metrics = consistency_metrics(results)
    got = intervals(found, 1.0, 1.0, seed=3)
    assert got == intervals(found, 1.0, 1.0, seed=3)
    for name, (low, high) in got.items():
        assert low <= metrics[name] <= high, name
    assert got["core"][0] < got["core"][1]
    assert intervals(found[1:2], 1.0, 1.0)["core"] == (1.0, 1.0)


def test_closed_form_core_of_the_intervals_equals_the_dtw() -> None:
    rng = np.random.default_rng(0)
    rows = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=(50, 7))
    closed = core_closed(rows)
    for row, value in zip(rows, closed, strict=True):
        assert float(value) == pytest.approx(core(list(row)), abs=1e-12)


def test_empty_suite_has_no_metrics() -> None:
    assert consistency_metrics([]) == {}
    assert core([]) == 0.0 and mca([], 0.5) == 0.0 and not math.isnan(aga([], [], 1.0))
