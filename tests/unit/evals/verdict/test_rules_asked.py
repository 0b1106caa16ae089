"""The rules teams asked for (issue 17): ``max_example_drop``, ``max_increase_pct``, threshold
rules per group, ``critical: {max_failures}`` and the order metrics, on hand-computed values."""

from __future__ import annotations

import pytest

from tests.unit.evals.verdict.rules_asked_support import (
    DATASET,
    config,
    ex,
    gate,
    scored,
    statuses,
)
from worker.errors import ConfigError
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import GateOptions, GateRule
from worker.evals.verdict.rules import merge_rules
from worker.report.render import annotations

BASE = [0.9, 0.8, 0.7, 0.6]


@pytest.mark.parametrize(("head", "rule", "status", "dropped"), [
    # drops 0.00, 0.06, 0.00, 0.10: two examples fell by more than 0.05
    ([0.9, 0.74, 0.7, 0.5], "{by: 0.05, count: 0}", "regression", ["e1", "e3"]),
    ([0.9, 0.74, 0.7, 0.5], "{by: 0.05, count: 1}", "regression", ["e1", "e3"]),
    ([0.9, 0.74, 0.7, 0.5], "{by: 0.05, count: 2}", "pass", ["e1", "e3"]),
    ([0.9, 0.74, 0.7, 0.5], "{by: 0.08}", "regression", ["e3"]),
    # 0.8 - 0.7 is 0.10000000000000009 in binary: exactly `by` is no drop
    ([0.9, 0.7, 0.7, 0.6], "{by: 0.1}", "pass", []),
    ([1.0, 1.0, 1.0, 1.0], "{by: 0.01, count: 0}", "pass", []),
])
def test_max_example_drop_counts_examples_that_fell_by_more_than_by(head, rule, status, dropped):
    cfg = config(f"      mean_score: {{max_example_drop: {rule}}}\n")
    report = gate(cfg, scored(BASE), scored(head))
    [outcome] = report.outcomes
    assert outcome.status == status
    drops = [r for r in report.regressions if "mean_score fell" in r.reason]
    assert [r.example_id for r in drops] == dropped
    assert report.conclusion == ("failure" if status == "regression" else "success")


def test_max_example_drop_reason_names_each_example_and_its_values():
    cfg = config("      mean_score: {max_example_drop: {by: 0.05, count: 0}}\n")
    [outcome] = gate(cfg, scored(BASE), scored([0.9, 0.74, 0.7, 0.5])).outcomes
    assert outcome.rule == "max_example_drop 0.05 count 0"
    assert outcome.reason == ("2 examples' mean_score fell by more than 0.05 (allowed 0): "
                              "e1 (0.8 -> 0.74), e3 (0.6 -> 0.5)")


def test_dropped_examples_are_annotated_on_their_head_dataset_lines():
    cfg = config("      mean_score: {max_example_drop: {by: 0.05, count: 0}}\n")
    report = gate(cfg, scored(BASE), scored([0.9, 0.74, 0.7, 0.3]))
    found = annotations(report)
    # e3 went from pass (0.6) to fail (0.3): listed once, as the regression it is
    assert [(a["path"], a["start_line"], a["title"]) for a in found] == [
        (DATASET, 2, "s: example e1 regressed"), (DATASET, 4, "s: example e3 regressed")]
    assert found[0]["message"].endswith(
        "mean_score fell from 0.8 at base to 0.74 at head, by more than 0.05 "
        "(max_example_drop 0.05 count 0)")


def test_max_example_drop_averages_repeats_and_skips_quarantine_and_unscored():
    base = [ex("a", 0.8), ex("a", 0.8, repeat=1), ex("b", 0.9), ex("c", 0.9)]
    # a: mean of 0.7 and 0.8 = 0.75 (drop 0.05, not more); b quarantined; c unscored at head
    head = [ex("a", 0.7), ex("a", 0.8, repeat=1), ex("b", 0.1), ex("c", 0.0, unscored=True)]
    cfg = config("      mean_score: {max_example_drop: {by: 0.05}}\n"
                 "      quarantine: [b]\n")
    assert statuses(gate(cfg, base, head)) == [("max_example_drop 0.05 count 0", "", "pass")]


