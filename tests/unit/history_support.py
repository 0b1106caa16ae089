"""Records of the quality history (worker/baselines/timeline.py) that tests write: examples, a
failed ``pass_rate`` gate report, and the gate record through a real `Timeline`.

Shared by the history's own tests (tests/unit/baselines/test_timeline.py) and the dashboard's
(tests/unit/app/dashboard/support.py), so both read the records the same writer made.
"""

from __future__ import annotations

from typing import Any

from worker.baselines.timeline import Timeline
from worker.evals.types import (
    AssertionResult,
    ExampleResult,
    GateReport,
    PairedComparison,
    RuleOutcome,
    RunResult,
    SuiteResult,
)

#: The head and base commits of every recorded gate.
HEAD_SHA, BASE_SHA = "h" * 40, "b" * 40
#: Why every recorded gate concluded as it did (`gate_report`'s rule).
WHY = "decided by tickets pass_rate max_drop 0.05 (fail)."
#: The full report's address of every recorded gate.
REPORT_URL = "https://llmgate.example.com/reports/" + "a" * 32


def example(example_id: str, line: int, passed: bool, score: float,
            **more: Any) -> ExampleResult:
    """One example: an ``equals`` check that passed or not and an ``llm_rubric`` of ``score``
    (0..1, passing from 0.5); ``more``: other `ExampleResult` fields."""
    checks = (AssertionResult("equals", passed, 1.0 if passed else 0.0),
              AssertionResult("llm_rubric", score >= 0.5, score))
    return ExampleResult(example_id, line, passed, False, "out", "exp", assertions=checks,
                         **more)


def gate_report(base: SuiteResult, head: SuiteResult, conclusion: str = "failure") -> GateReport:
    """A gate of suite ``head`` against ``base`` (same name) whose ``pass_rate`` dropped 0.10
    past ``max_drop 0.05`` (McNemar's test on ``len(head.examples)`` pairs, 2 discordant)."""
    n = len(head.examples)
    outcome = RuleOutcome(head.name, "pass_rate", "max_drop 0.05", base.metrics["pass_rate"],
                          head.metrics["pass_rate"], -0.1, "fail", "dropped 0.10")
    compared = PairedComparison(head.name, "pass_rate", "", n, 0, 0, 0.75, 0.65, -0.10,
                                -0.2, -0.01, "mcnemar", 0.01, 0.02, 0, 2, n - 2, 0.1, 0.05)
    return GateReport(conclusion, (outcome,), (), RunResult(HEAD_SHA, {head.name: head}),
                      RunResult(BASE_SHA, {base.name: base}), comparisons=(compared,),
                      base_source="compared with bbbbbbb", base_sha=BASE_SHA)


async def record_gate(timeline: Timeline, repo: str, pr_number: int, check_run_id: int,
                      report: GateReport) -> int:
    """Record ``report`` as pull request ``pr_number``'s gate (into ``main``, `HEAD_SHA` on
    `BASE_SHA`, its conclusion, `WHY`, `REPORT_URL`, 3.25 s); return what `Timeline.gate`
    returns."""
    return await timeline.gate(
        repo=repo, pr_number=pr_number, check_run_id=check_run_id, head_sha=HEAD_SHA,
        base_sha=BASE_SHA, base_ref="main", configs=[("", report)],
        conclusion=report.conclusion, why=WHY, report_url=REPORT_URL, duration_s=3.25)
