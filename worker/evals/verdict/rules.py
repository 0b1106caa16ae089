"""Decide which gate rules apply to a pull request: base's, or the stricter of base and head.

A pull request must not loosen its own gate, so the rules come from the base commit's config.
When head changes them, each rule takes the stricter of the two values (a higher ``min``, a
smaller ``max_drop``, margin, percent or allowance, a larger ``alpha``, more critical tags, fewer
quarantined examples ...), a rule present on one side only applies, and a suite removed at
head keeps its base rules; the report lists every difference. ``primary`` and
``settings.statistics`` (how alpha is split and tests are decided) are base's alone. The rules
are merged into the config head's target runs on (base's evaluation contract,
worker/evals/verdict/contract.py), and into head's own contract where it is shown beside. Pure.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from worker.evals.types import Config, GateOptions, GateRule, SuiteConfig

_LOWEST = ("max_drop", "non_inferiority_margin", "max_new_failures", "min_detectable", "max",
           "max_increase", "max_increase_pct", "max_example_drop", "max_example_drops")
_HIGHEST = ("min", "regression_alpha")
_INCONCLUSIVE_ORDER = ("pass", "neutral", "undecided", "fail")


def merge_rules(base: Config | None, head: Config) -> tuple[Config, list[str]]:
    """Return head's config carrying the rules that apply, and notes of what head changed.

    Args:
        base: the base commit's config, or None (no valid config at base: head's rules apply).
        head: the head commit's config (suites, targets, datasets and its proposed rules).

    Returns:
        The config to gate with, and one note per changed suite.
    """
    if base is None:
        return head, []
    base_suites = {s.name: s for s in base.suites}
    suites, notes = [], []
    for suite in head.suites:
        old = base_suites.get(suite.name)
        if old is None:
            notes.append(f"suite {suite.name} is new at head: its gate rules come from head")
            suites.append(suite)
            continue
        merged = merge_suite(old, suite)
        changes = describe_changes(old, suite)
        if changes:
            notes.append(f"gate rules of {suite.name} changed at head ({'; '.join(changes)}): "
                         "the stricter of base and head applies until the change is merged")
        suites.append(merged)
    head_names = {s.name for s in head.suites}
    for name, old in base_suites.items():
        if name not in head_names and (old.gate or old.gate_options != GateOptions()):
            notes.append(f"suite {name} is gone at head: its base gate rules still apply until "
                         "the change is merged")
            suites.append(old)
    if head.settings.statistics != base.settings.statistics:
        notes.append("settings.statistics or settings.sequential changed at head: base's apply "
                     "until the change is merged")
    settings = replace(head.settings, statistics=base.settings.statistics)
    return replace(head, suites=tuple(suites), settings=settings), notes


def merge_suite(base: SuiteConfig, head: SuiteConfig) -> SuiteConfig:
    """Return head's suite with the stricter of the two suites' rules and options."""
    gate = dict(head.gate)
    for metric, rule in base.gate.items():
        gate[metric] = stricter_rule(rule, head.gate[metric]) if metric in head.gate else rule
    return replace(head, gate=gate, gate_options=stricter_options(base.gate_options,
                                                                  head.gate_options))


def stricter_rule(base: GateRule, head: GateRule) -> GateRule:
    """Combine two rules of one metric, field by field, keeping the stricter value."""
    values: dict[str, Any] = {}
    for name in (*_LOWEST, *_HIGHEST):
        found = [v for v in (getattr(base, name), getattr(head, name)) if v is not None]
        values[name] = (min(found) if name in _LOWEST else max(found)) if found else None
    actions = [r.min_detectable_action for r in (base, head) if r.min_detectable is not None]
    values["min_detectable_action"] = "fail" if "fail" in actions or not actions else "warn"
    values["primary"] = base.primary  # a pull request must not move alpha between metrics
    return replace(head, line=head.line if head.line is not None else base.line, **values)


def stricter_options(base: GateOptions, head: GateOptions) -> GateOptions:
    """Combine suite options: all critical tags, base's grouping (else head's), the stricter
    ``on_inconclusive`` and only the examples both sides quarantine."""
    group_by = base.group_by or head.group_by
    sizes = [o.group_min_items for o in (base, head) if o.group_by == group_by]
    allowances = [o.critical_max_failures for o in (base, head) if o.critical_tags]
    return GateOptions(
        critical_tags=tuple(dict.fromkeys((*base.critical_tags, *head.critical_tags))),
        group_by=group_by,
        group_min_items=min(sizes) if sizes else base.group_min_items,
        on_inconclusive=max(base.on_inconclusive, head.on_inconclusive,
                            key=_INCONCLUSIVE_ORDER.index),
        quarantine=tuple(i for i in base.quarantine if i in set(head.quarantine)),
        line=head.line, critical_max_failures=min(allowances, default=0))


def describe_changes(base: SuiteConfig, head: SuiteConfig) -> list[str]:
    """Return ``metric field: base -> head`` for every rule or option head changed."""
    changes = []
    for metric in dict.fromkeys((*base.gate, *head.gate)):
        old, new = base.gate.get(metric), head.gate.get(metric)
        if old is None or new is None:
            changes.append(f"{metric}: {'added' if old is None else 'removed'} at head")
            continue
        changes += [f"{metric} {f.name}: {getattr(old, f.name)} -> {getattr(new, f.name)}"
                    for f in fields(GateRule)
                    if f.name not in ("metric", "line")
                    and getattr(old, f.name) != getattr(new, f.name)]
    changes += [f"{f.name}: {getattr(base.gate_options, f.name)} -> "
                f"{getattr(head.gate_options, f.name)}"
                for f in fields(GateOptions)
                if f.name != "line"
                and getattr(base.gate_options, f.name) != getattr(head.gate_options, f.name)]
    return changes
