"""The report says which rule decided, and each rule keeps its own verdict in the table."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.unit.evals.verdict.test_gate_stats import config, ex, gate
from worker.evals.types import GateRule
from worker.pipeline.report_values import ConfigReport, MultiReport
from worker.report import render as report
from worker.report import terminal
from worker.report.decision import decision_sentence
from worker.report.stats_table import comparison_rows


def _inline(value: object, limit: int) -> str:
    return str(value)[:limit]


def test_each_rule_keeps_its_own_verdict_beside_the_p_value() -> None:
    """Field case: "❌ regression" appeared beside p = 0.188 because another rule fired."""
    base = [ex(i, i not in (10, 11)) for i in range(40)]
    head = [ex(i, i not in (0, 1, 2, 11)) for i in range(40)]  # 3 broken, 1 fixed
    cfg = config(GateRule("pass_rate", regression_alpha=0.05, max_new_failures=0))
    result = gate(cfg, base, head)
    (row,) = comparison_rows(result, _inline)
    assert row[-1] == ("❌ regression (max_new_failures 0); "
                       "✅ pass (regression alpha 0.05)")
    assert result.comparisons[0].p_adjusted == 5 / 16  # exact: P(Bin(4, 1/2) >= 3)
    sentence = decision_sentence(result)
    assert sentence.startswith("decided by s pass_rate max_new_failures 0 (regression): ")


def test_an_inconclusive_margin_says_how_many_examples_would_decide_it() -> None:
    base = [ex(i, i % 5 != 0) for i in range(40)]
    head = [ex(i, i % 5 != 0 and i != 1) for i in range(40)]
    cfg = config(GateRule("pass_rate", non_inferiority_margin=0.05))
    result = gate(cfg, base, head)
    assert result.outcomes[0].status == "inconclusive"
    sentence = decision_sentence(result)
    assert "non_inferiority_margin 0.05 (inconclusive)" in sentence
    assert "95% CI [" in sentence and "paired examples would decide it" in sentence
    summary = report.check_summary(result)
    assert "**Why:** decided by s pass_rate non_inferiority_margin 0.05" in summary
    assert "about 91 paired examples would decide it." in summary


def test_a_passing_gate_names_its_clearest_drop() -> None:
    base = [ex(i, True) for i in range(30)]
    head = [ex(i, i != 4) for i in range(30)]
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05)), base, head)
    assert decision_sentence(result) == (
        "all 1 rules pass; the clearest drop tested: pass_rate head - base = -0.033, "
        f"95% CI [{result.comparisons[0].ci_low:+.3f}, +0.000], p = 0.500 (adjusted: "
        "sign-flip min-P), n = 30.")


def test_every_format_gives_the_why_of_an_inconclusive_result() -> None:
    """Field case (tester, issue 15): the terminal report and --format json had only the
    headline, with no effect, interval or examples that would decide it."""
    base = [ex(i, i % 5 != 0) for i in range(40)]
    head = [ex(i, i % 5 != 0 and i != 1) for i in range(40)]
    result = gate(config(GateRule("pass_rate", non_inferiority_margin=0.05)), base, head)
    why = decision_sentence(result)
    assert why.endswith("about 91 paired examples would decide it.")
    assert json.loads(report.render_json(result))["why"] == why
    text = terminal.render_terminal(MultiReport((ConfigReport(".llmgate.yml", "", result),)),
                                    "", None)
    assert f"why: {why}" in text


def test_a_gate_no_rule_decided_says_what_did_and_never_that_all_rules_pass() -> None:
    """Field case (tester, issue 15): with base's config invalid every rule was skipped, the
    check was undecided, and the first Why said "all 3 rules pass"."""
    base = [ex(i, True) for i in range(30)]
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05)), base, base)
    headline = "undecided: base could not be evaluated (its config is invalid)"
    undecided = replace(result, conclusion="action_required", headline=headline)
    assert decision_sentence(undecided) == headline + "."
    summary = report.check_summary(undecided)
    assert summary.count("**Why:**") == 1 and "rules pass" not in summary


def test_a_p_value_is_shown_as_precisely_as_its_alpha() -> None:
    """Field case (tester, issue 15): "p = 0.004 ... <= 0.003906" for p = 1/256."""
    base = [ex(i, True) for i in range(40)]
    head = [ex(i, i >= 8) for i in range(40)]  # 8 broken: p = 2**-8 exactly
    result = gate(config(GateRule("pass_rate", regression_alpha=0.05)), base, head)
    assert "p = 0.003906 (adjusted: sign-flip min-P)" in decision_sentence(result)