def test_max_example_drop_on_a_lower_is_better_metric_counts_rises():
    cfg = config("      cost_mean: {max_example_drop: {by: 0.001, count: 0}}\n")
    base = [ex("a", cost=0.002), ex("b", cost=0.002)]
    head = [ex("a", cost=0.0031), ex("b", cost=0.0005)]  # a rose 0.0011; b fell (better)
    [outcome] = gate(cfg, base, head).outcomes
    assert (outcome.status, outcome.reason) == (
        "regression", "1 examples' cost_mean rose by more than 0.001 (allowed 0): "
                      "a (0.002 -> 0.0031)")


def test_max_example_drop_without_base_is_skipped():
    cfg = config("      mean_score: {max_example_drop: {by: 0.05}}\n")
    assert statuses(gate(cfg, None, scored(BASE))) == [
        ("max_example_drop 0.05 count 0", "", "skipped")]


@pytest.mark.parametrize(("metric", "base", "head", "pct", "status", "reason"), [
    ("latency_p50", [1000.0], [1200.0], 20, "pass", ""),
    ("latency_p50", [1000.0], [1201.0], 20, "fail",
     "rose 20.1% from base 1000 to 1201 (allowed 20%)"),
    ("latency_p50", [1000.0], [600.0], 0, "pass", ""),
    ("latency_p50", [0.0], [0.0], 5, "pass", ""),
    ("latency_p50", [0.0], [3.0], 5, "fail", "rose from base 0 to 3 (allowed 5%)"),
    ("tokens_out_mean", [100, 140], [150, 150], 25, "pass", ""),  # 120 -> 150: exactly 25%
    ("tokens_out_mean", [100, 140], [150, 151], 25, "fail",
     "rose 25.4% from base 120 to 150.5 (allowed 25%)"),
    ("cost_total", [0.10, 0.20], [0.15, 0.20], 10, "fail",
     "rose 16.7% from base 0.3 to 0.35 (allowed 10%)"),
])
def test_max_increase_pct_compares_the_rise_with_base_in_percent(metric, base, head, pct,
                                                                 status, reason):
    def side(values: list[float]) -> list:
        key = {"latency_p50": "latency_ms", "tokens_out_mean": "tokens"}.get(metric, "cost")
        return [ex(f"e{k}", **{key: int(v) if key == "tokens" else v})
                for k, v in enumerate(values)]
    cfg = config(f"      {metric}: {{max_increase_pct: {pct}}}\n")
    [outcome] = gate(cfg, side(base), side(head)).outcomes
    assert (outcome.rule, outcome.status, outcome.reason) == (
        f"max_increase_pct {pct:g}", status, reason)


def test_max_increase_pct_without_base_is_skipped_and_unavailable_at_head_fails():
    cfg = config("      tokens_out_mean: {max_increase_pct: 20}\n")
    assert statuses(gate(cfg, None, [ex("a", tokens=5)])) == [
        ("max_increase_pct 20", "", "skipped")]
    assert statuses(gate(cfg, [ex("a", tokens=5)], [ex("a")])) == [
        ("max_increase_pct 20", "", "fail")]


def grouped(scores: dict[str, list[float]], **kw) -> list:
    return [ex(f"{cat}{k}", s, cat=cat, **kw) for cat, values in scores.items()
            for k, s in enumerate(values)]


def test_min_floors_apply_to_every_group_as_to_the_suite():
    # suite pass_rate 7/10 = 0.7; group a 5/5 = 1.0, group b 2/5 = 0.4
    head = grouped({"a": [1, 1, 1, 1, 1], "b": [1, 1, 0, 0, 0]})
    cfg = config("      pass_rate: {min: 0.7}\n"
                 "      groups: {by: category, min_items: 5}\n")
    report = gate(cfg, None, head)
    assert statuses(report) == [("min 0.70", "", "pass"), ("min 0.70", "category=a", "pass"),
                                ("min 0.70", "category=b", "fail")]
    assert report.outcomes[2].reason == "0.40 is below the minimum 0.70"
    assert report.outcomes[2].head == 0.4
    assert report.conclusion == "failure"


