"""The statistical and per-example gate rules, on hand-built runs
(worker.evals.verdict.comparison.compare)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    AssertionResult,
    CommandTarget,
    Config,
    ExampleResult,
    GateOptions,
    GateReport,
    GateRule,
    RunResult,
    Settings,
    StatisticsSettings,
    SuiteConfig,
    SuiteResult,
)
from worker.evals.verdict import power, stats
from worker.evals.verdict.comparison import compare
from worker.report import render as report

DATASET = "evals/s.jsonl"


def ex(i: int | str, passed: bool = True, *, score: float | None = None, cat: str | None = None,
       tags: tuple[str, ...] = (), errored: bool = False, repeat: int = 0,
       unscored: bool = False) -> ExampleResult:
    """One result; with ``score``, a graded ``judge`` assertion gives the mean_score."""
    if score is not None:
        checks = (AssertionResult("judge", score >= 0.5, score),)
        passed = score >= 0.5
    else:
        checks = (AssertionResult("equals", passed, float(passed)),)
    line = i + 1 if isinstance(i, int) else 1
    return ExampleResult(f"e{i}" if isinstance(i, int) else i, line, passed and not errored,
                         errored, "out", "want", "boom" if errored else None, checks,
                         metadata={"category": cat} if cat else {}, tags=tags, repeat=repeat,
                         unscored=unscored)


def run(sha: str, results: Sequence[ExampleResult], name: str = "s") -> RunResult:
    return RunResult(sha, {name: SuiteResult(name, DATASET, tuple(results),
                                             suite_metrics(results))})


def config(*rules: GateRule, **options: Any) -> Config:
    return Config(1, (SuiteConfig("s", DATASET, CommandTarget("x"), (),
                                  {r.metric: r for r in rules},
                                  gate_options=GateOptions(**options)),), Settings())


def gate(cfg: Config, base: Sequence[ExampleResult],
         head: Sequence[ExampleResult]) -> GateReport:
    return compare(cfg, run("h", head), run("b", base))


def statuses(result: GateReport) -> list[tuple[str, str, str]]:
    return [(o.rule, o.group, o.status) for o in result.outcomes]


STRICT = GateRule("pass_rate", regression_alpha=0.05, non_inferiority_margin=0.05,
                  max_new_failures=0)


# --- Cases from the field --------------------------------------------------------------------

def test_identical_scores_on_20_examples_is_no_change_and_success() -> None:
    scores = np.linspace(0.1, 0.9, 20)
    examples = [ex(i, score=float(s)) for i, s in enumerate(scores)]
    result = gate(config(GateRule("mean_score", regression_alpha=0.05,
                                  non_inferiority_margin=0.05)), examples, examples)
    assert result.conclusion == "success"
    (c,) = result.comparisons
    assert (c.test, c.n, c.n_zero, c.p_value, c.p_adjusted) == ("wilcoxon", 20, 20, 1.0, 1.0)
    assert (c.delta, c.ci_low, c.ci_high) == (0.0, 0.0, 0.0)
    assert [o.status for o in result.outcomes] == ["pass", "pass"]
    # each rule keeps its own verdict (tester, issue 15: "✅ no change" merged them)
    assert "| ✅ pass (regression alpha 0.05); ✅ pass (non_inferiority_margin 0.05) · no " \
        "change |" in report.check_summary(result)


def test_identical_pass_fail_on_20_examples_is_no_change_and_success() -> None:
    examples = [ex(i, i % 3 != 0) for i in range(20)]
    result = gate(config(STRICT), examples, examples)
    assert result.conclusion == "success"
    (c,) = result.comparisons
    assert (c.test, c.fixed, c.broken, c.p_value) == ("mcnemar", 0, 0, 1.0)  # no 0/0
    assert [o.status for o in result.outcomes] == ["pass", "pass", "pass"]
    assert "McNemar, 0 broken / 0 fixed" in report.check_summary(result)


def test_15_up_15_down_40_tied_scores_is_not_a_regression_and_names_the_zero_method() -> None:
    base = [ex(i, score=0.0) for i in range(15)] + [ex(i, score=1.0) for i in range(15, 30)] \
        + [ex(i, score=0.5) for i in range(30, 70)]
    head = [ex(i, score=1.0) for i in range(15)] + [ex(i, score=0.0) for i in range(15, 30)] \
        + [ex(i, score=0.5) for i in range(30, 70)]
    result = gate(config(GateRule("mean_score", regression_alpha=0.05)), base, head)
    (c,) = result.comparisons
    d = np.array([1.0] * 15 + [-1.0] * 15 + [0.0] * 40)
    reference = float(sps.wilcoxon(d, zero_method="wilcox", alternative="less").pvalue)
    assert (c.test, c.n, c.n_zero) == ("wilcoxon", 70, 40)
    assert c.p_value == pytest.approx(reference, rel=1e-12)
    assert c.p_value == pytest.approx(0.5)
    assert [o.status for o in result.outcomes] == ["pass"]
    assert result.conclusion == "success"
    summary = report.check_summary(result)
    assert "Wilcoxon, 40 ties dropped" in summary
    assert "zero differences (ties) dropped before ranking (zero_method=wilcox)" in summary


def test_15_broken_15_fixed_40_tied_pass_fail_is_not_a_regression() -> None:
    base = [ex(i, i < 15 or i >= 30 and i % 2 == 0) for i in range(70)]
    head = [ex(i, 15 <= i < 30 or i >= 30 and i % 2 == 0) for i in range(70)]
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05)), base, head)
    (c,) = result.comparisons
    assert (c.fixed, c.broken, c.n_zero) == (15, 15, 40)
    assert c.p_value == pytest.approx(sps.binomtest(15, 30, 0.5, alternative="greater").pvalue)
    assert result.conclusion == "success"


# --- regression, non-inferiority, max_new_failures -------------------------------------------

def test_a_significant_drop_is_a_regression_with_counts_in_the_reason() -> None:
    base = [ex(i, True) for i in range(40)]
    head = [ex(i, i >= 8) for i in range(40)]
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05)), base, head)
    (c,) = result.comparisons
    assert (c.fixed, c.broken, c.p_value) == (0, 8, 2.0 ** -8)
    (outcome,) = result.outcomes
    assert (outcome.status, result.conclusion) == ("regression", "failure")
    # 8 discordant pairs: all 2**8 sign patterns enumerated, so p is exact (= McNemar's)
    assert c.p_family == c.p_adjusted == 2.0 ** -8
    assert outcome.reason == ("significant drop: p = 0.003906 (sign-flip min-P adjusted; McNemar "
                              "exact, 8 broken / 0 fixed) <= 0.05")


def test_non_inferiority_has_three_verdicts() -> None:
    base = [ex(i, score=0.6) for i in range(30)]
    rule = GateRule("mean_score", non_inferiority_margin=0.05)

    def verdict(head_scores: Sequence[float]) -> tuple[str, str]:
        head = [ex(i, score=s) for i, s in enumerate(head_scores)]
        result = gate(config(rule), base, head)
        return result.outcomes[0].status, result.conclusion

    rng = np.random.default_rng(1)
    assert verdict(0.6 + rng.normal(0, 0.01, 30)) == ("pass", "success")
    assert verdict(0.4 + rng.normal(0, 0.01, 30)) == ("regression", "failure")
    assert verdict(0.6 + rng.normal(-0.03, 0.25, 30).clip(-0.6, 0.4)) == ("inconclusive",
                                                                          "action_required")


def test_inconclusive_reason_explains_and_on_inconclusive_sets_the_conclusion() -> None:
    rng = np.random.default_rng(2)
    base = [ex(i, score=0.5) for i in range(25)]
    head = [ex(i, score=float(s)) for i, s in enumerate((0.5 + rng.normal(0, 0.2, 25))
                                                        .clip(0, 1))]
    rule = GateRule("mean_score", non_inferiority_margin=0.02)
    conclusions = {}
    for mode in ("pass", "neutral", "fail"):
        result = gate(config(rule, on_inconclusive=mode), base, head)
        (outcome,) = result.outcomes
        assert outcome.status == "inconclusive"
        assert "straddles -0.02: the data cannot tell (at n = 25 this set detects drops >=" \
            in outcome.reason
        conclusions[mode] = (result.conclusion, outcome.effect)
    assert conclusions == {"pass": ("success", "none"), "neutral": ("neutral", "neutral"),
                           "fail": ("failure", "failure")}
    assert "inconclusive: the data cannot tell" in report.check_summary(
        gate(config(rule), base, head))


def test_max_new_failures_counts_pass_to_fail_and_skips_quarantined() -> None:
    base = [ex(i, True) for i in range(10)]
    head = [ex(i, i not in (2, 5)) for i in range(10)]
    rule = GateRule("pass_rate", max_new_failures=1)
    result = gate(config(rule), base, head)
    assert result.outcomes[0].status == "regression"
    assert result.outcomes[0].reason == ("2 examples pass at base and fail at head (allowed 1): "
                                         "e2, e5")
    assert gate(config(rule, quarantine=("e5",)), base, head).outcomes[0].status == "pass"


def test_max_new_failures_needs_a_pass_fail_metric() -> None:
    base = [ex(i, score=0.7) for i in range(6)]
    head = [ex(i, score=0.2) for i in range(6)]
    result = gate(config(GateRule("mean_score", max_new_failures=0)), base, head)
    assert result.outcomes[0].status == "skipped"
    assert "is a score, not pass/fail" in result.outcomes[0].reason


# --- critical --------------------------------------------------------------------------------

def test_critical_examples_must_pass_whatever_the_averages_say() -> None:
    base = [ex(i, True, tags=("must_pass",) if i == 3 else ()) for i in range(50)]
    head = [ex(i, i != 3) for i in range(50)]  # tag dropped at head, example fails
    cfg = config(GateRule("pass_rate", min=0.9), critical_tags=("must_pass",))
    result = gate(cfg, base, head)
    assert statuses(result) == [("min 0.90", "", "pass"),
                                ("critical tag must_pass", "", "regression")]
    assert result.outcomes[1].reason == ("1 of 1 critical examples do not pass at head "
                                         "(failed or missing): e3")
    assert result.conclusion == "failure"
    assert gate(config(critical_tags=("must_pass",), quarantine=("e3",)), base,
                head).conclusion == "success"


def test_a_critical_example_removed_at_head_fails_and_no_base_still_checks() -> None:
    base = [ex(i, True, tags=("must_pass",)) for i in range(3)]
    head = base[:2]
    cfg = config(critical_tags=("must_pass",))
    assert gate(cfg, base, head).outcomes[0].reason.endswith(": e2")
    alone = compare(cfg, run("h", [ex(0, False, tags=("must_pass",))]), None)
    assert (alone.outcomes[0].status, alone.conclusion) == ("regression", "failure")


def test_a_critical_example_that_could_not_be_scored_is_inconclusive() -> None:
    head = [ex(0, False, tags=("must_pass",), unscored=True)]
    result = compare(config(critical_tags=("must_pass",)), run("h", head), None)
    assert (result.outcomes[0].status, result.conclusion) == ("inconclusive",
                                                              "action_required")


# --- groups and Holm -------------------------------------------------------------------------

def test_rules_apply_in_each_group_and_holm_covers_every_p_value() -> None:
    cats = ["billing"] * 30 + ["shipping"] * 30 + ["tiny"] * 3
    base = [ex(i, True, cat=c) for i, c in enumerate(cats)]
    head = [ex(i, not (30 <= i < 40), cat=c) for i, c in enumerate(cats)]  # shipping breaks
    cfg = config(GateRule("pass_rate", regression_alpha=0.05), GateRule("error_rate",
                 regression_alpha=0.05), group_by="category", group_min_items=5)
    cfg = replace(cfg, settings=Settings(statistics=StatisticsSettings(method="holm")))
    result = gate(cfg, base, head)
    assert [(c.metric, c.group, c.n) for c in result.comparisons] == [
        ("pass_rate", "", 63), ("pass_rate", "category=billing", 30),
        ("pass_rate", "category=shipping", 30), ("error_rate", "", 63),
        ("error_rate", "category=billing", 30), ("error_rate", "category=shipping", 30)]
    assert result.holm_tests == 6
    raw = np.array([c.p_value for c in result.comparisons])
    np.testing.assert_allclose([c.p_adjusted for c in result.comparisons],
                               stats.holm_adjust(raw))
    assert [o.status for o in result.outcomes] == ["regression", "pass", "regression", "pass",
                                                   "pass", "pass"]
    assert "groups under 5 paired examples are not gated on their own: category=tiny (3)" \
        in result.notes[0]
    assert ("Holm's adjustment was applied over the 6 p-values of `regression` rules"
            in report.check_summary(result))
    assert all(c.mdd_alpha == pytest.approx(0.05 / 6) for c in result.comparisons)


def test_examples_without_the_group_key_form_their_own_group() -> None:
    base = [ex(i, True, cat="a" if i < 6 else None) for i in range(12)]
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05), group_by="category"),
                  base, base)
    assert [c.group for c in result.comparisons] == ["", "category=(none)", "category=a"]


# --- min_detectable --------------------------------------------------------------------------

def test_min_detectable_fails_or_warns_with_the_examples_needed() -> None:
    base = [ex(i, i % 2 == 0) for i in range(40)]
    head = [ex(i, i % 4 != 1) for i in range(40)]  # 10 fixed, no broken: noisy
    failing = GateRule("pass_rate", min_detectable=0.05)
    result = gate(config(failing), base, head)
    (outcome,) = result.outcomes
    c = result.comparisons[0]
    needed = power.n_needed_binary(0.05, 10 / 80, 0.025)
    assert (outcome.status, outcome.effect, result.conclusion) == ("inconclusive", "failure",
                                                                   "failure")
    assert f"about {needed} paired examples are needed" in outcome.reason
    assert f"this set detects drops >= {c.mdd:.3f}" in outcome.reason
    warning = gate(config(GateRule("pass_rate", min_detectable=0.05,
                                   min_detectable_action="warn")), base, head)
    assert (warning.outcomes[0].effect, warning.conclusion) == ("none", "success")
    easy = gate(config(GateRule("pass_rate", min_detectable=0.9)), base, head)
    assert easy.outcomes[0].status == "pass"


# --- pairing ---------------------------------------------------------------------------------

def test_added_and_removed_examples_are_left_out_and_noted() -> None:
    base = [ex(i, True) for i in range(10)] + [ex("gone", False)]
    head = [ex(i, True) for i in range(10)] + [ex("new1", False), ex("new2", False)]
    result = gate(config(STRICT), base, head)
    (c,) = result.comparisons
    assert (c.n, c.added, c.removed, c.base, c.head) == (10, 2, 1, 1.0, 1.0)
    assert result.conclusion == "success"
    assert "s: 2 examples only at head and 1 only at base, left out of the paired tests" \
        in result.notes


@pytest.mark.parametrize("side", ["base", "head"])
def test_duplicate_or_empty_ids_fail_closed(side: str) -> None:
    good = [ex(i, True) for i in range(4)]
    bad = [*good, ex(1, True)]
    base, head = (bad, good) if side == "base" else (good, bad)
    result = gate(config(STRICT), base, head)
    assert result.conclusion == "failure" and result.outcomes == ()
    assert result.config_error is not None
    assert result.config_error.message.startswith("duplicate example id 'e1' (first at line 2)")
    assert (result.config_error.path, result.config_error.line) == (DATASET, 2)
    empty = gate(config(STRICT), good, [*good, ex("", True)])
    assert empty.config_error is not None and "empty id" in empty.config_error.message


def test_no_shared_id_makes_statistical_rules_inconclusive_not_passing() -> None:
    base = [ex(i, True) for i in range(10)]
    head = [ex(f"renamed{i}", False) for i in range(10)]
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05)), base, head)
    assert result.outcomes[0].status == "inconclusive"
    assert "no example id is shared" in result.outcomes[0].reason
    assert result.conclusion == "action_required"  # undecided: never a passing neutral


def test_n1_has_no_interval_and_is_inconclusive_for_non_inferiority() -> None:
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05,
                                  non_inferiority_margin=0.1)), [ex(0, True)], [ex(0, False)])
    c = result.comparisons[0]
    assert (c.n, c.ci_low, c.p_value, c.mdd) == (1, None, 0.5, math.inf)
    assert statuses(result) == [("regression alpha 0.05", "", "pass"),
                                ("non_inferiority_margin 0.1", "", "inconclusive")]
    assert "n = 1: too few paired examples" in result.outcomes[1].reason


def test_all_fail_on_both_sides() -> None:
    examples = [ex(i, False) for i in range(12)]
    result = gate(config(STRICT), examples, examples)
    assert result.comparisons[0].p_value == 1.0 and result.conclusion == "success"


def test_error_rate_is_lower_is_better() -> None:
    base = [ex(i, True) for i in range(30)]
    head = [ex(i, errored=i < 8) for i in range(30)]
    result = gate(config(GateRule("error_rate", regression_alpha=0.05,
                                  non_inferiority_margin=0.05)), base, head)
    c = result.comparisons[0]
    assert (c.base, c.head, c.broken) == (0.0, pytest.approx(8 / 30), 8)
    assert c.ci_low is not None and c.ci_low > 0
    assert [o.status for o in result.outcomes] == ["regression", "regression"]
    assert "lies wholly above +0.05" in result.outcomes[1].reason
    assert result.outcomes[0].reason.startswith("significant rise")


def test_repeats_are_averaged_and_their_noise_reported() -> None:
    base = [ex(i, score=0.8, repeat=r) for i in range(10) for r in range(3)]
    head = [ex(i, score=0.8 if r else 0.5, repeat=r) for i in range(10) for r in range(3)]
    result = gate(config(GateRule("mean_score", regression_alpha=0.05)), base, head)
    c = result.comparisons[0]
    assert (c.n, c.repeats) == (10, 3)
    assert c.head == pytest.approx(0.7) and c.delta == pytest.approx(-0.1)
    expected_sd = math.sqrt(np.mean([0.0] * 10 + [np.var([0.5, 0.8, 0.8], ddof=1)] * 10))
    assert c.noise_sd == pytest.approx(expected_sd)
    assert f"3 repeats, run-to-run SD {expected_sd:.3f}" in report.check_summary(result)
    assert result.outcomes[0].status == "regression"


def test_statistics_are_seeded_and_repeat_exactly() -> None:
    rng = np.random.default_rng(4)
    base = [ex(i, score=float(s)) for i, s in enumerate(rng.random(50))]
    head = [ex(i, score=float(s)) for i, s in enumerate(rng.random(50))]
    cfg = config(GateRule("mean_score", regression_alpha=0.05, non_inferiority_margin=0.1))
    first, again = gate(cfg, base, head), gate(cfg, base, head)
    assert first.comparisons == again.comparisons
    assert report.render_json(first) == report.render_json(again)
    doc = json.loads(report.render_json(first))
    assert doc["holm_tests"] == 1
    assert doc["comparisons"][0]["ci_low"] == first.comparisons[0].ci_low


def test_no_base_skips_the_statistical_rules() -> None:
    result = compare(config(STRICT), run("h", [ex(0, True)]), None)
    assert [(o.rule, o.status) for o in result.outcomes] == [
        ("regression alpha 0.05", "skipped"), ("non_inferiority_margin 0.05", "skipped"),
        ("max_new_failures 0", "skipped")]
    assert result.comparisons == () and result.conclusion == "success"


def test_regressed_examples_with_repeats_are_listed_once_by_majority() -> None:
    base = [ex(i, passed, repeat=r) for i in range(3) for r, passed in
            enumerate((True, True, i == 2))]
    head = [ex(0, r == 0, repeat=r) for r in range(3)] + [ex(1, True, repeat=r) for r in
                                                           range(3)] + \
        [ex(2, False, repeat=r, unscored=True) for r in range(3)]
    result = gate(config(), base, head)
    assert [(r.example_id, r.line) for r in result.regressions] == [("e0", 1)]


def test_a_critical_tag_no_example_carries_fails_closed() -> None:
    """A misspelt tag (`must-pass` for `must_pass`) must not switch the rule off silently."""
    base = [ex(i, True, tags=("must_pass",) if i == 3 else ()) for i in range(10)]
    head = [ex(i, True, tags=("must_pass",) if i == 3 else ()) for i in range(10)]
    result = gate(config(critical_tags=("must-pass",)), base, head)
    assert statuses(result) == [("critical tag must-pass", "", "fail")]
    assert "no example carries this tag" in result.outcomes[0].reason
    assert result.conclusion == "failure"
