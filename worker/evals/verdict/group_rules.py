"""Threshold rules per group: ``min``, ``max_drop``, ``max``, ``max_increase`` and
``max_increase_pct`` applied to each group of ``groups: {by}`` as to the suite (pure).

Each side's examples are grouped by their own ``metadata[by]`` (``(none)`` without it); a group's
metrics are the suite metrics of its examples alone (worker/evals/score/metrics.py), and each
threshold rule of the suite is checked on them exactly as on the whole suite
(worker/evals/verdict/thresholds.py, upper_rules.py), its outcome carrying the group
(``category=billing``). Groups with fewer than ``groups.min_items`` examples at head are not
gated on their own, as for the paired rules. The paired rules already run per group
(worker/evals/verdict/comparisons.py); the per-example counts (``max_new_failures``,
``max_example_drop``, ``critical``) need no group of their own: a group holds no more broken
examples than its suite. A per-example custom metric's group value is the mean of the group's
values; metrics not computed from the examples (``win_rate``, ``judge_trap_accuracy``, a
suite-level custom metric) are gated on the whole suite only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from worker.evals.score import suite_metrics
from worker.evals.types import ExampleResult, GateRule, RuleOutcome, SuiteConfig, SuiteResult
from worker.evals.verdict.paired import NO_GROUP
from worker.evals.verdict.thresholds import check_thresholds
from worker.evals.verdict.upper_rules import check_upper

#: Metrics a group has no value of (computed beside the examples, not from them).
SUITE_ONLY = ("win_rate", "judge_trap_accuracy")


def group_threshold_outcomes(config: SuiteConfig, head: SuiteResult | None,
                             base: SuiteResult | None) -> list[RuleOutcome]:
    """Check the suite's threshold rules on every gated group (module docstring).

    Returns:
        The outcomes, group by group (sorted labels), rule by rule; none without ``groups``
        or without a head result.
    """
    key = config.gate_options.group_by
    whole = {f"custom.{m.name}" for m in config.metrics if not m.per_example}
    rules = [r for r in config.gate.values() if _has_threshold(r)
             and r.metric not in SUITE_ONLY and r.metric not in whole]
    custom = [m.name for m in config.metrics if m.per_example]
    if key is None or head is None or not rules:
        return []
    head_groups = _split(head.examples, key)
    base_groups = _split(base.examples, key) if base is not None else {}
    outcomes: list[RuleOutcome] = []
    for label in sorted(head_groups):
        examples = head_groups[label]
        if len({r.id for r in examples}) < config.gate_options.group_min_items:
            continue
        head_part = _part(head, examples, custom)
        base_part = _part(base, base_groups.get(label, ()), custom) if base is not None \
            else None
        for rule in rules:
            found = [*check_thresholds(config.name, rule, head_part, base_part),
                     *check_upper(config.name, rule, head_part, base_part)]
            outcomes.extend(replace(o, group=label) for o in found)
    return outcomes


def _has_threshold(rule: GateRule) -> bool:
    return any(v is not None for v in (rule.min, rule.max_drop, rule.max, rule.max_increase,
                                       rule.max_increase_pct))


def _split(examples: Sequence[ExampleResult], key: str) -> dict[str, list[ExampleResult]]:
    groups: dict[str, list[ExampleResult]] = {}
    for result in examples:
        value = result.metadata.get(key)
        groups.setdefault(f"{key}={NO_GROUP if value is None else value}", []).append(result)
    return groups


def _part(suite: SuiteResult, examples: Sequence[ExampleResult],
          custom: Sequence[str]) -> SuiteResult:
    """The group's examples as a suite result, with their metrics (per-example custom ones:
    the mean of the group's values)."""
    metrics = suite_metrics(examples)
    for name in custom:
        values = [r.custom[name] for r in examples if name in r.custom]
        if values:
            metrics[f"custom.{name}"] = math.fsum(values) / len(values)
    return replace(suite, examples=tuple(examples), metrics=metrics)
