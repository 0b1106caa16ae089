"""Pair a suite's base and head results by example id, as score arrays for the statistics (pure).

Each metric that is a mean over examples gets a per-example value
(worker/evals/score/example_values.py): 1/0 for pass and error rates, mean assertion scores, cost,
tokens. Repeats of an example (results sharing an id with distinct ``repeat`` numbers) fill a third
axis; their mean is the example's score. Examples on one side only are listed as added or removed
and left out. Pairing must be exact: an empty id, or an id repeated without distinct repeat numbers,
raises `ConfigError` naming the dataset and line, and so does an example without an explicit ``id``
(its line number stands in, and shifts when lines move) in a suite whose rules pair examples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker.errors import ConfigError
from worker.evals.score import has_example_values, values_array
from worker.evals.types import ExampleResult, SuiteConfig, SuiteResult
from worker.evals.verdict.stats import FloatArray

__all__ = ["PairedSuite", "first_line_id", "has_example_values", "mean_over_repeats",
           "missing_id_message", "pair_suite", "require_explicit_ids", "rules_needing_ids"]

#: Group label of an example without the grouping key.
NO_GROUP = "(none)"


@dataclass(frozen=True)
class PairedSuite:
    """Base and head values of the paired examples of one suite.

    Attributes:
        ids: paired example ids, in head order.
        metrics: the metric of each column.
        base, head: values of shape (n, m, r): example, metric, repeat; NaN = not applicable
            or no such repeat.
        groups: group label of each paired example ("" when not grouping).
        added, removed: ids only at head / only at base.
        critical: ids tagged with a critical tag at base or at head (paired or not).
    """

    ids: tuple[str, ...]
    metrics: tuple[str, ...]
    base: FloatArray
    head: FloatArray
    groups: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    critical: tuple[str, ...] = ()


def mean_over_repeats(values: FloatArray) -> FloatArray:
    """Mean over the last axis (repeats), NaN where every repeat is NaN; no warnings."""
    counts = np.sum(~np.isnan(values), axis=-1)
    totals = np.nansum(values, axis=-1)
    return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)


def pair_suite(
    base: SuiteResult,
    head: SuiteResult,
    metrics: Sequence[str],
    group_by: str | None = None,
    critical_tags: Sequence[str] = (),
) -> PairedSuite:
    """Pair ``base`` and ``head`` by example id and extract the values of ``metrics``.

    Args:
        base, head: the suite's results at base and head.
        metrics: metric names, one column each.
        group_by: metadata key to group by (the base example's value, else head's), or None.
        critical_tags: tags that make an example critical.

    Returns:
        The paired arrays; n = 0 when no id is shared.

    Raises:
        ConfigError: an empty or duplicated example id on either side.
    """
    base_rows, head_rows = _by_id(base), _by_id(head)
    ids = tuple(i for i in head_rows if i in base_rows)
    depth = max((len(r) for r in (*base_rows.values(), *head_rows.values())), default=1)
    groups = tuple(_group(base_rows[i][0], head_rows[i][0], group_by) for i in ids)
    tags = set(critical_tags)
    critical = tuple(dict.fromkeys(
        r.id for r in (*head.examples, *base.examples) if tags and not tags.isdisjoint(r.tags)))
    return PairedSuite(
        ids=ids, metrics=tuple(metrics),
        base=values_array([base_rows[i] for i in ids], metrics, depth),
        head=values_array([head_rows[i] for i in ids], metrics, depth),
        groups=groups,
        added=tuple(i for i in head_rows if i not in base_rows),
        removed=tuple(i for i in base_rows if i not in head_rows),
        critical=critical)


def rules_needing_ids(config: SuiteConfig) -> list[str]:
    """Return the suite's rules that pair base and head example by example, as text.

    ``regression``, ``non_inferiority_margin``, ``max_new_failures``, ``min_detectable``,
    ``max_example_drop`` and ``critical`` compare or look up examples by id, so an id that is
    only a line number (which shifts when a line is added above it) would pair the wrong
    examples; ``min``, ``max_drop``,
    ``max`` and ``max_increase`` compare suite means and need no ids.
    """
    found = [f"{metric}: {key}" for metric, rule in config.gate.items()
             for key, value in (("regression", rule.regression_alpha),
                                ("non_inferiority_margin", rule.non_inferiority_margin),
                                ("max_new_failures", rule.max_new_failures),
                                ("min_detectable", rule.min_detectable),
                                ("max_example_drop", rule.max_example_drop))
             if value is not None]
    return found + (["critical"] if config.gate_options.critical_tags else [])


def first_line_id(suite: SuiteResult) -> int | None:
    """Return the line of the suite's first example whose id is its line number, or None."""
    return next((r.line for r in suite.examples if r.id_from_line), None)


def require_explicit_ids(config: SuiteConfig, suite: SuiteResult) -> None:
    """Refuse line-number ids in a suite whose rules pair examples (fail closed).

    Raises:
        ConfigError: at the suite's dataset and the first line without an ``id``, when
            `rules_needing_ids` is not empty.
    """
    rules = rules_needing_ids(config)
    line = first_line_id(suite) if rules else None
    if line is not None:
        raise ConfigError(suite.dataset, line, missing_id_message(config.name, line, rules))


def missing_id_message(suite: str, line: int, rules: Sequence[str]) -> str:
    """Return the error of a dataset line without an ``id`` under rules that pair examples."""
    return (f"line {line} has no `id`, but suite {suite} gates with rules that pair base and "
            f"head example by example ({'; '.join(rules)}), and a line number shifts when a "
            "line is added or removed above it: give every example an `id` (a unique string "
            "or integer)")


def _by_id(suite: SuiteResult) -> dict[str, list[ExampleResult]]:
    rows: dict[str, list[ExampleResult]] = {}
    seen: dict[tuple[str, int], int] = {}
    for result in suite.examples:
        if not result.id:
            raise ConfigError(suite.dataset, result.line, "an example has an empty id: base and "
                              "head are paired by id, so every example needs a unique one")
        key = (result.id, result.repeat)
        if key in seen:
            raise ConfigError(suite.dataset, result.line, f"duplicate example id {result.id!r} "
                              f"(first at line {seen[key]}): base and head are paired by id, "
                              "so ids must be unique")
        seen[key] = result.line
        rows.setdefault(result.id, []).append(result)
    return rows


def _group(base: ExampleResult, head: ExampleResult, key: str | None) -> str:
    if key is None:
        return ""
    value = base.metadata.get(key, head.metadata.get(key))
    return f"{key}={NO_GROUP if value is None else value}"
