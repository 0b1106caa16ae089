"""Parse a suite's ``gate:`` section: per-metric rules and suite-wide options (pure).

Format (every key optional; see docs/statistics.md, "Gate rules")::

    gate:
      pass_rate:
        min: 0.80                      # head must reach this
        max_drop: 0.05                 # head may fall at most this far below base
        regression: {alpha: 0.05}      # fail on a significant drop (Holm-adjusted)
        non_inferiority_margin: 0.03   # the 95% CI of head - base must lie above -0.03
        max_new_failures: 2            # at most 2 examples may go from pass to fail
        min_detectable: {drop: 0.05, action: warn}   # or just `min_detectable: 0.05` (fail)
        primary: true                  # its regression tests get most of alpha
      latency_p90:                     # lower-is-better metrics (latency, cost, tokens, errors)
        max: 1500                      # head must stay at or below this (metric units)
        max_increase: 200              # head may rise at most this far above base
        max_increase_pct: 20           # head may rise at most 20% above base
      mean_score:
        max_example_drop: {by: 0.05, count: 0}   # no example's score may fall by over 0.05
      critical: {tag: must_pass}       # examples tagged so must pass at head
      # or {tag: safety, max_failures: 1}: at most one of them may fail
      groups: {by: category, min_items: 5}
      on_inconclusive: neutral         # pass | neutral | fail
      quarantine: [t17, t33]           # left out of per-example rules

``min``/``max_drop`` belong to higher-is-better metrics and ``max``/``max_increase`` to the
lower-is-better ones (`worker.evals.score.direction.LOWER_IS_BETTER`); the other way round is an
error saying which to use. The paired rules know each metric's direction by themselves. Errors are
raised through the config reader, so each names the file and line.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from yaml.nodes import Node, ScalarNode

from worker.evals.config.metric_specs import CUSTOM_PREFIX, custom_names
from worker.evals.config.reader import Reader
from worker.evals.config.spelling import as_written
from worker.evals.score import KNOWN_METRICS, LOWER_IS_BETTER, has_example_values, is_known_metric
from worker.evals.types import GateOptions, GateRule, MetricSpec

#: Rule keys of one metric.
RULE_KEYS = ("min", "max_drop", "max", "max_increase", "regression", "non_inferiority_margin",
             "max_new_failures", "min_detectable", "primary", "max_increase_pct",
             "max_example_drop")
#: Rules that compare base and head example by example.
PAIRED_KEYS = ("regression", "non_inferiority_margin", "max_new_failures", "min_detectable",
               "max_example_drop")
#: Threshold rules of higher-is-better metrics, and their lower-is-better counterparts.
HIGHER_KEYS, LOWER_KEYS = ("min", "max_drop"), ("max", "max_increase")
#: Suite-wide keys of ``gate:`` (never metric names).
OPTION_KEYS = ("critical", "groups", "on_inconclusive", "quarantine")
ON_INCONCLUSIVE = ("pass", "neutral", "fail")
MDD_ACTIONS = ("fail", "warn")

def parse_gate(reader: Reader, node: Node, what: str, metrics: tuple[MetricSpec, ...] = ()
               ) -> tuple[dict[str, GateRule], GateOptions]:
    """Parse a suite's ``gate:`` mapping into rules by metric and the suite-wide options.

    ``metrics``: the suite's custom metrics, which rules name ``custom.<name>`` (higher is
    better; the paired rules only on ``per_example`` ones).

    Raises:
        ConfigError: an unknown metric or key, a rule value out of range, an empty rule.
    """
    rules: dict[str, GateRule] = {}
    options: dict[str, Any] = {}
    custom = custom_names(metrics)
    for key, (key_node, value_node) in reader.mapping(node, f"{what}: `gate`").items():
        if key in OPTION_KEYS:
            options.update(_option(reader, key, value_node))
        elif is_known_metric(key) or key in custom:
            paired = custom[key].per_example if key in custom else has_example_values(key)
            rules[key] = _rule(reader, key, key_node, value_node, paired)
        elif key.startswith(CUSTOM_PREFIX):
            raise reader.error(key_node, f"{key!r} names no metric of this suite's `metrics:` "
                               f"(defined: {', '.join(custom) or 'none'})")
        else:
            raise reader.error(key_node, f"unknown metric {key!r} in `gate` (known metrics: "
                               f"{', '.join(KNOWN_METRICS)}; options: {', '.join(OPTION_KEYS)})")
    return rules, GateOptions(**options, line=int(node.start_mark.line) + 1)


def _rule(reader: Reader, metric: str, key_node: Node, node: Node, paired: bool) -> GateRule:
    entries = reader.mapping(node, f"gate metric {metric!r}", RULE_KEYS)
    own, other = (LOWER_KEYS, HIGHER_KEYS) if metric in LOWER_IS_BETTER else (HIGHER_KEYS,
                                                                             LOWER_KEYS)
    if not entries:
        raise reader.error(node, f"gate metric {metric!r} needs `{own[0]}` or `{own[1]}`, or one"
                           " of regression, non_inferiority_margin, max_new_failures, "
                           "min_detectable")
    primary = _primary(reader, entries.pop("primary", None), metric, "regression" in entries)
    values: dict[str, Any] = {}
    for key, (rule_node, value_node) in entries.items():
        label = f"`{key}` of {metric!r}"
        if key in other or (key == "max_increase_pct" and metric not in LOWER_IS_BETTER):
            raise reader.error(rule_node, _direction_error(metric, key))
        if key in PAIRED_KEYS and not paired:
            raise reader.error(rule_node, f"{label} compares examples one by one, but {metric} "
                               f"is not a mean over examples; use `{own[0]}`/`{own[1]}` for it")
        values.update(_rule_value(reader, metric, key, value_node, label))
    return GateRule(metric, line=int(key_node.start_mark.line) + 1, **values, primary=primary)


def _rule_value(reader: Reader, metric: str, key: str, node: Node, label: str) -> dict[str, Any]:
    """Return the `GateRule` fields of one rule key of ``metric``."""
    if key in HIGHER_KEYS or (key in LOWER_KEYS and metric.endswith("_rate")):
        return {key: reader.fraction(node, label)}
    if key in LOWER_KEYS or key == "non_inferiority_margin":
        return {key: _number(reader, node, label, positive=False)}
    if key == "regression":
        return {"regression_alpha": _alpha(reader, node, label)}
    if key == "max_new_failures":
        return {key: _count(reader, node, label, 0)}
    if key == "max_increase_pct":
        return {key: _percent(reader, metric, node, label)}
    if key == "max_example_drop":
        by, count = _example_drop(reader, node, label)
        return {key: by, "max_example_drops": count}
    drop, action = _min_detectable(reader, node, label)
    return {"min_detectable": drop, "min_detectable_action": action}


def _primary(reader: Reader, entry: tuple[Node, Node] | None, metric: str,
             regression: bool) -> bool:
    """Return ``primary: true|false`` (False when absent); true needs a ``regression`` rule."""
    if entry is None:
        return False
    node, what = entry[1], f"`primary` of {metric!r}"
    value = reader.value(node)
    if not isinstance(value, bool):
        raise reader.error(node, f"{what} must be true or false, got {as_written(node)}")
    if value and not regression:
        raise reader.error(node, f"{what} gives the metric's `regression` tests most of the "
                           "gate's alpha, but the metric has no `regression` rule: add "
                           "`regression: {alpha: 0.05}`")
    return value


def _direction_error(metric: str, key: str) -> str:
    """Return the error of a threshold rule that points the wrong way for ``metric``."""
    if key == "max_increase_pct":
        return (f"`max_increase_pct` of {metric!r}: higher is better for {metric} (a drop is "
                f"the regression), so a rise in percent is no regression: use `min` or "
                f"`max_drop` instead")
    if key in HIGHER_KEYS:
        return (f"`{key}` of {metric!r}: lower is better for {metric} (a rise is the "
                f"regression), so use `max` (head at most this) or `max_increase` (head at most "
                f"this far above base) instead of `min`/`max_drop`")
    return (f"`{key}` of {metric!r}: higher is better for {metric} (a drop is the regression), "
            f"so use `min` (head at least this) or `max_drop` (head at most this far below "
            f"base) instead of `max`/`max_increase`")


def _alpha(reader: Reader, node: Node, what: str) -> float:
    entries = reader.mapping(node, what, ("alpha",))
    if "alpha" not in entries:
        raise reader.error(node, f"{what} needs `alpha`, e.g. `regression: {{alpha: 0.05}}`")
    alpha_node = entries["alpha"][1]
    alpha = reader.value(alpha_node)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise reader.error(alpha_node, f"`alpha` of {what} must be a number between 0 and 1 "
                           f"(exclusive; 0.05 is usual), got {as_written(alpha_node)}")
    return float(alpha)


def _count(reader: Reader, node: Node, what: str, low: int) -> int:
    value = reader.value(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise reader.error(node, f"{what} must be an integer >= {low}, got {as_written(node)}")
    return value


def _min_detectable(reader: Reader, node: Node, what: str) -> tuple[float, Literal["fail", "warn"]]:
    action: Literal["fail", "warn"] = "fail"
    drop_node = node
    if not _is_scalar(node):
        entries = reader.mapping(node, what, ("drop", "action"))
        if "drop" not in entries:
            raise reader.error(node, f"{what} needs `drop`, e.g. `{{drop: 0.05, action: warn}}`")
        drop_node = entries["drop"][1]
        if "action" in entries:
            action = "warn" if _choice(reader, entries["action"][1], "`action`",
                                       MDD_ACTIONS) == "warn" else "fail"
    return _number(reader, drop_node, what, positive=True), action


def _percent(reader: Reader, metric: str, node: Node, what: str) -> float:
    """Return ``max_increase_pct``: a finite number of percent >= 0, on a metric not a rate."""
    if metric.endswith("_rate"):
        raise reader.error(node, f"{what}: {metric} is a rate (a fraction 0-1), where a percent "
                           "of base says little near 0: use `max_increase` (absolute, e.g. "
                           "0.02) instead")
    value = reader.value(node)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise reader.error(node, f"{what} must be a number of percent, 0 or more (20 allows "
                           f"head 20% above base), got {as_written(node)}")
    return float(value)


def _example_drop(reader: Reader, node: Node, what: str) -> tuple[float, int]:
    """Return ``max_example_drop: {by, count}``: the drop (metric units, > 0) and the allowance."""
    if _is_scalar(node):
        raise reader.error(node, f"{what} must be a mapping `{{by: 0.05, count: 0}}` (by: the "
                           "drop of one example's value that counts, count: how many such "
                           f"examples are allowed), got {as_written(node)}")
    entries = reader.mapping(node, what, ("by", "count"))
    if "by" not in entries:
        raise reader.error(node, f"{what} needs `by`, e.g. `{{by: 0.05, count: 0}}`")
    by = _number(reader, entries["by"][1], f"`by` of {what}", positive=True)
    count = _count(reader, entries["count"][1], f"`count` of {what}", 0) \
        if "count" in entries else 0
    return by, count


def _number(reader: Reader, node: Node, what: str, *, positive: bool) -> float:
    """Return a finite number >= 0 (> 0 when ``positive``), in the metric's units."""
    value = reader.value(node)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        bound = "above 0" if positive else "0 or more"
        raise reader.error(node, f"{what} must be a number {bound} (in the metric's units, "
                           f"a fraction 0-1 for rates), got {as_written(node)}")
    return float(value)


