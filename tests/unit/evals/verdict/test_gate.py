"""Tests of `worker.evals.verdict.comparison` with hand-built runs."""

from __future__ import annotations

import pytest

from worker.errors import ConfigError
from worker.evals.types import (
    AssertionResult,
    CommandTarget,
    Config,
    ExampleResult,
    GateRule,
    RuleOutcome,
    RunResult,
    Settings,
    SuiteConfig,
    SuiteResult,
)
from worker.evals.verdict.comparison import NO_BASE, compare, config_error_report


def suite_config(name: str, **rules: tuple[float | None, float | None]) -> SuiteConfig:
    gate = {metric.replace("__", "."): GateRule(metric.replace("__", "."), lo, drop)
            for metric, (lo, drop) in rules.items()}
    return SuiteConfig(name, f"evals/{name}.jsonl", CommandTarget("x"), (), gate)


def example(id_: str, line: int, passed: bool, output: str = "out", error: str | None = None,
            messages: tuple[str, ...] = ()) -> ExampleResult:
    checks = tuple(AssertionResult("contains", False, 0.0, m) for m in messages)
    return ExampleResult(id_, line, passed, error is not None, None if error else output,
                         "want", error, checks)


def run(sha: str, **suites: tuple[dict[str, float], tuple[ExampleResult, ...]]) -> RunResult:
    return RunResult(sha, {name: SuiteResult(name, f"evals/{name}.jsonl", examples, metrics)
                           for name, (metrics, examples) in suites.items()})


def outcome_rows(outcomes: tuple[RuleOutcome, ...]) -> list[tuple[object, ...]]:
    return [(o.suite, o.metric, o.rule, o.status) for o in outcomes]


CONFIG = Config(1, (
    suite_config("tickets", pass_rate=(0.8, 0.05), error_rate=(None, 0.1)),
    suite_config("summaries", assertion__regex__pass_rate=(0.5, None)),
), Settings())


def test_all_rules_pass() -> None:
    head = run("h", tickets=({"pass_rate": 0.9, "error_rate": 0.0}, ()),
               summaries=({"assertion.regex.pass_rate": 0.5}, ()))
    base = run("b", tickets=({"pass_rate": 0.92, "error_rate": 0.05}, ()),
               summaries=({"assertion.regex.pass_rate": 0.6}, ()))
    report = compare(CONFIG, head, base, ["a note"])
    assert report.conclusion == "success"
    assert outcome_rows(report.outcomes) == [
        ("tickets", "pass_rate", "min 0.80", "pass"),
        ("tickets", "pass_rate", "max_drop 0.05", "pass"),
        ("tickets", "error_rate", "max_drop 0.10", "pass"),
        ("summaries", "assertion.regex.pass_rate", "min 0.50", "pass"),
    ]
    first = report.outcomes[0]
    assert (first.base, first.head, first.reason) == (0.92, 0.9, "")
    assert first.delta == pytest.approx(-0.02)
    assert report.outcomes[2].delta == pytest.approx(-0.05)
    assert (report.head, report.base, report.notes) == (head, base, ("a note",))
    assert report.regressions == ()


def test_min_and_max_drop_failures() -> None:
    head = run("h", tickets=({"pass_rate": 0.7, "error_rate": 0.0}, ()),
               summaries=({"assertion.regex.pass_rate": 0.4999}, ()))
    base = run("b", tickets=({"pass_rate": 0.8, "error_rate": 0.0}, ()),
               summaries=({"assertion.regex.pass_rate": 0.4999}, ()))
    report = compare(CONFIG, head, base)
    assert report.conclusion == "failure"
    assert [o.status for o in report.outcomes] == ["fail", "fail", "pass", "fail"]
    assert report.outcomes[0].reason == "0.70 is below the minimum 0.80"
    assert report.outcomes[1].reason == "dropped 0.10 from base 0.80 (allowed 0.05)"
    assert report.outcomes[1].delta == pytest.approx(-0.1)
    assert report.outcomes[3].delta == 0.0


def test_boundaries_hold_despite_float_noise() -> None:
    config = Config(1, (suite_config("s", pass_rate=(0.3, 0.05)),), Settings())
    head = run("h", s=({"pass_rate": 0.7 - 0.4}, ()))  # 0.29999999999999993
    base = run("b", s=({"pass_rate": 0.35}, ()))  # 0.35 - 0.29999999999999993 > 0.05
    report = compare(config, head, base)
    assert [o.status for o in report.outcomes] == ["pass", "pass"]
    assert report.conclusion == "success"
    worse = compare(config, run("h", s=({"pass_rate": 0.2999}, ())), base)
    assert [o.status for o in worse.outcomes] == ["fail", "fail"]


