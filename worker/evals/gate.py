"""Compare a head run with a base run under the config's gate rules (pure).

A ``min`` rule holds when head >= min; a ``max_drop`` rule holds when base - head <= max_drop,
both with a tolerance of `EPSILON` against float noise (0.7 - 0.65 is 0.04999... in binary).
A ``max_drop`` rule without a base value is skipped, not failed. The check fails when any rule
fails; regressions (examples that passed at base and fail at head) are reported either way.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.evals.types import (
    Config,
    ConfigError,
    ExampleResult,
    GateReport,
    GateRule,
    Regression,
    RuleOutcome,
    RuleStatus,
    RunResult,
    SuiteResult,
)

#: Tolerance of rule comparisons (fractions 0-1).
EPSILON = 1e-9
NO_BASE = "no base result: suite is new or config missing at base"


def compare(
    config: Config, head: RunResult, base: RunResult | None, notes: Sequence[str] = ()
) -> GateReport:
    """Check every gate rule of ``config`` on head (and base), and list the regressions.

    Args:
        config: the head config; its suites and rules set the order of the outcomes.
        head: the head run.
        base: the base run, or None when there is none (relative rules are then skipped).
        notes: lines to carry into the report.

    Returns:
        The report: conclusion ``failure`` when any rule fails, else ``success``.
    """
    outcomes: list[RuleOutcome] = []
    regressions: list[Regression] = []
    for suite in config.suites:
        head_suite = head.suites.get(suite.name)
        base_suite = base.suites.get(suite.name) if base is not None else None
        for rule in suite.gate.values():
            outcomes.extend(_check_rule(suite.name, rule, head_suite, base_suite))
        if head_suite is not None and base_suite is not None:
            regressions.extend(find_regressions(head_suite, base_suite))
    failed = any(outcome.status == "fail" for outcome in outcomes)
    return GateReport(
        conclusion="failure" if failed else "success",
        outcomes=tuple(outcomes),
        regressions=tuple(regressions),
        head=head,
        base=base,
        notes=tuple(notes),
    )


def config_error_report(err: ConfigError, head: RunResult | None = None) -> GateReport:
    """Return the failed report of an invalid head config or dataset (no rules checked)."""
    return GateReport("failure", (), (), head, None, config_error=err)


def _check_rule(
    suite: str, rule: GateRule, head: SuiteResult | None, base: SuiteResult | None
) -> list[RuleOutcome]:
    head_value = head.metrics.get(rule.metric) if head is not None else None
    base_value = base.metrics.get(rule.metric) if base is not None else None
    delta = head_value - base_value if head_value is not None and base_value is not None else None

    def outcome(text: str, status: bool | None, reason: str) -> RuleOutcome:
        verdict: RuleStatus = "skipped" if status is None else "pass" if status else "fail"
        return RuleOutcome(suite, rule.metric, text, base_value, head_value, delta, verdict,
                           "" if verdict == "pass" else reason)

    outcomes = []
    unavailable = f"{rule.metric} is unavailable at head (no example ran it)"
    if rule.min is not None:
        text = f"min {_fmt(rule.min)}"
        if head_value is None:
            outcomes.append(outcome(text, False, unavailable))
        else:
            outcomes.append(outcome(text, head_value >= rule.min - EPSILON,
                                    f"{_fmt(head_value)} is below the minimum {_fmt(rule.min)}"))
    if rule.max_drop is not None:
        text = f"max_drop {_fmt(rule.max_drop)}"
        if base is None:
            outcomes.append(outcome(text, None, NO_BASE))
        elif base_value is None:
            outcomes.append(outcome(text, None, f"{rule.metric} is unavailable at base"))
        elif head_value is None:
            outcomes.append(outcome(text, False, unavailable))
        else:
            drop = base_value - head_value
            outcomes.append(outcome(text, drop <= rule.max_drop + EPSILON,
                                    f"dropped {_fmt(drop)} from base {_fmt(base_value)} "
                                    f"(allowed {_fmt(rule.max_drop)})"))
    return outcomes


def find_regressions(head: SuiteResult, base: SuiteResult) -> list[Regression]:
    """Return the examples (matched by id) that pass at base and fail at head, in head order."""
    passed_at_base = {example.id: example for example in base.examples if example.passed}
    return [
        Regression(
            suite=head.name,
            dataset=head.dataset,
            line=example.line,
            example_id=example.id,
            expected=example.expected,
            base_output=passed_at_base[example.id].output,
            head_output=example.output,
            reason=failure_reason(example),
        )
        for example in head.examples
        if not example.passed and example.id in passed_at_base
    ]


def failure_reason(example: ExampleResult) -> str:
    """Return why an example failed: its target error, or its failed assertions' messages."""
    if example.errored:
        return example.error or "the target failed"
    messages = [f"{a.type}: {a.message}" for a in example.assertions if not a.passed]
    return "; ".join(messages) or "failed"


def _fmt(value: float) -> str:
    """Format a fraction with two decimals, or more when two would round it (0.825)."""
    text = f"{value:.2f}"
    return text if abs(float(text) - value) < EPSILON else f"{value:.4g}"