def test_groups_under_min_items_are_not_floored_on_their_own():
    head = grouped({"a": [1, 1, 1, 1, 1], "b": [0, 0]})  # b has 2 examples < 3
    cfg = config("      pass_rate: {min: 0.7}\n"
                 "      groups: {by: category, min_items: 3}\n")
    assert statuses(gate(cfg, None, head)) == [("min 0.70", "", "pass"),
                                               ("min 0.70", "category=a", "pass")]


def test_every_threshold_kind_runs_per_group_against_the_groups_base():
    base = grouped({"a": [0.9] * 3, "b": [0.9] * 3}, latency_ms=100.0)
    head = [*grouped({"a": [0.9] * 3}, latency_ms=100.0),
            *grouped({"b": [0.7] * 3}, latency_ms=130.0)]
    cfg = config("      mean_score: {min: 0.8, max_drop: 0.1}\n"
                 "      latency_p90: {max: 120, max_increase: 50, max_increase_pct: 20}\n"
                 "      groups: {by: category, min_items: 3}\n")
    report = gate(cfg, base, head)
    assert [(o.rule, o.status) for o in report.outcomes if o.group == "category=b"] == [
        ("min 0.80", "fail"), ("max_drop 0.10", "fail"), ("max 120", "fail"),
        ("max_increase 50", "pass"), ("max_increase_pct 20", "fail")]
    assert [o.status for o in report.outcomes if o.group == "category=a"] == ["pass"] * 5
    # the suite: mean 0.8 (min holds), drop 0.1 (holds); p90 of three 100s and three 130s
    assert [(o.rule, o.status) for o in report.outcomes if not o.group][:2] == [
        ("min 0.80", "pass"), ("max_drop 0.10", "pass")]


def test_a_group_new_at_head_skips_the_relative_rules():
    base = grouped({"a": [0.9] * 3})
    head = [*grouped({"a": [0.9] * 3}), *grouped({"c": [0.9] * 3})]
    cfg = config("      mean_score: {max_drop: 0.1}\n"
                 "      groups: {by: category, min_items: 3}\n")
    assert statuses(gate(cfg, base, head)) == [
        ("max_drop 0.10", "", "pass"), ("max_drop 0.10", "category=a", "pass"),
        ("max_drop 0.10", "category=c", "skipped")]


@pytest.mark.parametrize(("failing", "unscored", "allowed", "status"), [
    (0, 0, 0, "pass"),
    (1, 0, 0, "regression"),
    (1, 0, 1, "pass"),
    (2, 0, 1, "regression"),
    (1, 1, 2, "pass"),          # even if the unscored one failed: 2 <= 2
    (1, 1, 1, "inconclusive"),  # it might be the second failure
    (0, 1, 0, "inconclusive"),
])
def test_critical_max_failures_allows_that_many_critical_failures(failing, unscored, allowed,
                                                                  status):
    head = [ex(f"e{k}", 0.0 if k < failing else 1.0, tags=("safety",)) for k in range(4)]
    head[3] = ex("e3", 0.0, tags=("safety",), unscored=True) if unscored else head[3]
    rule = "{tag: safety}" if allowed == 0 else f"{{tag: safety, max_failures: {allowed}}}"
    cfg = config(f"      critical: {rule}\n      on_inconclusive: fail\n")
    [outcome] = gate(cfg, None, head).outcomes
    assert outcome.status == status
    assert outcome.rule == "critical tag safety" + (f" max_failures {allowed}" if allowed else "")


def test_critical_over_the_allowance_says_how_many_are_allowed():
    head = [ex("a", 0.0, tags=("safety",)), ex("b", 0.0, tags=("safety",)), ex("c", 1.0)]
    cfg = config("      critical: {tag: safety, max_failures: 1}\n")
    [outcome] = gate(cfg, None, head).outcomes
    assert outcome.reason == ("2 of 2 critical examples do not pass at head (failed or "
                              "missing; allowed 1): a, b")


