"""What became of each example of head against base, and why it fails (pure).

Every report that lists examples (JUnit, HTML, the comment's suite sections, the JSON report)
tells the same story through `example_statuses`: an example that fails at head is a failure
whether or not it failed at base, and the kind of failure says which:

- ``regression``: passed at base, fails at head (listed in `GateReport.regressions`, whose
  reason it keeps);
- ``still_failing``: failed at base and fails at head;
- ``failed``: fails at head, and base has no result for it (no base run, a suite or an
  example the pull request adds);
- ``errored``: head's target gave no answer (``unscored`` when a judge could not score it:
  neither a pass nor a failure);
- ``fixed``: failed at base, passes at head; ``pass``: passes at head, not failed at base.

With ``settings.repeats`` an example passes at a side when every draw passed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from worker.evals.types import ExampleResult, GateReport
from worker.report.plain import first_per_id, regressed

Status = Literal["pass", "fixed", "regression", "still_failing", "failed", "errored",
                 "unscored"]
#: The statuses of an example that fails at head (a failed test case).
FAILING: tuple[Status, ...] = ("regression", "still_failing", "failed")


@dataclass(frozen=True)
class ExampleStatus:
    """One example of one suite at head, against base.

    Attributes:
        suite: the suite name.
        dataset: the suite's dataset path, relative to the repository root.
        example_id: the example id.
        line: its 1-based line in head's dataset.
        status: see the module docstring.
        reason: why it fails at head (failed assertions' messages, the target's error, or
            the gate's regression reason); "" when it passes.
        head: head's draws of the example (one without repeats).
        base: base's draws, () when base has no result for it.
    """

    suite: str
    dataset: str
    example_id: str
    line: int
    status: Status
    reason: str
    head: tuple[ExampleResult, ...]
    base: tuple[ExampleResult, ...] = ()

    @property
    def failing(self) -> bool:
        """Whether the example fails at head (`FAILING`)."""
        return self.status in FAILING


def example_statuses(report: GateReport) -> list[ExampleStatus]:
    """Return every example head ran, suite by suite in run order, dataset order within."""
    if report.head is None:
        return []
    worse = regressed(report)
    found = []
    for name, suite in report.head.suites.items():
        base_suite = report.base.suites.get(name) if report.base is not None else None
        at_base = first_per_id(base_suite.examples) if base_suite is not None else {}
        for example_id, runs in first_per_id(suite.examples).items():
            old = tuple(at_base.get(example_id, ()))
            regression = worse.get((name, example_id))
            status = _status(runs, old, regression is not None)
            reason = regression.reason if regression is not None and status == "regression" \
                else failure_reason(runs) if status != "pass" and status != "fixed" else ""
            found.append(ExampleStatus(name, suite.dataset, example_id, runs[0].line, status,
                                       reason, tuple(runs), old))
    return found


def failure_reason(runs: Sequence[ExampleResult]) -> str:
    """Return why the first draw that did not pass did not: the target's error, the failed
    (or unscorable) assertions' messages, or "failed"; "" when every draw passed."""
    for run in runs:
        if run.errored:
            return run.error or "no answer"
        if not run.passed:
            messages = [a.message or a.type for a in run.assertions
                        if not a.passed or a.errored]
            return "; ".join(messages) or "failed"
    return ""


def _status(head: Sequence[ExampleResult], base: Sequence[ExampleResult],
            listed: bool) -> Status:
    if any(r.errored for r in head):
        return "errored"
    base_failed = bool(base) and not all(r.passed for r in base)
    if all(r.passed for r in head):
        return "fixed" if base_failed and not listed else "pass"
    if any(r.unscored for r in head) and all(r.passed or r.unscored for r in head):
        return "unscored"
    if listed or (base and not base_failed):
        return "regression"
    return "still_failing" if base_failed else "failed"


def status_lists_json(report: GateReport) -> dict[str, list[dict[str, object]]]:
    """Return the JSON report's ``failing_at_head`` (every example failing at head, or that
    got no answer: ``suite``, ``dataset``, ``line``, ``example_id``, ``status``, ``reason``)
    and ``fixed_at_head`` (failed at base, pass at head; the same keys, ``reason`` why it
    failed at base)."""
    found = example_statuses(report)
    failing = [_json(s, s.reason) for s in found
               if s.failing or s.status in ("errored", "unscored")]
    fixed = [_json(s, failure_reason(s.base)) for s in found if s.status == "fixed"]
    return {"failing_at_head": failing, "fixed_at_head": fixed}


def _json(status: ExampleStatus, reason: str) -> dict[str, object]:
    return {"suite": status.suite, "dataset": status.dataset, "line": status.line,
            "example_id": status.example_id, "status": status.status, "reason": reason}
