"""Compare a head run with a base run under the config's gate rules (pure).

Threshold rules: ``min`` holds when head >= min; ``max_drop`` when base - head <= max_drop; for
lower-is-better metrics ``max`` when head <= max and ``max_increase`` when head - base <=
max_increase; all with a tolerance against float noise (worker/evals/verdict/thresholds.py,
upper_rules.py); they end ``pass``, ``fail`` or ``skipped`` (a relative rule without a base).
Statistical and per-example rules (``regression``, ``non_inferiority_margin``,
``max_new_failures``, ``max_example_drop``, ``min_detectable``, ``critical``) end ``pass``,
``regression`` or ``inconclusive`` (worker/evals/verdict/outcomes.py), on the examples paired by id
(worker/evals/verdict/paired.py; ids taken from line numbers are refused, unless head ran base's
very examples: worker/evals/verdict/contract.py) and, with ``groups``, in each group too. The
``regression`` tests of the whole gate form one family (a sign-flip step-down min-P family,
worker/evals/verdict/signflip.py, or Holm's under ``settings.statistics.method: holm``), so its
false-alarm rate stays at alpha. The conclusion is ``failure`` when a rule fails or regresses (or an
inconclusive rule is set to fail), else ``action_required`` when an inconclusive rule has no
``on_inconclusive`` (the run is undecided: worker/evals/verdict/health.py may make it ``neutral``
when base says ``settings.undecided: neutral``), else ``neutral`` when an inconclusive rule is set
to neutral, else ``success``. Regressed examples (passed at base, fail at head) are listed either
way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from worker.errors import ConfigError
from worker.evals.types import (
    Conclusion,
    Config,
    ExampleResult,
    GateReport,
    GateRule,
    PairedComparison,
    Regression,
    RuleOutcome,
    RunResult,
    StatisticsSettings,
    SuiteConfig,
    SuiteResult,
)
from worker.evals.verdict import stats
from worker.evals.verdict.comparisons import (
    DEFAULT_SETTINGS,
    StatSettings,
    compare_suite,
    gated_groups,
    scope_counts,
)
from worker.evals.verdict.example_drops import (
    drop_regressions,
    dropped,
    example_drop_outcome,
    rule_text,
)
from worker.evals.verdict.group_rules import group_threshold_outcomes
from worker.evals.verdict.leftovers import left_running_notes
from worker.evals.verdict.outcomes import (
    comparison_outcomes,
    critical_outcomes,
    inconclusive_outcome,
    new_failures_outcome,
)
from worker.evals.verdict.paired import (
    PairedSuite,
    first_line_id,
    has_example_values,
    pair_suite,
    require_explicit_ids,
    rules_needing_ids,
)
from worker.evals.verdict.signflip import FamilySuite, History, adjust_family, split_note
from worker.evals.verdict.thresholds import NO_BASE, check_thresholds, find_regressions
from worker.evals.verdict.upper_rules import check_upper

__all__ = ["NO_BASE", "compare", "conclude", "config_error_report", "paired_verdicts"]

#: One-sided level of the minimum detectable drop of a metric without a ``regression`` rule:
#: that of the lower bound of a two-sided 95% interval.
INTERVAL_ALPHA = 0.025
#: The family of `paired_verdicts` unless told otherwise (today's benches compare with it).
_HOLM = StatisticsSettings(method="holm")
_Found = dict[tuple[str, str], list[PairedComparison]]


@dataclass(frozen=True)
class _Suite:
    config: SuiteConfig
    head: SuiteResult | None
    base: SuiteResult | None
    paired: PairedSuite | None
    unpaired: str = ""  # why base and head cannot be paired (base ids are line numbers)


def compare(
    config: Config,
    head: RunResult,
    base: RunResult | None,
    notes: Sequence[str] = (),
    settings: StatSettings = DEFAULT_SETTINGS,
    history: Mapping[str, History] | None = None,
) -> GateReport:
    """Check every gate rule of ``config`` on head (and base), and list the regressions.

    Args:
        config: the config whose suites and rules are checked (in the worker: head's suites
            with the rules of base, or the stricter of the two); sets the order of outcomes.
        head: the head run.
        base: the base run, or None when there is none (relative rules are then skipped).
        notes: lines to carry into the report.
        settings: bootstrap resamples, seed and power of the statistics.
        history: earlier values of each suite's examples (suite -> metric -> id -> values),
            which weigh the examples of the sign-flip family (worker/evals/verdict/flakiness.py).

    Returns:
        The report. An empty or duplicated example id (pairing must be exact), or a head
        example without an explicit ``id`` in a suite whose rules pair examples, gives a failed
        report with ``config_error`` naming the dataset and line; a base dataset without ids
        makes those rules inconclusive (the fix must be able to merge).
    """
    try:
        suites = [_suite(s, head, base) for s in config.suites]
    except ConfigError as err:
        return config_error_report(err, head)
    comparisons = _comparisons(suites, settings, config.settings.statistics, history or {})
    outcomes: list[RuleOutcome] = []
    regressions: list[Regression] = []
    extra = list(notes)
    options = config.settings.statistics
    if options.method != "holm":
        extra += [found for found in [split_note(_members(suites, history or {}), options)]
                  if found]
    for suite in suites:
        outcomes.extend(_suite_outcomes(suite, comparisons))
        extra.extend(_suite_notes(suite))
        extra.extend(left_running_notes(suite.config.name, suite.head, suite.base))
        if suite.head is not None and suite.base is not None:
            found = find_regressions(suite.head, suite.base)
            regressions.extend(found + _drop_regressions(suite, {r.example_id for r in found}))
    flat = tuple(c for found in comparisons.values() for c in found)
    return GateReport(
        conclusion=conclude(outcomes), outcomes=tuple(outcomes),
        regressions=tuple(regressions), head=head, base=base, notes=tuple(extra),
        comparisons=flat, holm_tests=sum(c.p_adjusted is not None for c in flat))


def paired_verdicts(
    suites: Sequence[tuple[SuiteConfig, PairedSuite]],
    settings: StatSettings = DEFAULT_SETTINGS,
    options: StatisticsSettings = _HOLM,
    history: Mapping[str, History] | None = None,
) -> tuple[Conclusion, list[RuleOutcome], list[PairedComparison]]:
    """Run the statistical part of `compare` on suites already paired (simulations, benches).

    The same comparisons, family (``options``: Holm unless told otherwise) and verdicts as
    `compare`, without the threshold rules, the critical tags or the regressed-example list.

    Returns:
        The conclusion of those rules alone, their outcomes and the comparisons.
    """
    wrapped = [_Suite(config, None, None, paired) for config, paired in suites]
    found = _comparisons(wrapped, settings, options, history or {})
    outcomes = [o for suite in wrapped for rule in suite.config.gate.values()
                for o in _paired_rules(suite, rule, found.get((suite.config.name, rule.metric),
                                                              []))]
    return conclude(outcomes), outcomes, [c for cs in found.values() for c in cs]


def conclude(outcomes: Sequence[RuleOutcome]) -> Conclusion:
    """Return the check conclusion of a list of rule outcomes (see the module docstring)."""
    if any(o.status in ("fail", "regression") or o.effect == "failure" for o in outcomes):
        return "failure"
    if any(o.effect == "undecided" for o in outcomes):
        return "action_required"
    return "neutral" if any(o.effect == "neutral" for o in outcomes) else "success"


def _suite(config: SuiteConfig, head: RunResult, base: RunResult | None) -> _Suite:
    head_suite = head.suites.get(config.name)
    base_suite = base.suites.get(config.name) if base is not None else None
    if head_suite is None:
        return _Suite(config, None, base_suite, None)
    same_examples = config.contract_root is not None  # head ran base's very examples
    if not same_examples:
        require_explicit_ids(config, head_suite)  # head's dataset is the one a PR can fix
    if base_suite is None:
        pair_suite(head_suite, head_suite, ())  # validates the ids even without a base
        return _Suite(config, head_suite, None, None)
    for side, found in (("base", base_suite), ("head", head_suite)):
        line = None if same_examples else first_line_id(found)
        if line is not None:  # line numbers shift when lines move: pairing would be a guess
            return _Suite(config, head_suite, base_suite, None,
                          f"base and head are not paired example by example: the {side} "
                          f"dataset {found.dataset} has no `id` at line {line}")
    options = config.gate_options
    whole = {f"custom.{m.name}" for m in config.metrics if not m.per_example}
    metrics = [m for m in config.gate if has_example_values(m) and m not in whole]
    return _Suite(config, head_suite, base_suite,
                  pair_suite(base_suite, head_suite, metrics, options.group_by,
                             options.critical_tags))


def _comparisons(suites: Sequence[_Suite], settings: StatSettings,
                 options: StatisticsSettings, history: Mapping[str, History]) -> _Found:
    """Compare every gated metric of every paired suite; adjust the regression p-values
    together (``options.method``: the sign-flip family, or Holm)."""
    family = 0
    for suite in suites:
        if suite.paired is not None:
            counts = scope_counts(suite.paired, suite.config.gate_options.group_min_items)
            family += sum(n for n, m in zip(counts, suite.paired.metrics, strict=True)
                          if suite.config.gate[m].regression_alpha is not None)
    found: _Found = {}
    for suite in suites:
        if suite.paired is None or not suite.paired.metrics:
            continue
        rules = [suite.config.gate[m] for m in suite.paired.metrics]
        alphas = [INTERVAL_ALPHA if r.regression_alpha is None
                  else r.regression_alpha / max(family, 1) for r in rules]
        for c in compare_suite(suite.config.name, suite.paired, alphas,
                               suite.config.gate_options.group_min_items, settings):
            found.setdefault((c.suite, c.metric), []).append(c)
    if options.method == "holm":
        return _holm(found, suites)
    return _family(found, suites, options, history)


def _family(found: _Found, suites: Sequence[_Suite], options: StatisticsSettings,
            history: Mapping[str, History]) -> _Found:
    flat = [c for cs in found.values() for c in cs]
    adjusted = iter(adjust_family(_members(suites, history), flat, options))
    return {key: [next(adjusted) for _ in cs] for key, cs in found.items()}


def _members(suites: Sequence[_Suite], history: Mapping[str, History]) -> list[FamilySuite]:
    return [FamilySuite(s.config.name, s.paired, s.config.gate,
                        s.config.gate_options.group_min_items, history.get(s.config.name))
            for s in suites if s.paired is not None and s.paired.metrics]


def _holm(found: _Found, suites: Sequence[_Suite]) -> _Found:
    tested = {(s.config.name, m) for s in suites for m, r in s.config.gate.items()
              if r.regression_alpha is not None}
    members = [(key, i) for key, found_ in found.items() if key in tested
               for i, c in enumerate(found_) if c.p_value is not None]
    p_values = np.array([found[key][i].p_value for key, i in members], dtype=np.float64)
    for (key, i), adjusted in zip(members, stats.holm_adjust(p_values), strict=True):
        found[key][i] = replace(found[key][i], p_adjusted=float(adjusted))
    return found


def _suite_outcomes(suite: _Suite, comparisons: _Found) -> list[RuleOutcome]:
    name, options = suite.config.name, suite.config.gate_options
    outcomes: list[RuleOutcome] = []
    for rule in suite.config.gate.values():
        outcomes.extend(check_thresholds(name, rule, suite.head, suite.base))
        outcomes.extend(check_upper(name, rule, suite.head, suite.base))
        outcomes.extend(_paired_rules(suite, rule, comparisons.get((name, rule.metric), [])))
    outcomes.extend(group_threshold_outcomes(suite.config, suite.head, suite.base))
    head_examples: Sequence[ExampleResult] = suite.head.examples if suite.head else ()
    outcomes.extend(critical_outcomes(name, options, suite.paired, head_examples))
    return outcomes


def _paired_rules(suite: _Suite, rule: GateRule,
                  found: list[PairedComparison]) -> list[RuleOutcome]:
    texts = _paired_rule_texts(rule)
    if not texts:
        return []
    name = suite.config.name
    if suite.unpaired and has_example_values(rule.metric):
        reason = f"{suite.unpaired} (the paired rules apply once ids are merged)"
        return [inconclusive_outcome(name, rule.metric, text, reason, suite.config.gate_options)
                for text in texts]
    if suite.paired is None or not has_example_values(rule.metric):
        reason = (NO_BASE if suite.base is None else
                  f"suite {name} did not run at head" if suite.head is None else
                  f"{rule.metric} has no per-example values to pair")
        return [RuleOutcome(name, rule.metric, text, None, None, None, "skipped", reason)
                for text in texts]
    outcomes = comparison_outcomes(rule, suite.config.gate_options, found)
    if rule.max_new_failures is not None:
        outcomes.append(new_failures_outcome(name, rule, suite.paired,
                                             suite.config.gate_options.quarantine))
    if rule.max_example_drop is not None:
        outcomes.append(example_drop_outcome(name, rule, suite.paired,
                                             suite.config.gate_options))
    return outcomes


def _drop_regressions(suite: _Suite, listed: set[str]) -> list[Regression]:
    """The examples ``max_example_drop`` rules found dropped, not already in ``listed``."""
    if suite.paired is None or suite.head is None or suite.base is None:
        return []
    found: list[Regression] = []
    for rule in suite.config.gate.values():
        if rule.max_example_drop is None or rule.metric not in suite.paired.metrics:
            continue
        drops = dropped(rule, suite.paired, suite.config.gate_options.quarantine)
        for entry in drop_regressions(rule, drops, suite.head, suite.base):
            if entry.example_id not in listed:
                listed.add(entry.example_id)
                found.append(entry)
    return found


def _paired_rule_texts(rule: GateRule) -> list[str]:
    texts = []
    if rule.regression_alpha is not None:
        texts.append(f"regression alpha {rule.regression_alpha:g}")
    if rule.non_inferiority_margin is not None:
        texts.append(f"non_inferiority_margin {rule.non_inferiority_margin:g}")
    if rule.max_new_failures is not None:
        texts.append(f"max_new_failures {rule.max_new_failures}")
    if rule.min_detectable is not None:
        texts.append(f"min_detectable {rule.min_detectable:g}")
    if rule.max_example_drop is not None:
        texts.append(rule_text(rule))
    return texts


def _suite_notes(suite: _Suite) -> list[str]:
    paired, name = suite.paired, suite.config.name
    if suite.unpaired and not rules_needing_ids(suite.config):
        return [f"{name}: {suite.unpaired}, so no paired statistics are shown; give every "
                "example an `id` to see them"]
    if paired is None:
        return []
    notes = []
    if paired.added or paired.removed:
        notes.append(f"{name}: {len(paired.added)} examples only at head and "
                     f"{len(paired.removed)} only at base, left out of the paired tests")
    small = gated_groups(paired, suite.config.gate_options.group_min_items)[1]
    if small:
        notes.append(f"{name}: groups under {suite.config.gate_options.group_min_items} paired "
                     f"examples are not gated on their own: {', '.join(small)}")
    return notes


def config_error_report(err: ConfigError, head: RunResult | None = None) -> GateReport:
    """Return the failed report of an invalid head config or dataset (no rules checked)."""
    return GateReport("failure", (), (), head, None, config_error=err)