@pytest.mark.parametrize(("results", "expected"), [
    # five examples: median 0.6; p10 at position 0.4: 0.2 + 0.4 * (0.4 - 0.2) = 0.28
    (scored([0.2, 0.4, 0.6, 0.8, 1.0]),
     {"median_score": 0.6, "min_score": 0.2, "max_score": 1.0, "p10_score": 0.28}),
    # four: median between 0.4 and 0.6 = 0.5; p10 at 0.3: 0.1 + 0.3 * 0.3 = 0.19
    (scored([0.4, 0.1, 0.6, 0.9]),
     {"median_score": 0.5, "min_score": 0.1, "max_score": 0.9, "p10_score": 0.19}),
    # repeats are averaged first (a: 0.3), an errored target scores 0, unscored is left out
    ([ex("a", 0.2), ex("a", 0.4, repeat=1), ex("b", 1.0, errored=True), ex("c", 0.8),
      ex("d", 0.0, unscored=True)],
     {"median_score": 0.3, "min_score": 0.0, "max_score": 0.8, "p10_score": 0.06}),
])
def test_order_metrics_of_the_per_example_score(results, expected):
    metrics = suite_metrics(results)
    assert {k: metrics[k] for k in expected} == pytest.approx(expected, abs=1e-12)


def test_order_metrics_are_absent_when_nothing_was_scored():
    metrics = suite_metrics([ex("a", 0.5, unscored=True)])
    assert not {"median_score", "min_score", "max_score", "p10_score"} & set(metrics)


def test_order_metrics_gate_with_min_and_max_drop_and_per_group():
    base = grouped({"a": [0.9, 0.9, 0.9], "b": [0.9, 0.9, 0.9]})
    head = grouped({"a": [0.9, 0.9, 0.9], "b": [0.9, 0.2, 0.9]})
    cfg = config("      min_score: {min: 0.5}\n"
                 "      p10_score: {max_drop: 0.3}\n"
                 "      median_score: {min: 0.8}\n"
                 "      groups: {by: category, min_items: 3}\n")
    report = gate(cfg, base, head)
    # head p10 of [0.2, 0.9 x5]: position 0.5 -> 0.2 + 0.5 * 0.7 = 0.55, a drop of 0.35
    assert statuses(report) == [
        ("min 0.50", "", "fail"), ("max_drop 0.30", "", "fail"), ("min 0.80", "", "pass"),
        ("min 0.50", "category=a", "pass"), ("max_drop 0.30", "category=a", "pass"),
        ("min 0.80", "category=a", "pass"),
        ("min 0.50", "category=b", "fail"), ("max_drop 0.30", "category=b", "fail"),
        ("min 0.80", "category=b", "pass")]


def test_the_stricter_of_base_and_head_applies_to_the_new_rules():
    base = config("      mean_score: {max_example_drop: {by: 0.05, count: 2}}\n"
                  "      latency_p90: {max_increase_pct: 30}\n"
                  "      critical: {tag: safety, max_failures: 2}\n")
    head = config("      mean_score: {max_example_drop: {by: 0.1, count: 0}}\n"
                  "      latency_p90: {max_increase_pct: 50}\n"
                  "      critical: {tag: [safety, legal], max_failures: 3}\n")
    merged = merge_rules(base, head)[0].suites[0]
    assert merged.gate["mean_score"] == GateRule("mean_score", line=7, max_example_drop=0.05,
                                                 max_example_drops=0)
    assert merged.gate["latency_p90"].max_increase_pct == 30
    assert merged.gate_options == GateOptions(critical_tags=("safety", "legal"),
                                              critical_max_failures=2, line=7)
    # a critical rule head adds keeps head's allowance
    plain = config("      pass_rate: {min: 0.5}\n")
    assert merge_rules(plain, head)[0].suites[0].gate_options.critical_max_failures == 3


