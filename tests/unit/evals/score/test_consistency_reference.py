"""llmgate's consistency metrics equal llm-consistency's on the same recorded answers.

The package (a test-only dependency) is the reference implementation of the CAT framework
(Cavalin et al., 2025). Both get the same answers: each variant's option (by its dataset
label) and whether it is right, for questions with 3 to 9 answered variants.
"""

from __future__ import annotations

import random

import pytest

from tests.unit.evals.score.consistency_support import question, scored
from worker.evals.config.consistency import expand
from worker.evals.score.consistency import THRESHOLDS, aga, car_curve, core, mca, questions
from worker.evals.types import ConsistencySpec, PerturbationSpec

lc = pytest.importorskip("llm_consistency.metrics")

SPEC = ConsistencySpec((PerturbationSpec("option_reorder", 5),
                        PerturbationSpec("format_change", 3)), seed=11)


def _recorded(count: int, seed: int) -> list:  # type: ignore[type-arg]
    """Example results of ``count`` questions: each variant names a random option (the
    right one A more often), all parseable (the package keys unreadable replies by raw text)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        examples = expand((question(f"q{i}"),), SPEC, "q.jsonl")[:rng.randint(3, 9)]
        bias = rng.random()
        for example in examples:
            option = "A" if rng.random() < bias else rng.choice("BCD")
            shown = {o[1]: o[0] for o in example.metadata["consistency"]["options"]}
            out.append(scored(example, f"The answer is {shown[option]}."))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_metrics_equal_the_packages(seed: int) -> None:
    found = questions(_recorded(40, seed))
    reference = [lc.build_question_consistency_result(
        q.id, [(str(a.option), a.right) for a in q.answers]) for q in found]
    for ours, theirs in zip(found, reference, strict=True):
        assert ours.rc_correct == pytest.approx(theirs.rc_correct, abs=1e-9)
        assert ours.rc_agree == pytest.approx(theirs.rc_agree, abs=1e-9)
    correct = [q.rc_correct for q in found]
    agree = [q.rc_agree for q in found]
    for c in (*THRESHOLDS, 0.33, 0.85):
        assert mca(correct, c) == pytest.approx(lc.mca(reference, c), abs=1e-9)
    assert [m for _, m in car_curve(correct)] == pytest.approx(
        [m for _, m in lc.car_curve(reference)], abs=1e-9)
    assert core(correct) == pytest.approx(lc.core_index(reference), abs=1e-9)
    for tau in (0.0, 0.5, 0.75, 1.0):
        assert aga(correct, agree, tau) == pytest.approx(
            lc.agreement_gated_accuracy(reference, tau), abs=1e-9)
    assert 0.0 < core(correct) < 1.0  # a case that exercises the curve, not an endpoint


def test_the_packages_own_cases() -> None:
    # the three kinds of question through the package's builder and ours
    cases = {"stable": [("A", True)] * 4, "wrong": [("B", False)] * 4,
             "unstable": [("A", True), ("A", True), ("B", False), ("C", False)]}
    reference = [lc.build_question_consistency_result(k, v) for k, v in cases.items()]
    assert [r.rc_correct for r in reference] == [1.0, 0.0, 0.5]
    assert [r.rc_agree for r in reference] == [1.0, 1.0, 0.5]
    assert core([1.0, 0.0, 0.5]) == pytest.approx(lc.core_index(reference), abs=1e-9)
