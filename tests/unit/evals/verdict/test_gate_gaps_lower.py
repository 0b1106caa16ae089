"""Lower-is-better metrics: ``max``/``max_increase`` parsed and gated, rules the right way round."""

from __future__ import annotations

import pytest

from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.score.direction import LOWER_IS_BETTER
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    AssertionResult,
    Config,
    ExampleResult,
    GateReport,
    GateRule,
    RunResult,
    SuiteResult,
)
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.rules import merge_rules

DATASET = "evals/s.jsonl"


def config(gate: str) -> Config:
    return parse_config(f"""\
version: 1
suites:
  - name: s
    dataset: {DATASET}
    target: {{command: "bot {{input_file}} {{output_file}}"}}
    gate:
{gate}""")


def error_of(gate: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        config(gate)
    return caught.value


def test_max_and_max_increase_parse_in_metric_units() -> None:
    cfg = config("      latency_p90: {max: 1500, max_increase: 200}\n"
                 "      cost_mean: {max: 0.002, max_increase: 0.0005, regression: {alpha: 0.05}}\n"
                 "      error_rate: {max: 0.05, max_increase: 0.02, max_new_failures: 0}\n")
    gate = cfg.suites[0].gate
    assert gate["latency_p90"] == GateRule("latency_p90", line=7, max=1500.0, max_increase=200.0)
    assert gate["cost_mean"] == GateRule("cost_mean", line=8, regression_alpha=0.05, max=0.002,
                                         max_increase=0.0005)
    assert gate["error_rate"] == GateRule("error_rate", line=9, max_new_failures=0, max=0.05,
                                          max_increase=0.02)


@pytest.mark.parametrize(("gate", "line", "message"), [
    ("      error_rate: {min: 0.1}\n", 7,
     "`min` of 'error_rate': lower is better for error_rate (a rise is the regression), so use "
     "`max` (head at most this) or `max_increase` (head at most this far above base) instead "
     "of `min`/`max_drop`"),
    ("      latency_p90:\n        max_drop: 100\n", 8,
     "`max_drop` of 'latency_p90': lower is better for latency_p90 (a rise is the regression), "
     "so use `max` (head at most this) or `max_increase` (head at most this far above base) "
     "instead of `min`/`max_drop`"),
    ("      pass_rate: {max: 0.9}\n", 7,
     "`max` of 'pass_rate': higher is better for pass_rate (a drop is the regression), so use "
     "`min` (head at least this) or `max_drop` (head at most this far below base) instead of "
     "`max`/`max_increase`"),
    ("      accuracy: {max_increase: 0.1}\n", 7,
     "`max_increase` of 'accuracy': higher is better for accuracy (a drop is the regression), "
     "so use `min` (head at least this) or `max_drop` (head at most this far below base) "
     "instead of `max`/`max_increase`"),
    ("      latency_p90: {}\n", 7,
     "gate metric 'latency_p90' needs `max` or `max_increase`, or one of regression, "
     "non_inferiority_margin, max_new_failures, min_detectable"),
    ("      latency_p99: {regression: {alpha: 0.05}}\n", 7,
     "`regression` of 'latency_p99' compares examples one by one, but latency_p99 is not a "
     "mean over examples; use `max`/`max_increase` for it"),
    ("      error_rate: {max: 1.5}\n", 7,
     "`max` of 'error_rate' must be a number from 0 to 1, got 1.5"),
    ("      cost_total: {max: -1}\n", 7,
     "`max` of 'cost_total' must be a number 0 or more (in the metric's units, a fraction 0-1 "
     "for rates), got -1"),
    ("      tokens_out_mean: {max_increase: true}\n", 7,
     "`max_increase` of 'tokens_out_mean' must be a number 0 or more (in the metric's units, a "
     "fraction 0-1 for rates), got true"),
])
def test_wrong_direction_and_bad_values_are_config_errors(gate: str, line: int,
                                                           message: str) -> None:
    err = error_of(gate)
    assert (err.path, err.line, err.message) == (".llmgate.yml", line, message)


def test_every_lower_is_better_metric_accepts_max() -> None:
    for metric in LOWER_IS_BETTER:
        assert config(f"      {metric}: {{max: 0.5}}\n").suites[0].gate[metric].max == 0.5


def result(i: int, *, errored: bool = False, latency_ms: float = 100.0,
           cost_usd: float | None = None) -> ExampleResult:
    check = AssertionResult("equals", not errored, float(not errored))
    return ExampleResult(f"e{i}", i + 1, not errored, errored, None if errored else "out", "out",
                         "boom" if errored else None, (check,), latency_ms=latency_ms,
                         cost_usd=cost_usd)


def run(results: list[ExampleResult]) -> RunResult:
    return RunResult("sha", {"s": SuiteResult("s", DATASET, tuple(results),
                                              suite_metrics(results))})


def rows(report: GateReport) -> list[tuple[str, str, str]]:
    return [(o.metric, o.rule, o.status) for o in report.outcomes]


def test_latency_and_error_rate_rises_fail_with_exact_values() -> None:
    cfg = config("      latency_p90: {max: 1500, max_increase: 200}\n"
                 "      error_rate: {max: 0.2, max_increase: 0.05, regression: {alpha: 0.05}, "
                 "max_new_failures: 0}\n")
    base = run([result(i, latency_ms=100.0 * (i + 1)) for i in range(10)])
    head = run([result(i, latency_ms=100.0 * (i + 1) + 250, errored=i < 3) for i in range(10)])
    report = compare(cfg, head, base)
    assert base.suites["s"].metrics["latency_p90"] == pytest.approx(910.0)  # type 7 percentile
    assert rows(report) == [
        ("latency_p90", "max 1500", "pass"), ("latency_p90", "max_increase 200", "fail"),
        ("error_rate", "max 0.2", "fail"), ("error_rate", "max_increase 0.05", "fail"),
        ("error_rate", "regression alpha 0.05", "pass"),
        ("error_rate", "max_new_failures 0", "regression")]
    reasons = [o.reason for o in report.outcomes]
    # errored examples have no latency: head's p90 is over the 7 answered ones, 650..1250 ms
    assert head.suites["s"].metrics["latency_p90"] == pytest.approx(1190.0)
    assert reasons[1] == "rose 280 from base 910 (allowed 200)"
    assert reasons[2] == "0.3 is above the maximum 0.2"
    assert reasons[3] == "rose 0.3 from base 0 (allowed 0.05)"
    assert reasons[5] == "3 examples pass at base and fail at head (allowed 0): e0, e1, e2"
    (c,) = report.comparisons
    assert (c.metric, c.test, c.broken, c.fixed, c.p_value) == ("error_rate", "mcnemar", 3, 0,
                                                                0.125)  # 0.5 ** 3, one-sided
    assert report.conclusion == "failure"


def test_fewer_errors_and_lower_latency_pass_every_rule() -> None:
    cfg = config("      latency_p90: {max: 1500, max_increase: 0}\n"
                 "      error_rate: {max: 0.2, max_increase: 0, regression: {alpha: 0.05}, "
                 "non_inferiority_margin: 0.01, max_new_failures: 0}\n")
    base = run([result(i, latency_ms=500.0, errored=i < 4) for i in range(20)])
    head = run([result(i, latency_ms=400.0) for i in range(20)])
    report = compare(cfg, head, base)
    assert [o.status for o in report.outcomes] == ["pass"] * 7
    (c,) = report.comparisons
    assert (c.broken, c.fixed, c.p_value, c.delta) == (0, 4, 1.0, pytest.approx(-0.2))
    assert (c.ci_low, c.ci_high) == (pytest.approx(-0.4), pytest.approx(-0.05))  # seeded
    assert report.conclusion == "success"


def test_a_costlier_head_is_a_significant_rise_and_not_non_inferior() -> None:
    cfg = config("      cost_mean: {max_increase: 0.05, regression: {alpha: 0.05}, "
                 "non_inferiority_margin: 0.001}\n")
    base = run([result(i, cost_usd=0.01) for i in range(20)])
    head = run([result(i, cost_usd=0.01 + 0.001 * (i + 1)) for i in range(20)])
    report = compare(cfg, head, base)
    assert rows(report) == [("cost_mean", "max_increase 0.05", "pass"),
                            ("cost_mean", "regression alpha 0.05", "regression"),
                            ("cost_mean", "non_inferiority_margin 0.001", "regression")]
    (c,) = report.comparisons
    assert c.test == "wilcoxon" and c.p_value == pytest.approx(2.0 ** -20)  # exact, all worse
    assert c.delta == pytest.approx(0.0105) and c.ci_low is not None and c.ci_low > 0.001
    # 20 worse examples: too many to enumerate, so a random subgroup of 2^11 sign patterns (the
    # 2000 draws rounded up to a group, the observed pattern its identity; Hemerik & Goeman 2018)
    assert c.p_adjusted == pytest.approx(1 / 2048)
    assert report.outcomes[1].reason.startswith("significant rise: p = 0.0004883 (sign-flip min-P")
    assert report.outcomes[2].reason.endswith("of head - base lies wholly above +0.001")
    cheaper = compare(cfg, base, head)
    assert [o.status for o in cheaper.outcomes] == ["pass", "pass", "pass"]
    assert cheaper.comparisons[0].p_value == 1.0


def test_a_pull_request_cannot_loosen_max_or_max_increase() -> None:
    base = config("      latency_p90: {max: 1500, max_increase: 200}\n")
    head = config("      latency_p90: {max: 3000}\n")
    merged, notes = merge_rules(base, head)
    rule = merged.suites[0].gate["latency_p90"]
    assert (rule.max, rule.max_increase) == (1500.0, 200.0)
    assert "latency_p90 max: 1500.0 -> 3000.0; latency_p90 max_increase: 200.0 -> None" in notes[0]