def error_of(gate_text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        config(gate_text)
    return caught.value


@pytest.mark.parametrize(("gate_text", "line", "message"), [
    ("      mean_score: {max_example_drop: 0.05}\n", 7,
     "`max_example_drop` of 'mean_score' must be a mapping `{by: 0.05, count: 0}` (by: the drop "
     "of one example's value that counts, count: how many such examples are allowed), got 0.05"),
    ("      mean_score:\n        max_example_drop: {count: 1}\n", 8,
     "`max_example_drop` of 'mean_score' needs `by`, e.g. `{by: 0.05, count: 0}`"),
    ("      mean_score:\n        max_example_drop:\n          by: 0\n", 9,
     "`by` of `max_example_drop` of 'mean_score' must be a number above 0 (in the metric's "
     "units, a fraction 0-1 for rates), got 0"),
    ("      mean_score:\n        max_example_drop:\n          by: 0.1\n          count: -1\n",
     10, "`count` of `max_example_drop` of 'mean_score' must be an integer >= 0, got -1"),
    ("      mean_score: {max_example_drop: {by: 0.1, most: 2}}\n", 7, "most"),
    ("      latency_p90: {max_example_drop: {by: 100}}\n", 7,
     "`max_example_drop` of 'latency_p90' compares examples one by one, but latency_p90 is not "
     "a mean over examples; use `max`/`max_increase` for it"),
    ("      median_score: {max_example_drop: {by: 0.1}}\n", 7,
     "`max_example_drop` of 'median_score' compares examples one by one, but median_score is "
     "not a mean over examples; use `min`/`max_drop` for it"),
    ("      p10_score: {regression: {alpha: 0.05}}\n", 7,
     "`regression` of 'p10_score' compares examples one by one, but p10_score is not a mean "
     "over examples; use `min`/`max_drop` for it"),
    ("      min_score: {max: 0.5}\n", 7, "`max` of 'min_score': higher is better"),
    ("      latency_p90:\n        max_increase_pct: -5\n", 8,
     "`max_increase_pct` of 'latency_p90' must be a number of percent, 0 or more (20 allows "
     "head 20% above base), got -5"),
    ("      cost_mean: {max_increase_pct: twenty}\n", 7,
     "`max_increase_pct` of 'cost_mean' must be a number of percent, 0 or more (20 allows head "
     "20% above base), got 'twenty'"),
    ("      mean_score: {max_increase_pct: 20}\n", 7,
     "`max_increase_pct` of 'mean_score': higher is better for mean_score (a drop is the "
     "regression), so a rise in percent is no regression: use `min` or `max_drop` instead"),
    ("      error_rate: {max_increase_pct: 20}\n", 7,
     "`max_increase_pct` of 'error_rate': error_rate is a rate (a fraction 0-1), where a "
     "percent of base says little near 0: use `max_increase` (absolute, e.g. 0.02) instead"),
    ("      critical: {tag: safety, max_failures: -1}\n", 7,
     "`critical.max_failures` must be an integer >= 0, got -1"),
    ("      critical:\n        tag: safety\n        max_failures: 1.5\n", 9,
     "`critical.max_failures` must be an integer >= 0, got 1.5"),
    ("      critical: {max_failures: 1}\n", 7,
     "`critical` needs `tag`, e.g. `critical: {tag: must_pass}`"),
])
def test_bad_rules_are_config_errors_on_their_line(gate_text, line, message):
    err = error_of(gate_text)
    assert (err.path, err.line) == (".llmgate.yml", line)
    assert message in err.message


def test_max_example_drop_with_no_value_on_both_sides_decides_nothing():
    cfg = config("      assertion.regex.mean_score: {max_example_drop: {by: 0.05}}\n"
                 "      on_inconclusive: fail\n")
    [outcome] = gate(cfg, scored(BASE), scored(BASE)).outcomes  # no example ran a regex
    assert (outcome.status, outcome.effect) == ("inconclusive", "failure")
    assert outcome.reason.startswith("no example has a value of assertion.regex.mean_score at "
                                     "both base and head")
