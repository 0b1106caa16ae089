"""The threshold rules (``min``, ``max_drop``) and the list of regressed examples (pure).

A ``min`` rule holds when head >= min; a ``max_drop`` rule holds when base - head <= max_drop,
both with a tolerance of `EPSILON` against float noise (0.7 - 0.65 is 0.04999... in binary).
A ``max_drop`` rule without a base value is skipped, not failed, and so is a ``min`` rule on a
metric that compares head with base (``win_rate``, `NEEDS_BASE`) when there is no base result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from worker.evals.score import NEEDS_BASE
from worker.evals.types import (
    ExampleResult,
    GateRule,
    Regression,
    RuleOutcome,
    RuleStatus,
    SuiteResult,
)

#: Tolerance of rule comparisons (fractions 0-1).
EPSILON = 1e-9
NO_BASE = "no base result: suite is new or config missing at base"


#: Builds one outcome of a threshold rule: ``(rule text, passed or None for skipped, reason)``.
OutcomeMaker = Callable[[str, "bool | None", str], RuleOutcome]


def metric_values(
    suite: str, rule: GateRule, head: SuiteResult | None, base: SuiteResult | None
) -> tuple[float | None, float | None, OutcomeMaker]:
    """Return head's and base's value of ``rule.metric`` and a maker of its rule outcomes.

    The maker turns ``(text, status, reason)`` into a `RuleOutcome` carrying both values and
    their delta: status None is ``skipped``, True ``pass`` (the reason is dropped), False
    ``fail``. Shared by the lower (``min``/``max_drop``) and upper (``max``/``max_increase``)
    threshold rules.
    """
    head_value = head.metrics.get(rule.metric) if head is not None else None
    base_value = base.metrics.get(rule.metric) if base is not None else None
    delta = head_value - base_value if head_value is not None and base_value is not None else None

    def outcome(text: str, status: bool | None, reason: str) -> RuleOutcome:
        verdict: RuleStatus = "skipped" if status is None else "pass" if status else "fail"
        return RuleOutcome(suite, rule.metric, text, base_value, head_value, delta, verdict,
                           "" if verdict == "pass" else reason)

    return head_value, base_value, outcome


def check_thresholds(
    suite: str, rule: GateRule, head: SuiteResult | None, base: SuiteResult | None
) -> list[RuleOutcome]:
    head_value, base_value, outcome = metric_values(suite, rule, head, base)
    outcomes = []
    unavailable = f"{rule.metric} is unavailable at head (no example ran it)"
    if rule.min is not None:
        text = f"min {_fmt(rule.min)}"
        if head_value is None and base is None and rule.metric in NEEDS_BASE:
            outcomes.append(outcome(text, None, f"{rule.metric} compares head with base: "
                                                f"{NO_BASE}"))
        elif head_value is None:
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
    """Return the examples (matched by id) that pass at base and fail at head, in head order.

    With repeats an example passes when more than half of its scored repeats pass; it is
    listed once, with its first failing repeat at head. Unscored results count neither way.
    """
    passing = {i: next(r for r in rs if r.passed) for i, rs in _by_id(base).items()
               if _passes(rs)}
    return [
        Regression(suite=head.name, dataset=head.dataset, line=failed.line, example_id=i,
                   expected=failed.expected, base_output=passing[i].output,
                   head_output=failed.output, reason=failure_reason(failed))
        for i, rs in _by_id(head).items()
        if i in passing and _passes(rs) is False
        for failed in [next(r for r in rs if not r.passed and not r.unscored)]
    ]


def _by_id(suite: SuiteResult) -> dict[str, list[ExampleResult]]:
    found: dict[str, list[ExampleResult]] = {}
    for example in suite.examples:
        found.setdefault(example.id, []).append(example)
    return found


def _passes(results: Sequence[ExampleResult]) -> bool | None:
    """Majority verdict of an example's scored repeats; None when none was scored."""
    scored = [r.passed for r in results if not r.unscored]
    return sum(scored) * 2 > len(scored) if scored else None


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
