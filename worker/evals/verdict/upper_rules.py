"""Threshold rules of lower-is-better metrics: ``max`` and ``max_increase`` (pure).

For latency, cost, tokens and error rates a rise is the regression, so ``min`` and
``max_drop`` are inverted: ``max`` holds when head <= max; ``max_increase`` when
head - base <= max_increase (metric units: ms, USD, tokens, fractions), both with the tolerance
of worker/evals/verdict/thresholds.py. ``max_increase_pct: p`` holds when
100 * (head - base) / base <= p; from a base of 0 only head 0 holds (any rise is an infinite
percentage). ``max_increase`` and ``max_increase_pct`` without a base value are skipped; every
rule on a metric unavailable at head fails (a rule that names a metric needs it).
"""

from __future__ import annotations

from worker.evals.types import GateRule, RuleOutcome, SuiteResult
from worker.evals.verdict.thresholds import EPSILON, NO_BASE, metric_values


def check_upper(suite: str, rule: GateRule, head: SuiteResult | None,
                base: SuiteResult | None) -> list[RuleOutcome]:
    """Check ``rule.max``, ``rule.max_increase`` and ``rule.max_increase_pct`` of one metric.

    Returns:
        One `RuleOutcome` per rule set (none when neither is), ``pass``, ``fail`` or
        ``skipped``.
    """
    head_value, base_value, outcome = metric_values(suite, rule, head, base)
    outcomes = []
    unavailable = f"{rule.metric} is unavailable at head (no example gave it)"
    if rule.max is not None:
        text = f"max {rule.max:g}"
        outcomes.append(outcome(text, False, unavailable) if head_value is None else outcome(
            text, head_value <= rule.max + EPSILON,
            f"{head_value:.4g} is above the maximum {rule.max:g}"))
    relative = [("max_increase", rule.max_increase, _absolute_rise),
                ("max_increase_pct", rule.max_increase_pct, _percent_rise)]
    for name, allowed, check in relative:
        if allowed is None:
            continue
        text = f"{name} {allowed:g}"
        if base is None or base_value is None:
            reason = NO_BASE if base is None else f"{rule.metric} is unavailable at base"
            outcomes.append(outcome(text, None, reason))
        elif head_value is None:
            outcomes.append(outcome(text, False, unavailable))
        else:
            outcomes.append(outcome(text, *check(head_value, base_value, allowed)))
    return outcomes


def _absolute_rise(head: float, base: float, allowed: float) -> tuple[bool, str]:
    """Return whether head rose at most ``allowed`` (metric units) above base, and the reason."""
    rise = head - base
    return rise <= allowed + EPSILON, f"rose {rise:.4g} from base {base:.4g} (allowed {allowed:g})"


def _percent_rise(head: float, base: float, allowed: float) -> tuple[bool, str]:
    """Return whether head's rise over base is within ``allowed`` percent, and the reason."""
    if base <= EPSILON:
        return head <= EPSILON, f"rose from base 0 to {head:.4g} (allowed {allowed:g}%)"
    rise = 100 * (head - base) / base
    return (rise <= allowed + EPSILON,
            f"rose {rise:.1f}% from base {base:.4g} to {head:.4g} (allowed {allowed:g}%)")
