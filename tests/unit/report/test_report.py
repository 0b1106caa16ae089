"""Rendering of gate reports: exact markdown for a known report, GitHub's limits, hostile text."""

import json
import re
from dataclasses import replace
from typing import Any

from worker.contract import COMMENT_MARKER
from worker.errors import ConfigError
from worker.evals.types import GateReport, Regression, RuleOutcome, RunResult, SuiteResult
from worker.report import render as report

HEAD_SHA = "a" * 40
BASE_SHA = "b" * 40
HOSTILE = "<img src=x onerror=alert(1)> hi @org/team | pipe | ```js\nalert(1)\n``` done"


def _run(sha: str, **metrics: dict[str, float]) -> RunResult:
    return RunResult(sha, {name: SuiteResult(name, f"evals/{name}.jsonl", (), values)
                           for name, values in metrics.items()})


def _regression(suite: str, line: int, head_output: Any = "other", **kw: Any) -> Regression:
    fields: dict[str, Any] = {"suite": suite, "dataset": f"evals/{suite}.jsonl", "line": line,
                              "example_id": f"t{line:02d}", "expected": "billing",
                              "base_output": "billing", "head_output": head_output,
                              "reason": f'equals: expected "billing", got "{head_output}"'}
    fields.update(kw)
    return Regression(**fields)


def _failing(regressions: tuple[Regression, ...] = ()) -> GateReport:
    outcomes = (
        RuleOutcome("tickets", "pass_rate", "min 0.80", 0.925, 0.775, -0.15, "fail",
                    "0.775 is below the minimum 0.80"),
        RuleOutcome("tickets", "pass_rate", "max_drop 0.05", 0.925, 0.775, -0.15, "fail",
                    "dropped 0.150 from base 0.925 (allowed 0.05)"),
        RuleOutcome("faq", "assertion.contains.pass_rate", "min 0.50", None, 0.9, None, "pass"),
        RuleOutcome("faq", "assertion.contains.pass_rate", "max_drop 0.10", None, 0.9, None,
                    "skipped", "no base result"),
    )
    regressions = regressions or (_regression("tickets", 7), _regression("tickets", 3, "bug"))
    return GateReport("failure", outcomes, regressions,
                      _run(HEAD_SHA, tickets={"pass_rate": 0.775}, faq={"pass_rate": 0.9}),
                      _run(BASE_SHA, tickets={"pass_rate": 0.925}),
                      notes=("suite faq has no base result: relative rules skipped",))


def _config_error(line: int | None = 7) -> GateReport:
    err = ConfigError(".llmgate.yml", line, "unknown key `gat`; did you mean `gate`?")
    return GateReport("failure", (), (), None, None, config_error=err)


def test_summary_is_exact_for_a_known_report() -> None:
    assert report.check_summary(_failing()) == (
        "### ❌ llmgate: fail\n"
        "\n"
        "**Why:** decided by tickets pass_rate min 0.80 (fail; 1 more rule too): 0.775 is below "
        "the minimum 0.80.\n"
        "\n"
        "**Head** `aaaaaaa` · **base** `bbbbbbb`\n"
        "\n"
        "| suite | metric | base | head | delta | rule | status |\n"
        "| --- | --- | ---: | ---: | ---: | --- | --- |\n"
        "| tickets | pass_rate | 0.925 | 0.775 | -0.150 | min 0.80; max_drop 0.05 | ❌ fail |\n"
        "| faq | assertion.contains.pass_rate | — | 0.900 | — | min 0.50; max_drop 0.10 "
        "| ✅ pass |\n"
        "\n"
        "**2 examples regressed**: they passed at base and fail at head.\n"
        "\n"
        "**Rules that failed or were skipped:**\n"
        "- tickets pass_rate: min 0.80: 0.775 is below the minimum 0.80\n"
        "- tickets pass_rate: max_drop 0.05: dropped 0.150 from base 0.925 (allowed 0.05)\n"
        "- faq assertion.contains.pass_rate: max_drop 0.10: no base result\n"
        "\n"
        "**Notes:**\n"
        "- suite faq has no base result: relative rules skipped\n")


def test_comment_starts_with_the_marker_and_lists_regressions_in_line_order() -> None:
    body = report.comment_body(_failing(), head_sha=HEAD_SHA, base_sha=BASE_SHA,
                               check_url="https://github.com/o/r/runs/42")
    lines = body.splitlines()
    assert lines[:6] == [COMMENT_MARKER, "### ❌ llmgate: fail", "",
                         "**Why:** decided by tickets pass_rate min 0.80 (fail; 1 more rule too): "
                         "0.775 is below the minimum 0.80.", "",
                         "**Head** `aaaaaaa` · **base** `bbbbbbb`"]
    items = [line for line in lines if line.startswith("**t")]
    assert items == [
        '**t03** · evals/tickets.jsonl:3 · equals: expected "billing", got "bug"',
        '**t07** · evals/tickets.jsonl:7 · equals: expected "billing", got "other"',
    ]
    assert ("<table><tr><th>expected</th><th>base output</th><th>head output</th></tr>"
            "<tr><td>billing</td><td>billing</td><td>bug</td></tr></table>") in lines
    assert "#### tickets · ❌ fail" in lines
    assert ("<details><summary>2 examples got worse (passed at base, fail at head)</summary>"
            in lines)
    assert "Comment `/llmgate rerun` to run again." in body
    assert "[Check run details](https://github.com/o/r/runs/42)" in body


