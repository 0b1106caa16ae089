"""The decision of a gate in one sentence a reviewer reads in five seconds (pure).

Which rule decided, the effect with its 95% interval and p-value, and for an inconclusive rule
about how many paired examples would decide it: the interval's half-width shrinks as
1 / sqrt(n) (the central limit theorem), so n * (half-width / distance to the margin)**2
examples bring the interval off the margin if the delta stays where it is.
"""

from __future__ import annotations

import math
from collections import Counter

from worker.evals.score import lower_is_better
from worker.evals.types import GateReport, PairedComparison, RuleOutcome
from worker.evals.verdict import DECIDED_RULE, UNDECIDED_RULE, p_text
from worker.report.markdown import THRESHOLD_RULES, VERDICT

_DECIDING = ("fail", "regression")


def decision_sentence(report: GateReport) -> str:
    """Return one sentence naming the rule that decided ``report``: empty for no rules; the
    report's headline when no rule decided but something else did (base could not be
    evaluated, the budget, a provider outage: never "all rules pass" beside it), or when
    examples without an answer decided what it says (`_missing_answers`)."""
    if report.config_error is not None or not report.outcomes:
        return ""
    deciding = [o for o in report.outcomes
                if o.status in _DECIDING or o.effect in ("failure", "undecided")]
    if report.headline and _missing_answers(report, deciding):
        return report.headline.rstrip(".") + "."  # what is (un)decided and why (issue 32)
    if not deciding:
        deciding = [o for o in report.outcomes if o.effect == "neutral"]
    if not deciding and report.headline:
        return report.headline.rstrip(".") + "."
    if not deciding:
        tested = [c for c in report.comparisons if c.delta is not None and c.p_adjusted is not None]
        worst = min(tested, key=lambda c: c.p_adjusted or 1.0, default=None)
        others = Counter(o.status for o in report.outcomes if o.status != "pass")
        total = len(report.outcomes)
        # a rule not checked (no base for max_drop) is never counted as passing (issue 33)
        text = f"all {total} rules pass" if not others else \
            f"{total - sum(others.values())} of {total} rules pass, " + \
            ", ".join(f"{n} {status}" for status, n in sorted(others.items()))
        return text + (f"; the clearest drop tested: {_effect(worst)}" if worst else "") + "."
    first = deciding[0]
    more = f"; {len(deciding) - 1} more rules too" if len(deciding) > 2 else \
        "; 1 more rule too" if len(deciding) == 2 else ""
    found = None if first.rule.startswith(THRESHOLD_RULES) else _comparison(report, first)
    effect = f": {_effect(found)}" if found else f": {first.reason}" if first.reason else ""
    text = f"decided by {_where(first)} {first.rule} ({first.status}{more}){effect}"
    if first.status == "inconclusive" and found is not None:
        text += f"; {_needed(found, first.rule)}"
    return text + "."


def _missing_answers(report: GateReport, deciding: list[RuleOutcome]) -> bool:
    """Whether examples without an answer decided what the Why must say
    (worker/evals/verdict/decided.py), which the run's headline then says: a failure they
    cannot undo (the rule, what had no answer, the regressions found), or rules they leave
    undecided (which, and why), never "decided by" a rule that failed on the answered ones
    beside a Let through."""
    if report.conclusion == "failure":
        return any(DECIDED_RULE in o.reason for o in deciding)
    return bool(deciding) and all(UNDECIDED_RULE in o.reason for o in deciding)


def headline_text(report: GateReport) -> str:
    """Return the report's headline, never empty: the report's own (what decided when no rule
    did), else `decision_sentence` (a passing run: "all N rules pass..."), else what the
    run came to (a configuration error and its place, or no gate rule checked)."""
    if report.headline:
        return report.headline
    decision = decision_sentence(report)
    if decision:
        return decision
    err = report.config_error
    if err is not None:
        where = err.path if err.line is None else f"{err.path}:{err.line}"
        return f"configuration error in {where}: {err.message}"
    return f"{VERDICT[report.conclusion][1]}: no gate rule was checked"


def _where(o: RuleOutcome) -> str:
    return f"{o.suite} {o.metric}" + (f" [{o.group}]" if o.group else "")


def _comparison(report: GateReport, o: RuleOutcome) -> PairedComparison | None:
    return next((c for c in report.comparisons
                 if (c.suite, c.metric, c.group) == (o.suite, o.metric, o.group)), None)


def _effect(c: PairedComparison) -> str:
    where = c.metric + (f" [{c.group}]" if c.group else "")
    text = f"{where} head - base = {c.delta:+.3f}" if c.delta is not None else where
    if c.ci_low is not None and c.ci_high is not None:
        text += f", 95% CI [{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
    if c.p_adjusted is not None:
        text += f", p = {p_text(c.p_adjusted)} (adjusted: {c.adjustment})"
    return text + f", n = {c.n}"


def _needed(c: PairedComparison, rule: str) -> str:
    margin = _margin(rule)
    if c.ci_low is None or c.ci_high is None or c.delta is None or margin is None:
        return "more paired examples would decide it"
    gap = abs(c.delta - margin) if lower_is_better(c.metric) else abs(c.delta + margin)
    half = (c.ci_high - c.ci_low) / 2
    if gap <= 0 or not math.isfinite(half):
        return "the delta sits on the margin: no number of examples would decide it"
    return f"about {math.ceil(c.n * (half / gap) ** 2)} paired examples would decide it"


def _margin(rule: str) -> float | None:
    if not rule.startswith("non_inferiority_margin "):
        return None
    return float(rule.split()[1])