def test_no_base_skips_relative_rules_only() -> None:
    head = run("h", tickets=({"pass_rate": 0.9, "error_rate": 0.3}, ()),
               summaries=({"assertion.regex.pass_rate": 0.9}, ()))
    report = compare(CONFIG, head, None)
    assert [(o.rule, o.status) for o in report.outcomes] == [
        ("min 0.80", "pass"), ("max_drop 0.05", "skipped"), ("max_drop 0.10", "skipped"),
        ("min 0.50", "pass")]
    skipped = report.outcomes[1]
    assert (skipped.base, skipped.head, skipped.delta, skipped.reason) == (None, 0.9, None,
                                                                           NO_BASE)
    assert report.conclusion == "success"


def test_suite_new_at_head_is_skipped_for_max_drop() -> None:
    head = run("h", tickets=({"pass_rate": 0.85, "error_rate": 0.0}, ()),
               summaries=({"assertion.regex.pass_rate": 0.9}, ()))
    base = run("b", summaries=({"assertion.regex.pass_rate": 0.9}, ()))
    report = compare(CONFIG, head, base)
    assert [o.status for o in report.outcomes] == ["pass", "skipped", "skipped", "pass"]
    assert report.outcomes[1].reason == NO_BASE


def test_unavailable_metrics() -> None:
    config = Config(1, (suite_config("s", pass_rate=(0.5, 0.1)),), Settings())
    empty_head = run("h", s=({}, ()))
    report = compare(config, empty_head, run("b", s=({"pass_rate": 1.0}, ())))
    assert [o.status for o in report.outcomes] == ["fail", "fail"]
    assert "unavailable at head" in report.outcomes[0].reason
    report = compare(config, run("h", s=({"pass_rate": 1.0}, ())), run("b", s=({}, ())))
    assert [o.status for o in report.outcomes] == ["pass", "skipped"]
    assert report.outcomes[1].reason == "pass_rate is unavailable at base"
    report = compare(config, run("h"), None)  # head lacks the suite entirely
    assert [(o.status, o.head) for o in report.outcomes] == [("fail", None), ("skipped", None)]


def test_regressions_match_examples_by_id() -> None:
    config = Config(1, (suite_config("tickets"), suite_config("other")), Settings())
    base = run("b",
               tickets=({}, (example("a", 1, True, "old a"), example("b", 2, True, "old b"),
                             example("c", 3, False), example("d", 4, True, "old d"))),
               other=({}, (example("z", 1, True),)))
    head = run("h",
               tickets=({}, (example("new", 1, False), example("b", 2, False, "new b",
                                                               messages=("m1", "m2")),
                             example("a", 5, False, error="timed out after 1 s"),
                             example("c", 6, False), example("d", 7, True))),
               other=({}, (example("z", 1, True),)))
    report = compare(config, head, base)
    assert report.conclusion == "success"  # no rule failed; regressions are listed
    assert [(r.suite, r.dataset, r.line, r.example_id) for r in report.regressions] == [
        ("tickets", "evals/tickets.jsonl", 2, "b"), ("tickets", "evals/tickets.jsonl", 5, "a")]
    b, a = report.regressions
    assert (b.expected, b.base_output, b.head_output) == ("want", "old b", "new b")
    assert b.reason == "contains: m1; contains: m2"
    assert (a.base_output, a.head_output, a.reason) == ("old a", None, "timed out after 1 s")


def test_regressions_skip_suites_missing_at_base() -> None:
    config = Config(1, (suite_config("tickets"),), Settings())
    head = run("h", tickets=({}, (example("a", 1, False),)))
    assert compare(config, head, run("b")).regressions == ()
    assert compare(config, head, None).regressions == ()


def test_rule_text_keeps_precision() -> None:
    config = Config(1, (suite_config("s", pass_rate=(0.825, 0.005)),), Settings())
    report = compare(config, run("h", s=({"pass_rate": 0.9}, ())), None)
    assert [o.rule for o in report.outcomes] == ["min 0.825", "max_drop 0.005"]


def test_config_error_report() -> None:
    err = ConfigError(".llmgate.yml", 3, "unknown key 'x'")
    head = run("h")
    report = config_error_report(err, head)
    assert (report.conclusion, report.outcomes, report.regressions) == ("failure", (), ())
    assert (report.config_error, report.head, report.base) == (err, head, None)
    assert config_error_report(err).head is None
