"""Turn paired comparisons into rule verdicts: pass, regression or inconclusive (pure).

One sentence per rule (docs/statistics.md, "Gate rules"):

- ``regression: {alpha}``: regression when the family-adjusted one-sided p-value of a drop is
  at most alpha (sign-flip min-P or Holm, worker/evals/verdict/signflip.py); otherwise pass.
- ``non_inferiority_margin: m``: pass when the 95% interval of head - base lies above -m,
  regression when it lies wholly below -m, inconclusive when it straddles -m.
- ``max_new_failures: k``: regression when more than k examples pass at base and fail at head.
- ``min_detectable: d``: inconclusive when the set cannot detect a drop of d at 80% power.
- ``critical: {tag, max_failures}``: regression when more than ``max_failures`` (default 0)
  examples with the tag do not pass at head.
- ``max_example_drop: {by, count}``: regression when more than ``count`` examples' values drop
  by more than ``by`` (worker/evals/verdict/example_drops.py).

Quarantined examples are left out of the two per-example rules. With no shared example id the
statistical rules are inconclusive (a change cannot escape its gate by renaming ids).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from worker.evals.score import lower_is_better
from worker.evals.types import (
    ExampleResult,
    GateOptions,
    GateRule,
    PairedComparison,
    RuleOutcome,
    RuleStatus,
)
from worker.evals.verdict import power
from worker.evals.verdict.paired import PairedSuite, mean_over_repeats
from worker.evals.verdict.reason_text import p_text

Effect = Literal["none", "neutral", "undecided", "failure"]
#: What an inconclusive verdict does to the check, by ``on_inconclusive`` (``undecided`` when
#: it is not set: the run is undecided, worker/evals/verdict/health.py).
ON_INCONCLUSIVE: dict[str, Effect] = {"pass": "none", "neutral": "neutral",
                                      "undecided": "undecided", "fail": "failure"}
#: Example ids listed in a reason.
MAX_IDS = 10


def comparison_outcomes(rule: GateRule, options: GateOptions,
                        comparisons: Sequence[PairedComparison]) -> list[RuleOutcome]:
    """Check ``regression``, ``non_inferiority_margin`` and ``min_detectable`` on comparisons.

    Args:
        rule: the metric's rules.
        options: the suite's options (``on_inconclusive``).
        comparisons: this metric's comparisons, the suite's first, then its groups'.

    Returns:
        Outcomes in rule order; ``min_detectable`` is judged on the whole suite only (groups
        are smaller by design; their MDDs are in the comparison table).
    """
    effect = ON_INCONCLUSIVE[options.on_inconclusive]
    found = []
    if rule.regression_alpha is not None:
        found += [_regression(c, rule.regression_alpha, effect) for c in comparisons]
    if rule.non_inferiority_margin is not None:
        found += [_non_inferiority(c, rule.non_inferiority_margin, effect) for c in comparisons]
    if rule.min_detectable is not None and comparisons:
        found.append(_min_detectable(comparisons[0], rule))
    return found


def inconclusive_outcome(suite: str, metric: str, rule: str, reason: str,
                         options: GateOptions) -> RuleOutcome:
    """Return an ``inconclusive`` outcome of a rule the data cannot decide, with its effect.

    The effect on the check follows ``options.on_inconclusive``; the reason gets it appended.
    """
    effect = ON_INCONCLUSIVE[options.on_inconclusive]
    return RuleOutcome(suite, metric, rule, None, None, None, "inconclusive",
                       reason + _effect_text(effect), effect=effect)


def _outcome(c: PairedComparison, rule: str, status: RuleStatus, reason: str = "",
             effect: Effect = "none") -> RuleOutcome:
    return RuleOutcome(c.suite, c.metric, rule, c.base, c.head, c.delta, status,
                       "" if status == "pass" else reason, c.group,
                       effect if status == "inconclusive" else "none")


def _no_pairs(c: PairedComparison, text: str, effect: Effect) -> RuleOutcome:
    reason = ("no example id is shared by base and head, so nothing can be compared"
              + _effect_text(effect))
    return _outcome(c, text, "inconclusive", reason, effect)


def _regression(c: PairedComparison, alpha: float, effect: Effect) -> RuleOutcome:
    text = f"regression alpha {alpha:.4g}"
    if c.p_adjusted is None or c.test == "none":
        return _no_pairs(c, text, effect)
    test = (f"McNemar exact, {c.broken} broken / {c.fixed} fixed" if c.test == "mcnemar" else
            f"Wilcoxon signed-rank, {c.n_zero} of {c.n} tied pairs dropped")
    if c.p_adjusted <= alpha:
        return _outcome(c, text, "regression",
                        f"significant {_drop_word(c.metric)}: p = {p_text(c.p_adjusted)} "
                        f"({_adjusted(c)}; {test}) <= {alpha:.4g}")
    return _outcome(c, text, "pass")


def _adjusted(c: PairedComparison) -> str:
    return "Holm-adjusted" if c.adjustment == "Holm" else f"{c.adjustment} adjusted"


def _non_inferiority(c: PairedComparison, margin: float, effect: Effect) -> RuleOutcome:
    text = f"non_inferiority_margin {margin:g}"
    if c.ci_low is None or c.ci_high is None:
        if c.n == 0:
            return _no_pairs(c, text, effect)
        return _outcome(c, text, "inconclusive", f"n = {c.n}: too few paired examples for an "
                        f"interval{_effect_text(effect)}", effect)
    worse = lower_is_better(c.metric)
    bound = margin if worse else -margin
    interval = f"the 95% CI [{c.ci_low:+.3f}, {c.ci_high:+.3f}] of head - base"
    if (c.ci_high < bound) if worse else (c.ci_low > bound):
        return _outcome(c, text, "pass")
    if (c.ci_low > bound) if worse else (c.ci_high < bound):
        side = "above" if worse else "below"
        return _outcome(c, text, "regression", f"{interval} lies wholly {side} {bound:+g}")
    return _outcome(c, text, "inconclusive",
                    f"{interval} straddles {bound:+g}: the data cannot tell "
                    f"({_detects(c)}){_effect_text(effect)}", effect)


def _min_detectable(c: PairedComparison, rule: GateRule) -> RuleOutcome:
    drop = rule.min_detectable or 0.0
    text = f"min_detectable {drop:g}"
    if c.mdd <= drop:
        return _outcome(c, text, "pass")
    effect: Effect = "failure" if rule.min_detectable_action == "fail" else "none"
    action = "fails the check" if effect == "failure" else "a warning only"
    return _outcome(c, text, "inconclusive",
                    f"{_detects(c)} (one-sided level {c.mdd_alpha:.2g}), not {drop:g}: about "
                    f"{_n_needed(c, drop)} paired examples are needed "
                    f"({action}: action {rule.min_detectable_action})", effect)


def _n_needed(c: PairedComparison, drop: float) -> int:
    if c.test == "mcnemar" and c.n:
        flips = ((c.fixed or 0) + (c.broken or 0)) / (2 * c.n)
        return power.n_needed_binary(min(drop, 1.0), flips, c.mdd_alpha)
    floor = max(power.min_significant_count(c.mdd_alpha), 2)
    if not math.isfinite(c.mdd) or c.n < 2:
        return floor
    return max(math.ceil(c.n * (c.mdd / drop) ** 2), floor)


def new_failures_outcome(suite: str, rule: GateRule, paired: PairedSuite,
                         quarantine: Sequence[str]) -> RuleOutcome:
    """Check ``max_new_failures``: examples that pass at base and fail at head, per metric.

    With repeats an example passes when it passes in more than half of them. Needs a pass/fail
    metric (values 0 or 1); quarantined examples are left out.
    """
    limit = rule.max_new_failures or 0
    text = f"max_new_failures {limit}"
    j = paired.metrics.index(rule.metric)
    base, head = paired.base[:, j, :], paired.head[:, j, :]
    if lower_is_better(rule.metric):
        base, head = 1 - base, 1 - head
    known = ~np.isnan(base) & ~np.isnan(head)
    if not np.all((base[known] == 0) | (base[known] == 1)) or \
            not np.all((head[known] == 0) | (head[known] == 1)):
        return RuleOutcome(suite, rule.metric, text, None, None, None, "skipped",
                           f"{rule.metric} is a score, not pass/fail: max_new_failures needs "
                           "a pass/fail metric")
    excluded = set(quarantine)
    flipped = (mean_over_repeats(base) > 0.5) & (mean_over_repeats(head) <= 0.5)
    broken = [paired.ids[k] for k in np.flatnonzero(flipped) if paired.ids[k] not in excluded]
    status: RuleStatus = "regression" if len(broken) > limit else "pass"
    reason = (f"{len(broken)} examples pass at base and fail at head (allowed {limit}): "
              f"{_ids(broken)}")
    return RuleOutcome(suite, rule.metric, text, None, None, None, status,
                       "" if status == "pass" else reason)


def critical_outcomes(suite: str, options: GateOptions, paired: PairedSuite | None,
                      head: Sequence[ExampleResult]) -> list[RuleOutcome]:
    """Check ``critical``: every example with a critical tag (at base or head) passes at head,
    but for ``options.critical_max_failures`` of them.

    An example passes when every scored repeat of it passes; one missing at head does not
    pass; one whose every repeat is unscored (provider or judge error) makes the rule
    inconclusive when counting it as failed would exceed the allowance. Quarantined examples
    are left out. Needs no base (``paired`` may be None).
    """
    if not options.critical_tags:
        return []
    tags = set(options.critical_tags)
    results: dict[str, list[ExampleResult]] = {}
    for result in head:
        results.setdefault(result.id, []).append(result)
    tagged = list(dict.fromkeys([*(r.id for r in head if tags & set(r.tags)),
                                 *(paired.critical if paired else ())]))
    critical = [i for i in tagged if i not in set(options.quarantine)]
    scored = {i: [r.passed for r in results.get(i, []) if not r.unscored] for i in critical}
    failing = [i for i in critical if i not in results or not all(scored[i])]
    unconfirmed = [i for i in critical if i in results and not scored[i]]
    allowed = options.critical_max_failures
    text = f"critical tag {', '.join(options.critical_tags)}" + (
        f" max_failures {allowed}" if allowed else "")
    share = (len(critical) - len(failing)) / len(critical) if critical else None
    if not tagged:  # a misspelt tag must not switch the rule off silently: fail closed
        return [RuleOutcome(suite, "critical examples", text, None, None, None, "fail",
                            "no example carries this tag at base or head: check its spelling "
                            "against the dataset's `tags`")]
    if len(failing) > allowed:
        return [RuleOutcome(suite, "critical examples", text, None, share, None, "regression",
                            f"{len(failing)} of {len(critical)} critical examples do not pass "
                            f"at head (failed or missing{_allowed(allowed)}): "
                            f"{_ids(failing)}")]
    if len(failing) + len(unconfirmed) > allowed:
        effect = ON_INCONCLUSIVE[options.on_inconclusive]
        return [RuleOutcome(suite, "critical examples", text, None, share, None, "inconclusive",
                            f"{len(unconfirmed)} critical examples could not be scored at head "
                            f"(provider or judge errors): {_ids(unconfirmed)}"
                            f"{_effect_text(effect)}", effect=effect)]
    return [RuleOutcome(suite, "critical examples", text, None, share, None, "pass")]


def _allowed(allowed: int) -> str:
    return f"; allowed {allowed}" if allowed else ""


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS])
    return shown + (f" and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")


def _effect_text(effect: Effect) -> str:
    return {"none": "; counts as a pass (on_inconclusive: pass)",
            "neutral": "; the check is neutral (on_inconclusive: neutral)",
            "undecided": "; the run is undecided (no on_inconclusive in the base config)",
            "failure": "; fails the check (on_inconclusive: fail)"}[effect]


def _drop_word(metric: str) -> str:
    return "rise" if lower_is_better(metric) else "drop"


def _detects(c: PairedComparison) -> str:
    word = _drop_word(c.metric)
    if not math.isfinite(c.mdd):
        return f"at n = {c.n} no {word} can reach significance"
    return f"at n = {c.n} this set detects {word}s >= {c.mdd:.3f} with 80% power"