def test_cli_markdown_has_no_marker_and_no_rerun_footer() -> None:
    text = report.render_markdown(_failing())
    assert text.startswith("### ❌ llmgate: fail\n")
    assert COMMENT_MARKER not in text and "/llmgate rerun" not in text
    assert "**Head** `aaaaaaa` · **base** `bbbbbbb`" in text  # taken from the runs


def test_check_url_that_is_not_http_is_not_linked() -> None:
    gate = replace(_failing(), base=None)
    body = report.comment_body(gate, head_sha=HEAD_SHA, base_sha=None,
                               check_url="javascript:alert(1)")
    assert "javascript" not in body and "no base run" in body


def test_titles_give_verdict_and_headline_numbers() -> None:
    assert report.check_title(_failing()) == (
        "llmgate: fail, 2 regressions - tickets pass_rate 0.775 (-0.150)")
    passing = GateReport("success", (RuleOutcome("tickets", "pass_rate", "max_drop 0.05", 0.91,
                                                 0.93, 0.02, "pass"),), (), None, None)
    assert report.check_title(passing) == "llmgate: pass - tickets pass_rate 0.930 (+0.020)"
    assert report.check_title(_config_error()) == (
        "llmgate: configuration error in .llmgate.yml:7")
    long_name = GateReport("failure", (RuleOutcome("x" * 500, "pass_rate", "min 0.8", None, 0.1,
                                                   None, "fail"),), (), None, None)
    assert len(report.check_title(long_name)) < 120


def test_annotations_one_per_regression_in_suite_then_line_order() -> None:
    regressions = (_regression("tickets", 9), _regression("faq", 2), _regression("tickets", 4))
    result = report.annotations(_failing(regressions))
    # head.suites lists tickets before faq, so tickets' annotations come first.
    assert [(a["path"], a["start_line"]) for a in result] == [
        ("evals/tickets.jsonl", 4), ("evals/tickets.jsonl", 9), ("evals/faq.jsonl", 2)]
    assert result[0] == {
        "path": "evals/tickets.jsonl", "start_line": 4, "end_line": 4,
        "annotation_level": "failure", "title": "tickets: example t04 regressed",
        "message": 'expected: billing\nactual: other\nequals: expected "billing", got "other"',
        "raw_details": "base output: billing"}


def test_config_error_renders_file_line_and_message_everywhere() -> None:
    gate = _config_error()
    summary = report.check_summary(gate)
    assert summary.startswith("### ❌ llmgate: configuration error\n")
    assert ("```text\n.llmgate.yml:7: unknown key `gat`; did you mean `gate`?\n```"
            in summary)
    assert report.check_text(gate).startswith("**Configuration error** in .llmgate.yml:7\n")
    assert report.annotations(gate) == [{
        "path": ".llmgate.yml", "start_line": 7, "end_line": 7, "annotation_level": "failure",
        "title": "llmgate: configuration error",
        "message": "unknown key `gat`; did you mean `gate`?"}]
    assert report.annotations(_config_error(None))[0]["start_line"] == 1
    body = report.comment_body(gate, head_sha=HEAD_SHA, base_sha=BASE_SHA)
    assert body.startswith(COMMENT_MARKER + "\n") and ".llmgate.yml:7: unknown key" in body
    pushed = "Fix the file in this pull request and push; llmgate runs again on the new commit."
    assert pushed in body and pushed in report.check_text(gate)
    local = report.render_markdown(gate)
    assert "Fix the file and run `llmgate run` again." in local and pushed not in local


def test_137_regressions_stay_within_githubs_limits() -> None:
    regressions = tuple(_regression("tickets", n, head_output="x" * 3000)
                        for n in range(1, 138))
    gate = _failing(regressions)
    assert len(report.annotations(gate)) == 137
    summary, text = report.check_summary(gate), report.check_text(gate)
    assert len(summary) <= 65535 and "**137 examples regressed**" in summary
    assert len(text) <= 65535
    shown = text.count("\n### tickets: example") + text.startswith("### tickets: example")
    more = re.search(r"\.\.\. (\d+) more regressed examples not shown", text)
    assert more is not None and 0 < shown < 137 and shown + int(more[1]) == 137
    body = report.comment_body(gate, head_sha=HEAD_SHA, base_sha=BASE_SHA)
    assert len(body) <= 65535
    assert "137 examples got worse" in body and "... 117 more: see the check run." in body
    assert body.count("<table>") == 20


def test_too_many_metric_rows_are_cut_with_a_count() -> None:
    outcomes = tuple(RuleOutcome(f"suite-{n:04d}-{'s' * 60}", "pass_rate", "min 0.80", 0.9, 0.9,
                                 0.0, "pass") for n in range(2000))
    gate = GateReport("success", outcomes, (), None, None)
    for rendered in (report.check_summary(gate),
                     report.comment_body(gate, head_sha=HEAD_SHA, base_sha=BASE_SHA)):
        assert len(rendered) <= 65535
        rows = len(re.findall(r"^\| suite-\d{4}", rendered, re.MULTILINE))
        more = re.search(r"^\.\.\. (\d+) more rows$", rendered, re.MULTILINE)
        assert more is not None and rows + int(more[1]) == 2000 and rows > 100


