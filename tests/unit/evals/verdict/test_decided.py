"""A regression found among the answered examples is never made mergeable by a storm (issue 32,
item 4): worker/evals/verdict/decided.py and rule 5 of worker/evals/verdict/health.py on
hand-made runs, then what a reader sees (the Why, the buttons).

The runs: 40 examples; a 429 storm took half of them at both sides (``e0``-``e19``, so the
storm is the provider's, not head's); of head's 20 answered examples, 6 that pass at base fail
(``e20``-``e25``). Whether the failure is decided depends on the rule: ``max_new_failures 0``
counts 6 broken pairs whatever the storm hid; ``max_drop 0.1`` on ``pass_rate`` is 0.70 against
1.00 on the answered examples, but in the best case (head's 20 pass, base's 20 fail) head's
34/40 = 0.85 is above base's 20/40 = 0.50; a McNemar ``regression`` test has p = 1/64 on the
answered pairs, and far above alpha with 20 more pairs head wins.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.evals.verdict.test_causes import config, failed, ok, run
from worker.evals.types import (
    Config,
    ExampleResult,
    GateOptions,
    GateReport,
    GateRule,
    RunResult,
)
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.decided import settle
from worker.evals.verdict.health import finish_report
from worker.gate.accept import ACCEPT_BUTTON, LET_THROUGH_BUTTON, check_actions, failed_rules
from worker.gate.request import GateRequest
from worker.report import render as report
from worker.report.decision import decision_sentence

STORM = "rate limited (HTTP 429): Rate limit reached"
REGRESSED = [f"e{i}" for i in range(20, 26)]
NO_OPTIONS = GateOptions()
REQUEST = GateRequest({"owner": "acme", "name": "tiny", "clone_url": "file:///x"}, 7,
                      "a" * 40, "b" * 40)


def bad(i: int) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, False, False, "Go away.", None)


def limited(i: int) -> ExampleResult:
    return failed(i, "rate_limited", message=STORM)


def budget(i: int) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, False, True, None, None, error_kind="budget",
                         unscored=True)


def storm_head() -> RunResult:
    return run("h", [*(limited(i) for i in range(20)), *(bad(i) for i in range(20, 26)),
                     *(ok(i) for i in range(26, 40))])


def storm_base() -> RunResult:
    return run("b", [*(limited(i) for i in range(20)), *(ok(i) for i in range(20, 40))])


def gated(rule: GateRule, undecided: str = "neutral", options: GateOptions = NO_OPTIONS,
          ) -> Config:
    cfg = config(undecided=undecided)
    return replace(cfg, suites=(replace(cfg.suites[0], gate={rule.metric: rule},
                                        gate_options=options),))


def finish(cfg: Config, head: RunResult, base: RunResult) -> GateReport:
    return finish_report(compare(cfg, head, base), cfg, cfg)


NEW_FAILURES = GateRule("pass_rate", max_new_failures=0)
MAX_DROP = GateRule("pass_rate", max_drop=0.1)
REGRESSION = GateRule("pass_rate", regression_alpha=0.05)


@pytest.mark.parametrize(("rule", "undecided", "conclusion"), [
    # decided: 6 broken pairs among the answered, whatever the storm hid, in either mode
    (NEW_FAILURES, "neutral", "failure"),
    (NEW_FAILURES, "action_required", "failure"),
    # not decided: the 20 unanswered pairs could make either rule pass
    (MAX_DROP, "neutral", "neutral"),
    (MAX_DROP, "action_required", "action_required"),
    (REGRESSION, "neutral", "neutral"),
    (REGRESSION, "action_required", "action_required"),
])
def test_a_storm_relaxes_only_what_the_answered_examples_leave_undecided(
        rule: GateRule, undecided: str, conclusion: str) -> None:
    cfg = gated(rule, undecided)
    assert compare(cfg, storm_head(), storm_base()).conclusion == "failure"  # on the answered
    gate = finish(cfg, storm_head(), storm_base())
    assert gate.conclusion == conclusion
    assert [r.example_id for r in gate.regressions] == REGRESSED
    # a rule the storm leaves undecided is shown so, never as failed beside a pass
    decided = conclusion == "failure"
    assert [(o.status, o.effect) for o in gate.outcomes] == [
        ("regression", "none") if decided else ("inconclusive", "undecided")]


def test_the_case_of_issue_32_fails_and_names_the_rule_and_its_regressions() -> None:
    """Case from the chaos runs (issue 32, item 4): base says ``settings.undecided: neutral``,
    a 429 storm took half the examples, and 6 of head's answered examples regressed: it
    concluded ``neutral``."""
    gate = finish(gated(NEW_FAILURES), storm_head(), storm_base())
    assert gate.conclusion == "failure"
    assert gate.headline == (
        "s pass_rate max_new_failures 0 fails whatever the examples without an answer give "
        "(20 of 40 example results at head and 20 of 40 at base had no answer: rate limited: "
        f"20 of 40 examples got no answer at head (the first, s/e0: {STORM})); 6 regressions "
        "among the answered examples: s/e20, s/e21, s/e22, s/e23, s/e24, s/e25")
    [outcome] = gate.outcomes
    assert outcome.status == "regression"
    assert outcome.reason == (
        "6 examples pass at base and fail at head (allowed 0): e20, e21, e22, e23, e24, e25; "
        "it fails whatever the examples without an answer give: in their best case too")
    why = decision_sentence(gate)  # the rule, what had no answer, the regressions
    assert why == gate.headline + "."
    assert f"**Why:** {why}" in report.check_summary(gate)
    # a found regression is accepted as one, never let through as undecided
    actions = check_actions(REQUEST, gate)
    assert ACCEPT_BUTTON in actions and LET_THROUGH_BUTTON not in actions
    assert failed_rules(gate) == ["s pass_rate max_new_failures 0"]


@pytest.mark.parametrize("undecided", ["action_required", "neutral"])
def test_an_undecided_run_says_what_is_undecided_and_why_never_a_failing_rule(
        undecided: str) -> None:
    gate = finish(gated(MAX_DROP, undecided), storm_head(), storm_base())
    suffix = {"action_required": " (re-run, or a writer can let it through)",
              "neutral": " (neutral, as base's settings.undecided says)"}[undecided]
    assert gate.headline == (
        f"undecided: rate limited: 20 of 40 examples got no answer at head (the first, s/e0: "
        f"{STORM}); s pass_rate max_drop 0.10 cannot be decided: it fails on the answered "
        "examples, but 20 of 40 example results at head and 20 of 40 at base had no answer "
        f"and those could make it pass{suffix}")
    [outcome] = gate.outcomes
    assert (outcome.status, outcome.effect) == ("inconclusive", "undecided")
    assert outcome.reason.startswith("dropped 0.30 from base 1.00 (allowed 0.10); undecided: ")
    why = decision_sentence(gate)
    assert why == gate.headline + "." and "decided by" not in why
    summary = report.check_summary(gate)
    assert f"**Why:** {gate.headline}." in summary and "decided by" not in summary
    if undecided == "action_required":  # Let through is offered for what is undecided only
        assert LET_THROUGH_BUTTON in check_actions(REQUEST, gate)
        [why_let_through] = failed_rules(gate)  # the audit line's why: the headline
        assert gate.headline.startswith(why_let_through.rstrip("…"))


def test_a_threshold_rule_is_decided_on_heads_best_and_bases_worst_case() -> None:
    """``max_drop 0.1``: 10 of 40 examples unanswered at both sides, 16 answered ones regress:
    head's best 24/40 = 0.60 against base's worst 30/40 = 0.75 is a drop of 0.15."""
    head = run("h", [*(limited(i) for i in range(10)), *(bad(i) for i in range(10, 26)),
                     *(ok(i) for i in range(26, 40))])
    base = run("b", [*(limited(i) for i in range(10)), *(ok(i) for i in range(10, 40))])
    gate = finish(gated(MAX_DROP), head, base)
    assert gate.conclusion == "failure"
    assert gate.outcomes[0].reason == (
        "dropped 0.5333 from base 1.00 (allowed 0.10); it fails whatever the examples without "
        "an answer give: in their best case too (dropped 0.15 from base 0.75 (allowed 0.10))")
    settled = settle(compare(gated(MAX_DROP), head, base), gated(MAX_DROP))
    assert (dict(settled.unanswered), dict(settled.totals)) == ({"head": 10, "base": 10},
                                                               {"head": 40, "base": 40})


def test_a_critical_example_failed_among_the_answered_is_decided() -> None:
    options = GateOptions(critical_tags=("safety",))
    head = run("h", [*(limited(i) for i in range(20)),
                     replace(bad(20), tags=("safety",)), *(ok(i) for i in range(21, 40))])
    cfg = replace(gated(MAX_DROP), suites=(replace(gated(MAX_DROP).suites[0], gate={},
                                                   gate_options=options),))
    gate = finish(cfg, head, storm_base())
    assert gate.conclusion == "failure"
    assert gate.outcomes[0].rule == "critical tag safety"


def test_a_run_stopped_over_budget_still_fails_a_decided_regression() -> None:
    """Rule 2 blocks a stopped run as undecided (never neutral); what the answered examples
    decided fails it instead of offering Let through."""
    stopped = "budget exceeded: $1.0000 spent of max_cost_usd $1.0000"
    head = run("h", [*(bad(i) for i in range(6)), *(ok(i) for i in range(6, 20)),
                     *(budget(i) for i in range(20, 40))], stopped=stopped)
    base = run("b", [ok(i) for i in range(40)])
    gate = finish(gated(NEW_FAILURES), head, base)
    assert gate.conclusion == "failure"
    assert gate.headline.startswith(
        "s pass_rate max_new_failures 0 fails whatever the examples without an answer give "
        f"(20 of 40 example results at head had no answer: over budget: {stopped} at head")
    # max_drop 0.2: 0.70 on the answered, 34/40 = 0.85 in the best case: could pass
    undecided = finish(gated(GateRule("pass_rate", max_drop=0.2)), head, base)
    assert undecided.conclusion == "action_required"
    assert "s pass_rate max_drop 0.20 cannot be decided" in undecided.headline


def test_a_rule_on_a_metric_without_bounds_is_never_decided_by_a_guess() -> None:
    """An unanswered example's cost has no bound the gate knows: a rule on it stays undecided
    even when it fails on the answered examples."""
    rule = GateRule("cost_mean", max=0.001)
    head = run("h", [*(limited(i) for i in range(20)),
                     *(replace(ok(i), cost_usd=0.01) for i in range(20, 40))])
    gate = finish(gated(rule), head, storm_base())
    assert compare(gated(rule), head, storm_base()).conclusion == "failure"
    assert gate.conclusion == "neutral"
    assert "s cost_mean max 0.001 cannot be decided" in gate.headline
