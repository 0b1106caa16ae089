"""The trend line of each gated metric (worker/report/trend.py, issue 35): the sparkline, the
range and where head lies, escaping, GitHub's limits, and reports without history unchanged."""

from __future__ import annotations

import math

from worker.contract import COMMENT_MARKER
from worker.evals.types import GateReport, RuleOutcome, RunResult, SuiteResult
from worker.github.limits import MAX_COMMENT_BYTES, MAX_OUTPUT_BYTES, utf8_size
from worker.pipeline.report_values import ConfigReport, MultiReport
from worker.report import multi as report_multi
from worker.report import render
from worker.report.trend import (
    MAX_LINES,
    TrendData,
    gated,
    placement,
    sparkline,
    trend_line,
    trend_lines,
    wanted,
)

HEAD_SHA, BASE_SHA = "a" * 40, "b" * 40
PUSHES = (0.78, 0.80, 0.79, 0.82, 0.84, 0.82, 0.80, 0.81, 0.83, 0.82)  # oldest first
HEADING = ("**Trend on `main`** (the last pushes, oldest → newest; then this pull request's "
           "base and head):")
HOSTILE = "<img src=x> *bold* @org/team | `tick` [x](y)"


def _report(outcomes: tuple[RuleOutcome, ...] | None = None) -> GateReport:
    outcomes = outcomes or (
        RuleOutcome("tickets", "pass_rate", "min 0.60", 0.82, 0.70, -0.12, "pass"),
        RuleOutcome("tickets", "pass_rate", "max_drop 0.05", 0.82, 0.70, -0.12, "fail",
                    "dropped 0.120"),
        RuleOutcome("tickets", "pass_rate", "max_drop 0.05", 0.9, 0.5, -0.4, "fail",
                    "dropped 0.400", group="category=billing"),
        RuleOutcome("faq", "mean_score", "min 0.5", 0.66, 0.67, 0.01, "pass"))
    suites = {o.suite for o in outcomes}
    head = RunResult(HEAD_SHA, {s: SuiteResult(s, f"evals/{s}.jsonl", (), {}) for s in suites})
    base = RunResult(BASE_SHA, {s: SuiteResult(s, f"evals/{s}.jsonl", (), {}) for s in suites})
    return GateReport("failure", outcomes, (), head, base)


def _data(**series: tuple[float, ...]) -> TrendData:
    return TrendData("main", {tuple(k.split("__")): v  # type: ignore[misc]
                              for k, v in series.items()})


# ------------------------------------------------------------------ pure parts


def test_sparkline_spans_the_eight_blocks_and_a_flat_series_is_the_middle() -> None:
    assert sparkline([0.0, 1 / 7, 2 / 7, 3 / 7, 4 / 7, 5 / 7, 6 / 7, 1.0], 0.0, 1.0) == "▁▂▃▄▅▆▇█"
    assert sparkline([0.5, 0.5, 0.5], 0.5, 0.5) == "▄▄▄"
    assert sparkline([2.0, -1.0], 0.0, 1.0) == "█▁"  # clamped


def test_a_head_below_every_push_says_so_with_the_range() -> None:
    line = trend_line("tickets", "pass_rate", PUSHES, 0.82, 0.70)
    assert line == ("- tickets pass_rate: ▅▆▆▇█▇▆▇▇▇ │ base ▇ · head ▁ · head 0.700 is below "
                    "every one of the last 10 pushes (0.780–0.840)")


def test_a_head_within_the_range_is_noise_and_above_is_news_too() -> None:
    assert trend_line("tickets", "pass_rate", PUSHES, 0.82, 0.80) == (
        "- tickets pass_rate: ▁▃▂▆█▆▃▅▇▆ │ base ▆ · head ▃ · head 0.800 is within the range "
        "of the last 10 pushes (0.780–0.840)")
    assert placement(0.90, PUSHES) == "above every one of the last 10 pushes"
    assert placement(0.84, PUSHES) == "within the range of the last 10 pushes"  # the edge
    assert placement(0.5, (0.6, 0.7)) == "below every one of the last 2 pushes"


def test_no_line_without_two_points_or_a_head_value_and_non_finite_values_are_skipped() -> None:
    assert trend_line("s", "m", (0.5,), 0.5, 0.5) is None
    assert trend_line("s", "m", (0.5, math.nan), 0.5, 0.5) is None
    assert trend_line("s", "m", PUSHES, 0.8, None) is None
    assert trend_line("s", "m", PUSHES, 0.8, math.inf) is None
    no_base = trend_line("s", "m", (0.2, math.inf, 0.4), None, 0.3)
    assert no_base == ("- s m: ▁█ │ head ▄ · head 0.300 is within the range of the last 2 "
                       "pushes (0.200–0.400)")


def test_gated_metrics_are_the_whole_suite_rules_once_each_in_report_order() -> None:
    report = _report()
    assert gated(report) == [("tickets", "pass_rate", 0.82, 0.70),
                             ("faq", "mean_score", 0.66, 0.67)]
    multi = MultiReport((ConfigReport("services/a/.llmgate.yml", "services/a", report),
                         ConfigReport(".llmgate.yml", "", _report())))
    assert wanted(multi) == {("services/a: tickets", "pass_rate"),
                             ("services/a: faq", "mean_score"), ("tickets", "pass_rate"),
                             ("faq", "mean_score")}