def test_a_70k_character_output_is_clipped_everywhere() -> None:
    huge = "é" * 70_000
    gate = _failing((_regression("tickets", 5, head_output=huge, reason=huge),))
    (annotation,) = report.annotations(gate)
    assert len(annotation["message"].encode("utf-8")) <= 64 * 1024
    assert len(annotation["message"]) < 3000 and "clipped, 70000 chars" in annotation["message"]
    assert len(report.check_text(gate)) <= 65535
    assert "clipped, 70000 chars" in report.check_text(gate)
    body = report.comment_body(gate, head_sha=HEAD_SHA, base_sha=BASE_SHA)
    assert len(body) <= 65535 and "**t05** · evals/tickets.jsonl:5" in body
    assert "clipped, 70000 chars" in body
    assert len(report.check_summary(gate)) <= 65535


def test_hostile_output_cannot_mention_inject_html_or_break_the_comment() -> None:
    gate = _failing((_regression("tickets", 3, head_output=HOSTILE, expected="@admin"),))
    body = report.comment_body(gate, head_sha=HEAD_SHA, base_sha=BASE_SHA)
    assert "<img" not in body and "&lt;img src=x onerror=alert(1)&gt;" in body
    assert re.search(r"@(?!\u200d)", body) is None  # every @ is followed by a zero-width joiner
    (row,) = [line for line in body.splitlines() if line.startswith("<table>")]
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells == ["@\u200dadmin", "billing",
                     "&lt;img src=x onerror=alert(1)&gt; hi @\u200dorg/team | pipe | ```js<br>"
                     "alert(1)<br>``` done"]  # one source line: the HTML block cannot end
    for rendered in (report.check_summary(gate), report.check_text(gate)):
        assert re.search(r"@(?!\u200d)", rendered) is None


def test_hostile_output_stays_inside_its_code_block_in_the_details() -> None:
    text = report.check_text(_failing((_regression("tickets", 3, head_output=HOSTILE),)))
    lines = text.splitlines()
    start = lines.index("Head output:") + 1
    fence = re.match(r"(`{3,})text$", lines[start])
    assert fence is not None and len(fence[1]) > 3  # longer than the ``` inside
    # The block closes at the first line made of that many or more backticks only.
    end = next(i for i in range(start + 1, len(lines))
               if re.fullmatch(f"`{{{len(fence[1])},}}", lines[i].strip()))
    assert "\n".join(lines[start + 1:end]) == HOSTILE.replace("@", "@\u200d")


def test_hostile_suite_and_example_names_are_escaped_in_tables() -> None:
    suite = "evil | suite\n# heading <b>"
    gate = GateReport("failure",
                      (RuleOutcome(suite, "pass_rate", "min 0.8", 0.9, 0.1, -0.8, "fail", "low"),),
                      (_regression(suite, 2, example_id="_x_ *y* [l](http://e)"),), None, None)
    summary = report.check_summary(gate)
    (row,) = [line for line in summary.splitlines() if line.startswith("| evil")]
    assert row == ("| evil \\| suite # heading &lt;b&gt; | pass_rate | 0.900 | 0.100 | -0.800 "
                   "| min 0.8 | ❌ fail |")
    body = report.comment_body(gate, head_sha=HEAD_SHA, base_sha=None)
    assert "**\\_x\\_ \\*y\\* \\[l\\](http://e)** · " in body


def test_json_is_stable_and_complete() -> None:
    gate = _failing()
    rendered = report.render_json(gate)
    assert rendered == report.render_json(gate)
    doc = json.loads(rendered)
    assert doc["conclusion"] == "failure" and doc["config_error"] is None
    assert doc["head_sha"] == HEAD_SHA and doc["base_sha"] == BASE_SHA
    assert doc["metrics"] == {"tickets": {"base": {"pass_rate": 0.925},
                                          "head": {"pass_rate": 0.775}},
                              "faq": {"base": None, "head": {"pass_rate": 0.9}}}
    assert [r["line"] for r in doc["regressions"]] == [3, 7]
    assert doc["outcomes"][0] == {"suite": "tickets", "metric": "pass_rate", "rule": "min 0.80",
                                  "base": 0.925, "head": 0.775, "delta": -0.15, "status": "fail",
                                  "reason": "0.775 is below the minimum 0.80", "group": "",
                                  "effect": "none"}
    nan = GateReport("success", (RuleOutcome("s", "m", "min 0", None, float("nan"), None,
                                             "pass"),), (), None, None)
    assert json.loads(report.render_json(nan))["outcomes"][0]["head"] is None
    error = json.loads(report.render_json(_config_error()))["config_error"]
    assert error == {"path": ".llmgate.yml", "line": 7,
                     "message": "unknown key `gat`; did you mean `gate`?"}
