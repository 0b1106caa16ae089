"""Check a suite's ``judge:`` rules on a calibration of its judge (pure).

Per criterion (worker/evals/run/judge_calibration.py): ``min_agreement`` fails when the judge's
agreement with the labels is below it; ``max_drift`` fails when agreement dropped by more than
it from the reference (the snapshot committed next to the labels, or base's judge measured
now). A criterion the judge could not rate (judge errors on half the rows or more) decides
nothing: its rules are ``inconclusive`` with effect ``undecided``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from worker.evals.run import CriterionCalibration, JudgeCalibration
from worker.evals.types import JudgeRules, RuleOutcome

#: Slack for float rounding when a figure sits exactly on a bound.
EPS = 1e-9


def metric_name(criterion: str) -> str:
    """The report's metric of a criterion's agreement: ``judge agreement (accuracy)``."""
    return f"judge agreement ({criterion})"


def check_rules(calibration: JudgeCalibration, rules: JudgeRules,
                reference: Mapping[str, float]) -> tuple[RuleOutcome, ...]:
    """Return one outcome per criterion and rule (``min_agreement``, ``max_drift``).

    Args:
        calibration: the judge (head's) against the labels.
        rules: base's ``judge:`` rules of the suite.
        reference: criterion -> agreement to measure the drift from (fraction 0-1).
    """
    found: list[RuleOutcome] = []
    for c in calibration.criteria:
        before = reference.get(c.name)
        if rules.min_agreement is not None:
            found.append(_min(calibration.suite, c, rules.min_agreement, before))
        if rules.max_drift is not None:
            found.append(_drift(calibration.suite, c, rules.max_drift, before))
    return tuple(found)


def _outcome(suite: str, c: CriterionCalibration, rule: str, before: float | None,
             failed: bool, reason: str) -> RuleOutcome:
    now = c.agreement.value
    delta = now - before if before is not None and math.isfinite(now) else None
    if not c.decided or not math.isfinite(now):
        return RuleOutcome(suite, metric_name(c.name), rule, before, None, None, "inconclusive",
                           f"the judge rated {c.n} of {c.n + c.judge_errors} labelled answers "
                           f"({c.first_error or 'judge errors'}): its agreement is unknown",
                           effect="undecided")
    return RuleOutcome(suite, metric_name(c.name), rule, before, now, delta,
                       "fail" if failed else "pass", reason if failed else "")


def _min(suite: str, c: CriterionCalibration, bound: float,
         before: float | None) -> RuleOutcome:
    now = c.agreement.value
    return _outcome(suite, c, f"min_agreement {bound:.2f}", before, now < bound - EPS,
                    f"the judge agrees with {now:.0%} of the labels (95% CI "
                    f"{_ci(c)}), below {bound:.0%}: not trusted")


def _drift(suite: str, c: CriterionCalibration, bound: float,
           before: float | None) -> RuleOutcome:
    if before is None:
        return RuleOutcome(suite, metric_name(c.name), f"max_drift {bound:.2f}", None,
                           c.agreement.value, None, "inconclusive",
                           "no reference agreement to measure the drift from",
                           effect="undecided")
    drop = before - c.agreement.value
    return _outcome(suite, c, f"max_drift {bound:.2f}", before, drop > bound + EPS,
                    f"agreement dropped {drop:.0%} ({before:.0%} -> "
                    f"{c.agreement.value:.0%}), more than {bound:.0%}: not trusted")


def _ci(c: CriterionCalibration) -> str:
    low, high = c.agreement.low, c.agreement.high
    return f"{low:.0%}-{high:.0%}" if math.isfinite(low) and math.isfinite(high) else "n/a"