def test_names_from_the_history_are_escaped_and_the_branch_fits_a_code_span() -> None:
    outcome = RuleOutcome(HOSTILE, HOSTILE, "min 0.5", 0.8, 0.7, -0.1, "pass")
    data = TrendData("ma`in|@x", {(HOSTILE, HOSTILE): PUSHES})
    heading, line = trend_lines(_report((outcome,)), data)
    assert heading.startswith("**Trend on `ma in  x`**")
    assert "<img" not in line and "@org" not in line and "`tick`" not in line
    assert "&lt;img src=x&gt; \\*bold\\* @\u200dorg/team \\| \\`tick\\` \\[x\\](y)" in line


def test_more_gated_metrics_than_the_cap_are_counted() -> None:
    outcomes = tuple(RuleOutcome("s", f"m{i:02d}", "min 0", 0.5, 0.5, 0.0, "pass")
                     for i in range(MAX_LINES + 5))
    data = TrendData("main", {("s", f"m{i:02d}"): PUSHES for i in range(MAX_LINES + 5)})
    found = trend_lines(_report(outcomes), data)
    assert len(found) == 1 + MAX_LINES + 1
    assert found[-1] == "- … 5 more gated metrics"


# ------------------------------------------------------------------ in the report


def test_without_history_the_comment_and_summary_are_byte_for_byte_as_before() -> None:
    report = _report()
    multi = MultiReport((ConfigReport(".llmgate.yml", "", report),))
    plain = render.comment_body(report, head_sha=HEAD_SHA, base_sha=BASE_SHA)
    assert report_multi.comment_body(multi, head_sha=HEAD_SHA, base_sha=BASE_SHA,
                                     trends=None) == plain
    unrelated = _data(other__pass_rate=PUSHES)  # history, but of no gated metric
    assert report_multi.comment_body(multi, head_sha=HEAD_SHA, base_sha=BASE_SHA,
                                     trends=unrelated) == plain
    assert report_multi.check_output(multi, HEAD_SHA, unrelated).summary == \
        render.check_summary(report)
    assert "Trend" not in plain


def test_the_comment_and_the_summary_show_the_lines_under_the_metric_table() -> None:
    report = _report()
    multi = MultiReport((ConfigReport(".llmgate.yml", "", report),))
    data = _data(tickets__pass_rate=PUSHES, faq__mean_score=(0.6, 0.7, 0.65))
    body = report_multi.comment_body(multi, head_sha=HEAD_SHA, base_sha=BASE_SHA, trends=data)
    block = (f"\n\n{HEADING}\n"
             "- tickets pass_rate: ▅▆▆▇█▇▆▇▇▇ │ base ▇ · head ▁ · head 0.700 is below every "
             "one of the last 10 pushes (0.780–0.840)\n"
             "- faq mean_score: ▁█▅ │ base ▅ · head ▆ · head 0.670 is within the range of the "
             "last 3 pushes (0.600–0.700)\n")
    assert body.startswith(COMMENT_MARKER)
    table_end = body.index("| faq | mean_score |")
    assert body.index(block) > table_end
    assert body.replace(block, "\n", 1) == render.comment_body(report, head_sha=HEAD_SHA,
                                                               base_sha=BASE_SHA)
    summary = report_multi.check_output(multi, HEAD_SHA, data).summary
    assert block in summary
    assert summary.replace(block, "\n", 1) == render.check_summary(report)


def test_each_config_in_a_folder_gets_its_own_lines() -> None:
    multi = MultiReport((ConfigReport("a/.llmgate.yml", "a", _report()),
                         ConfigReport("b/.llmgate.yml", "b", _report())))
    data = _data(**{"a: tickets__pass_rate": PUSHES, "b: tickets__pass_rate": (0.75, 0.8)})
    body = report_multi.comment_body(multi, head_sha=HEAD_SHA, base_sha=BASE_SHA, trends=data)
    section_a, section_b = body.split("a/.llmgate.yml", 2)[2].split("b/.llmgate.yml", 1)
    assert "below every one of the last 10 pushes (0.780–0.840)" in section_a
    assert "below every one of the last 2 pushes (0.750–0.800)" in section_b
    summary = report_multi.check_output(multi, HEAD_SHA, data).summary
    assert summary.count("**Trend on `main`**") == 2


def test_a_report_at_github_s_limit_stays_under_it_with_the_lines() -> None:
    outcomes = tuple(RuleOutcome(f"suite-{i:04d} " + "字" * 60, "pass_rate", "min 0.5", 0.8,
                                 0.7, -0.1, "pass") for i in range(600))
    report = _report(outcomes)
    multi = MultiReport((ConfigReport(".llmgate.yml", "", report),))
    data = TrendData("main", {(o.suite, "pass_rate"): PUSHES for o in outcomes})
    body = report_multi.comment_body(multi, head_sha=HEAD_SHA, base_sha=BASE_SHA, trends=data)
    summary = report_multi.check_output(multi, HEAD_SHA, data).summary
    assert utf8_size(body) <= MAX_COMMENT_BYTES and utf8_size(summary) <= MAX_OUTPUT_BYTES
    assert "more rows" in body and body.count("is below every one of") == MAX_LINES
