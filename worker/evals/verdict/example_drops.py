"""``max_example_drop: {by, count}``: examples whose value fell by more than ``by`` (pure).

The per-example rule for scores, beside ``max_new_failures`` for pass/fail: an example is
*dropped* when its value of the metric (the mean over its repeats,
worker/evals/score/example_values.py) falls by more than ``by`` from base to head (rises by more
than ``by`` for a lower-is-better metric), both sides having a value; the rule is a regression
when more than ``count`` examples dropped, inconclusive when no example has a value on both
sides. Quarantined examples are left out. The dropped
examples become `Regression` entries, so each is annotated on its line of the head dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker.evals.score import lower_is_better
from worker.evals.types import (
    GateOptions,
    GateRule,
    Regression,
    RuleOutcome,
    RuleStatus,
    SuiteResult,
)
from worker.evals.verdict.outcomes import inconclusive_outcome
from worker.evals.verdict.paired import PairedSuite, mean_over_repeats
from worker.evals.verdict.thresholds import EPSILON, failure_reason

#: Example ids listed in a reason.
MAX_IDS = 10


@dataclass(frozen=True)
class Drop:
    """One dropped example: its id and its value at base and at head (metric units)."""

    example_id: str
    base: float
    head: float


def dropped(rule: GateRule, paired: PairedSuite, quarantine: Sequence[str]) -> list[Drop]:
    """Return the examples whose ``rule.metric`` got worse by more than ``rule.max_example_drop``.

    In head order; quarantined examples and those without a value on either side left out.
    """
    return _dropped(rule, paired, quarantine)[0]


def _dropped(rule: GateRule, paired: PairedSuite,
             quarantine: Sequence[str]) -> tuple[list[Drop], int]:
    """`dropped`, and how many examples have a value on both sides."""
    by = rule.max_example_drop or 0.0
    j = paired.metrics.index(rule.metric)
    base, head = mean_over_repeats(paired.base[:, j, :]), mean_over_repeats(paired.head[:, j, :])
    worse = (head - base) if lower_is_better(rule.metric) else (base - head)
    excluded = set(quarantine)
    known = ~np.isnan(worse) & np.array([i not in excluded for i in paired.ids], dtype=bool)
    hits = np.flatnonzero(known & (np.where(known, worse, 0.0) > by + EPSILON))
    return ([Drop(paired.ids[k], float(base[k]), float(head[k])) for k in hits],
            int(np.sum(known)))


def example_drop_outcome(suite: str, rule: GateRule, paired: PairedSuite,
                         options: GateOptions) -> RuleOutcome:
    """Return the ``max_example_drop`` outcome: a regression when more than ``count`` dropped;
    inconclusive (its effect by ``on_inconclusive``) when no example has a value of the
    metric at both base and head, since then nothing was compared."""
    drops, known = _dropped(rule, paired, options.quarantine)
    limit = rule.max_example_drops or 0
    text = rule_text(rule)
    if known == 0:
        return inconclusive_outcome(suite, rule.metric, text, f"no example has a value of "
                                    f"{rule.metric} at both base and head", options)
    status: RuleStatus = "regression" if len(drops) > limit else "pass"
    word = "rose" if lower_is_better(rule.metric) else "fell"
    shown = ", ".join(f"{d.example_id} ({d.base:.3g} -> {d.head:.3g})" for d in drops[:MAX_IDS])
    more = f" and {len(drops) - MAX_IDS} more" if len(drops) > MAX_IDS else ""
    reason = (f"{len(drops)} examples' {rule.metric} {word} by more than "
              f"{rule.max_example_drop:g} (allowed {limit}): {shown}{more}")
    return RuleOutcome(suite, rule.metric, text, None, None, None, status,
                       "" if status == "pass" else reason)


def rule_text(rule: GateRule) -> str:
    """Return the rule as the report names it, e.g. ``max_example_drop 0.05 count 0``."""
    return f"max_example_drop {rule.max_example_drop:g} count {rule.max_example_drops or 0}"


def drop_regressions(rule: GateRule, drops: Sequence[Drop], head: SuiteResult,
                     base: SuiteResult) -> list[Regression]:
    """Return one `Regression` per dropped example: its head line, outputs and the drop."""
    first_head = {r.id: r for r in reversed(head.examples)}
    first_base = {r.id: r for r in reversed(base.examples)}
    word = "rose" if lower_is_better(rule.metric) else "fell"
    found = []
    for drop in drops:
        at_head, at_base = first_head[drop.example_id], first_base[drop.example_id]
        why = failure_reason(at_head) if not at_head.passed else ""
        found.append(Regression(
            suite=head.name, dataset=head.dataset, line=at_head.line,
            example_id=drop.example_id, expected=at_head.expected,
            base_output=at_base.output, head_output=at_head.output,
            reason=(f"{rule.metric} {word} from {drop.base:.3g} at base to {drop.head:.3g} at "
                    f"head, by more than {rule.max_example_drop:g} ({rule_text(rule)})"
                    + (f"; {why}" if why else ""))))
    return found
