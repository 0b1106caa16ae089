"""The report of a pull request: SHAs, baseline, per-suite sections, size limit, hostile outputs.

Rendered markdown is parsed with a CommonMark parser (markdown-it-py, HTML allowed, tables on,
as GitHub's renderer) to check what a reader's browser would get: every ``<details>`` closed,
one ``<!-- llmgate -->`` comment, no element a model output smuggled in.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

from markdown_it import MarkdownIt

from worker.contract import COMMENT_MARKER
from worker.evals.types import (
    ExampleResult,
    GateReport,
    Regression,
    RuleOutcome,
    RunResult,
    RunUsage,
    SuiteComparability,
    SuiteResult,
)
from worker.report import render as report

HEAD, BASE, MERGE_BASE = "a" * 40, "b" * 40, "c" * 40
SOURCE = "compared with ccccccc, the merge base (stored baseline from the push of ccccccc)"
HOSTILE = ("ok</td></tr></table>\n\n</details>\n<!-- llmgate -->\n<script>alert(1)</script>"
           "\r\n\r\n| a | b |\n```\n@admin #1 **bold** [x](javascript:alert(1)) &amp; \"q\"\rend")
#: Elements the report itself writes (markdown-it's output for our markdown and our HTML).
OURS = {"h3", "h4", "p", "strong", "code", "table", "thead", "tbody", "tr", "th", "td", "ul",
        "li", "details", "summary", "br", "hr", "sub", "em"}
VOID = {"br", "hr"}
GFM = MarkdownIt("commonmark", {"html": True}).enable("table")


class Tags(HTMLParser):
    """Records the elements, their nesting and the HTML comments of rendered HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: set[str] = set()
        self.open: list[str] = []
        self.comments: list[str] = []
        self.cells: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.add(tag)
        if tag in VOID:
            if tag == "br" and self.open and self.open[-1] == "td":
                self.cells[-1] += "\n"
            return
        self.open.append(tag)
        if tag == "td":
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        assert self.open and self.open[-1] == tag, (tag, self.open)
        self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open and self.open[-1] == "td":
            self.cells[-1] += data

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def parsed(markdown: str) -> Tags:
    tags = Tags()
    tags.feed(GFM.render(markdown))
    tags.close()
    assert tags.open == [], tags.open  # every element closed, in order
    return tags


def example(i: str, passed: bool, output: Any = "billing") -> ExampleResult:
    return ExampleResult(id=i, line=int(i[1:]), passed=passed, errored=False, output=output,
                         expected="billing")


def gate(head_output: Any = "bug", **changes: Any) -> GateReport:
    head = RunResult(HEAD, {"tickets": SuiteResult(
        "tickets", "evals/t.jsonl", (example("t1", True), example("t2", False, head_output),
                                     example("t4", True)),
        {"pass_rate": 2 / 3}, spend=RunUsage(4, 2, cost_usd=0.0123))})
    base = RunResult(MERGE_BASE, {"tickets": SuiteResult(
        "tickets", "evals/t.jsonl", (example("t1", True), example("t2", True),
                                     example("t3", True)),
        {"pass_rate": 1.0}, spend=RunUsage(0, 6))})
    outcomes = (RuleOutcome("tickets", "pass_rate", "max_drop 0.05", 1.0, 2 / 3, -1 / 3, "fail",
                            "dropped 0.33 from base 1.00 (allowed 0.05)"),)
    regressions = (Regression("tickets", "evals/t.jsonl", 2, "t2", "billing", "billing",
                              head_output, 'equals: expected "billing", got "bug"'),)
    found = GateReport("failure", outcomes, regressions, head, base, notes=(SOURCE,),
                       base_source=SOURCE, base_sha=MERGE_BASE)
    return replace(found, **changes)