def _is_scalar(node: Node) -> bool:
    return isinstance(node, ScalarNode)


def _choice(reader: Reader, node: Node, what: str, choices: tuple[str, ...]) -> str:
    value = reader.value(node)
    if value not in choices:
        raise reader.error(node, f"{what} must be one of {', '.join(choices)}, "
                           f"got {as_written(node)}")
    return str(value)


def _option(reader: Reader, key: str, node: Node) -> dict[str, Any]:
    if key == "critical":
        entries = reader.mapping(node, "`critical`", ("tag", "max_failures"))
        if "tag" not in entries:
            raise reader.error(node, "`critical` needs `tag`, e.g. `critical: {tag: must_pass}`")
        tags = _strings(reader, entries["tag"][1], "`critical.tag`")
        if not tags:
            raise reader.error(entries["tag"][1], "`critical.tag` needs at least one tag")
        if "max_failures" in entries:
            return {"critical_tags": tags, "critical_max_failures": _count(
                reader, entries["max_failures"][1], "`critical.max_failures`", 0)}
        return {"critical_tags": tags}
    if key == "groups":
        entries = reader.mapping(node, "`groups`", ("by", "min_items"))
        if "by" not in entries:
            raise reader.error(node, "`groups` needs `by`, e.g. `groups: {by: category}`")
        found = {"group_by": reader.string(entries["by"][1], "`groups.by`")}
        if "min_items" in entries:
            return found | {"group_min_items": _count(reader, entries["min_items"][1],
                                                      "`groups.min_items`", 1)}
        return found
    if key == "on_inconclusive":
        return {"on_inconclusive": _choice(reader, node, "`on_inconclusive`", ON_INCONCLUSIVE)}
    return {"quarantine": _strings(reader, node, "`quarantine`")}


def _strings(reader: Reader, node: Node, what: str) -> tuple[str, ...]:
    items = [node] if _is_scalar(node) else reader.sequence(node, what)
    values = []
    for item in items:
        value = reader.value(item)
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise reader.error(item, f"{what} entries must be ids or names, got {as_written(item)}")
        values.append(str(value))
    return tuple(values)