def test_the_comment_shows_each_suite_with_both_outputs_ids_and_calls() -> None:
    body = report.comment_body(gate(), head_sha=HEAD, base_sha=BASE)
    head, section = body.split("\n#### ", 1)
    assert head.startswith(f"{COMMENT_MARKER}\n### ❌ llmgate: fail\n\n"
                           "**Why:** decided by tickets pass_rate max_drop 0.05 (fail): dropped "
                           "0.33 from base 1.00 (allowed 0.05).\n\n"
                           "**Head** `aaaaaaa` · **base** `ccccccc`\n\n"  # the base compared
                           f"**Baseline:** {SOURCE}\n\n| suite |")
    assert head.count(SOURCE) == 1  # not repeated as a note
    assert section == (
        "tickets · ❌ fail\n\n"
        "- Examples: 3 at head, 2 paired with base, 1 added, 1 removed\n"
        "- Model calls: head 4 live + 2 cached, $0.0123; base 0 live + 6 cached, $0.0000\n\n"
        "<details><summary>1 example got worse (passed at base, fail at head)</summary>\n\n"
        '**t2** · evals/t.jsonl:2 · equals: expected "billing", got "bug"\n\n'
        "<table><tr><th>expected</th><th>base output</th><th>head output</th></tr>"
        "<tr><td>billing</td><td>billing</td><td>bug</td></tr></table>\n\n"
        "</details>\n\n"
        "<details><summary>Examples added and removed</summary>\n\n"
        "Only at head (added): t4\n\n"
        "Only at base (removed): t3\n\n"
        "</details>\n\n"
        "---\n<sub>Comment `/llmgate rerun` to run again.</sub>\n")
    tags = parsed(body)
    assert tags.cells[-3:] == ["billing", "billing", "bug"] and tags.comments == [" llmgate "]


def test_the_check_names_the_commits_and_the_baseline() -> None:
    summary = report.check_summary(gate())
    assert summary.startswith("### ❌ llmgate: fail\n\n**Why:** decided by tickets pass_rate "
                              "max_drop 0.05 (fail): dropped 0.33 from base 1.00 (allowed 0.05)."
                              "\n\n**Head** `aaaaaaa` · **base** `ccccccc`"
                              f"\n\n**Baseline:** {SOURCE}\n\n| suite |")
    assert summary.count(SOURCE) == 1
    without = replace(gate(), base_sha="", base_source=None, notes=())
    assert "**base** `ccccccc`" in report.check_summary(without)  # the base run's commit
    no_run = replace(without, base=None)
    body = report.comment_body(no_run, head_sha=HEAD, base_sha=BASE)
    assert "**Head** `aaaaaaa` · **base** `bbbbbbb`" in body  # only then the caller's
    doc = json.loads(report.render_json(gate()))
    assert (doc["head_sha"], doc["base_sha"], doc["base_source"]) == (HEAD, MERGE_BASE, SOURCE)


def test_rescored_and_not_comparable_suites_say_so() -> None:
    rescored = SuiteComparability("tickets", "rescored", ("judges",), ("prompt",),
                                  "the scoring changed (judge models): base's outputs were "
                                  "re-scored with head's assertions and judges",
                                  RunUsage(3, 7, cost_usd=0.0002))
    body = report.comment_body(gate(comparability=(rescored,)), head_sha=HEAD, base_sha=BASE)
    assert ("- Model calls: head 4 live + 2 cached, $0.0123; base 0 live + 6 cached, $0.0000; "
            "re-scoring base 3 live + 7 cached, $0.0002\n"
            "- Changed at head: prompt file\n"
            "- Comparability: re-scored: the scoring changed (judge models): base's outputs "
            "were re-scored with head's assertions and judges\n") in body
    blocked = SuiteComparability("tickets", "not_comparable", ("judges",), (),
                                 "the scoring changed (judge models) and the base result kept "
                                 "no outputs to re-score")
    skipped = RuleOutcome("tickets", "pass_rate", "max_drop 0.05", 1.0, 2 / 3, -1 / 3,
                          "skipped", f"not comparable with base: {blocked.reason}")
    neutral = gate(comparability=(blocked,), outcomes=(skipped,), regressions=(),
                   conclusion="neutral")
    body = report.comment_body(neutral, head_sha=HEAD, base_sha=BASE)
    assert "#### tickets · ⚪ not comparable with base\n" in body
    assert ("- Comparability: not comparable: the scoring changed (judge models) and the base "
            "result kept no outputs to re-score; its relative rules were not applied "
            "(absolute rules at head were)\n") in body
    assert "got worse" not in body
    summary = report.check_summary(neutral)
    assert ("**Comparability with base:**\n- tickets: not comparable: the scoring changed "
            "(judge models) and the base result kept no outputs to re-score; its relative rules "
            "were not applied (absolute rules at head were)\n") in summary
    doc = json.loads(report.render_json(neutral))
    assert doc["comparability"][0]["status"] == "not_comparable"


def test_a_hostile_output_stays_text_in_its_cell() -> None:
    body = report.comment_body(gate(head_output=HOSTILE), head_sha=HEAD, base_sha=BASE)
    assert body.startswith(COMMENT_MARKER + "\n") and body.count(COMMENT_MARKER) == 1
    assert "<script" not in body and "</details>\n<!--" not in body
    (row,) = [line for line in body.splitlines() if line.startswith("<table>")]
    assert row.endswith("</table>")  # one source line: no blank line ends the HTML block
    tags = parsed(body)
    assert tags.seen <= OURS, tags.seen - OURS  # no script, link or image got in
    assert tags.comments == [" llmgate "]  # the sticky marker, once
    assert body.count("<details>") == body.count("</details>") == 2
    expected = HOSTILE.replace("\r\n", "\n").replace("\r", "\n").replace("@", "@\u200d")
    assert tags.cells[-3:] == ["billing", "billing", expected]  # after the metric table's
    for rendered in (report.check_summary(gate(head_output=HOSTILE)),
                     report.check_text(gate(head_output=HOSTILE))):
        found = parsed(rendered)
        assert found.seen <= OURS | {"pre"} and found.comments == []


def test_a_huge_report_is_clipped_under_the_limit_with_a_note() -> None:
    huge = "<" * 3000 + "\n" * 50  # each "<" becomes "&lt;": escaping makes it 4x longer
    suites, regressions, outcomes = {}, [], []
    for s in range(40):
        name = f"suite{s:02d}"
        rows = tuple(example(f"t{i}", i % 2 == 0, huge) for i in range(1, 101))
        suites[name] = SuiteResult(name, f"evals/{name}.jsonl", rows, {"pass_rate": 0.5})
        regressions += [Regression(name, f"evals/{name}.jsonl", i, f"t{i}", huge, huge, huge,
                                   "x" * 500) for i in range(1, 101, 2)]
        outcomes += [RuleOutcome(name, f"assertion.m{m}.pass_rate", "max_drop 0.05", 1.0, 0.5,
                                 -0.5, "fail", "dropped") for m in range(30)]
    run = RunResult(HEAD, suites)
    big = GateReport("failure", tuple(outcomes), tuple(regressions), run, replace(run, sha=BASE))
    body = report.comment_body(big, head_sha=HEAD, base_sha=BASE)
    assert len(body) <= 65535 and body.startswith(COMMENT_MARKER + "\n")
    assert ("<sub>This comment was shortened to stay under GitHub's limit of 65,536 "
            "characters; the check run has every example.</sub>") in body
    shown = body.count("<table>")
    more = [int(n) for n in re.findall(r"^\.\.\. (\d+) more: see the check run\.$", body,
                                       re.MULTILINE)]
    sections = re.findall(r"^#### (suite\d\d) · ❌ fail$", body, re.MULTILINE)
    hidden = re.search(r"^\.\.\. (\d+) more suites: see the check run\.$", body, re.MULTILINE)
    assert shown == 3 and len(sections) == 30 and hidden is not None and hidden[1] == "10"
    rows = re.search(r"^\.\.\. (\d+) more rows$", body, re.MULTILINE)  # rows made room
    assert rows is not None and 0 < int(rows[1]) < 1200
    assert shown + sum(more) == 50 * len(sections)  # every worse example of a shown suite
    tags = parsed(body)
    assert tags.comments == [" llmgate "] and tags.seen <= OURS
    summary = report.check_summary(big)
    assert len(summary) <= 65535 and "**2000 examples regressed**" in summary


def test_every_conclusion_renders() -> None:
    for conclusion in ("success", "failure", "neutral", "cancelled", "timed_out",
                       "action_required", "skipped"):
        found = gate(conclusion=conclusion)
        assert report.check_title(found).startswith("llmgate: ")
        assert report.comment_body(found, head_sha=HEAD, base_sha=None).startswith(
            COMMENT_MARKER)
    assert report.check_summary(gate(conclusion="skipped")).startswith("### ⏭ llmgate: skipped")
