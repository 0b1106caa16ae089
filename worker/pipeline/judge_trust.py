"""A pull request that changes a suite's judge must still agree with the labelled set.

Base's config decides (a pull request cannot loosen the rules on its own judge): for each
suite with ``judge:`` rules at base (worker/evals/config/judge_rules.py) whose judge head changes
(model, endpoint, parameters, rubric or scale, quorum, threshold: any criterion's
`worker.evals.run.judge_calibration.identity`), head's judges are run on base's labels file and
checked (worker/evals/verdict/judge_trust.py) against ``min_agreement`` and against
``max_drift`` from base's snapshot (or, without one, base's judges measured now). The report
gets one row per rule, a note with the change in agreement, and the disagreements; its
``judge_agreement`` keeps each criterion's figures (agreement, Cohen's kappa, n) for the gate's
history record (worker/baselines/gate_records.py), never rendered.

Conclusions, by the house's fail-closed rule: a rule that fails is the head's doing (its judge
disagrees with the people base trusts), so the check is ``failure``, "judge not trusted". A
calibration that decides nothing (judge errors on half the labels or more, a labels file or
snapshot at base that cannot be read) is undecidable, not the head's fault: a ``success`` or
``neutral`` becomes ``action_required`` (``neutral`` when base says ``settings.undecided:
neutral``, as worker/evals/verdict/health.py decides undecided runs).

Cost: the calibration's judge calls spend head's run's one budget (base's ``max_cost_usd`` and
``max_duration``): `planned` lists them for the run's estimate, `apply_judge_rules` sends them
through the run's `ModelCaller`, and the caller puts them in the run's model-call totals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.evals.llm import ModelCaller
from worker.evals.llm_types import RunUsage
from worker.evals.run import (
    JudgeCalibration,
    Judging,
    calibrate_suite,
    identity,
    load_snapshot,
    planned_judgings,
    suite_criteria,
)
from worker.evals.score import JudgeSpec
from worker.evals.types import (
    Conclusion,
    Config,
    GateReport,
    JudgeAgreement,
    JudgeRules,
    RuleOutcome,
    SuiteConfig,
)
from worker.evals.verdict import check_rules, metric_name

#: Disagreements listed per criterion in the report.
SHOWN_DISAGREEMENTS = 5
_PASSING = ("success", "neutral", "skipped")


def planned(head: Config, base: Config | None, base_root: Path | None) -> list[Judging]:
    """The judge calls `apply_judge_rules` will make, for head's run's estimate: head's
    judges on base's labels, and base's too where no snapshot at base is the reference.
    A suite whose calibration cannot be planned (a bad labels file) adds nothing: the rules
    report it."""
    if base is None or base_root is None:
        return []
    heads = {s.name: s for s in head.suites}
    found: list[Judging] = []
    for suite in base.suites:
        head_suite = heads.get(suite.name)
        if suite.judge is None or head_suite is None:
            continue
        try:
            if _changed(suite, base, head_suite, head) is None:
                continue
            found += planned_judgings(head_suite, head.settings, base_root, suite.judge.labels,
                                      head.path)
            if load_snapshot(base_root, suite.judge.labels) is None:
                found += planned_judgings(suite, base.settings, base_root, suite.judge.labels,
                                          base.path)
        except ConfigError:
            continue
    return found


def _changed(base_suite: SuiteConfig, base: Config, head_suite: SuiteConfig,
             head: Config) -> tuple[dict[str, JudgeSpec], dict[str, JudgeSpec]] | None:
    """Base's and head's judges when head changes them, else None.

    Raises:
        ConfigError: either side's judges cannot be resolved.
    """
    base_judges = suite_criteria(base_suite, base.settings, base.path)
    head_judges = suite_criteria(head_suite, head.settings, head.path)
    return None if identity(head_judges) == identity(base_judges) else (base_judges,
                                                                        head_judges)


async def apply_judge_rules(report: GateReport, head: Config, base: Config | None,
                            base_root: Path | None, evals: EvalContext | None,
                            caller: ModelCaller | None = None) -> GateReport:
    """Check base's ``judge:`` rules on every suite whose judge head changes (module doc).

    Args:
        report: the gate's verdict so far; head: head's config (under base's run settings);
        base, base_root: base's config and checkout (None: nothing to check).
        caller: head's run's call path, whose budget and totals the calibration shares;
            None: a new one per calibration (with base's limits).

    Returns:
        The report with the judge rules' outcomes, notes and measured agreements
        (``judge_agreement``), and its conclusion and headline changed when a rule fails or
        cannot be decided.
    """
    if base is None or base_root is None or report.config_error is not None:
        return report
    heads = {s.name: s for s in head.suites}
    outcomes: list[RuleOutcome] = []
    notes: list[str] = []
    measured: list[JudgeAgreement] = []
    for suite in base.suites:
        if suite.judge is None or suite.name not in heads:
            continue
        checked = await _check_suite(suite, suite.judge, base, heads[suite.name], head,
                                     base_root, evals, caller)
        outcomes += checked.outcomes
        notes += checked.notes
        measured += checked.agreements
    if not outcomes and not notes:
        return report
    return _concluded(replace(report, outcomes=(*report.outcomes, *outcomes),
                              notes=(*report.notes, *notes),
                              judge_agreement=(*report.judge_agreement, *measured)),
                      outcomes, base)


@dataclass(frozen=True)
class _Checked:
    """What checking one suite's judge adds to the report: outcomes, notes, agreements."""

    outcomes: list[RuleOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    agreements: list[JudgeAgreement] = field(default_factory=list)


async def _check_suite(base_suite: SuiteConfig, rules: JudgeRules, base: Config,
                       head_suite: SuiteConfig, head: Config, base_root: Path,
                       evals: EvalContext | None,
                       caller: ModelCaller | None) -> _Checked:
    try:
        base_judges = suite_criteria(base_suite, base.settings, base.path)
    except ConfigError as err:
        return _Checked([_undecided(base_suite.name,
                                    f"base's judges cannot be resolved: {err}")])
    try:
        head_judges = suite_criteria(head_suite, head.settings, head.path)
    except ConfigError as err:  # head dropped or broke its judge: base's still scores it
        return _Checked(notes=[f"suite {base_suite.name}: head's judge cannot be calibrated "
                               f"({err})"])
    if identity(head_judges) == identity(base_judges):
        return _Checked()
    try:
        calibration = await calibrate_suite(head_suite, head.settings, base_root, rules.labels,
                                            evals, path=head.path, caller=caller)
        reference, source, spend = await _reference(base_suite, base, base_root, rules, evals,
                                                    caller)
    except ConfigError as err:
        return _Checked([_undecided(base_suite.name,
                                    f"the labelled set cannot be used: {err}")])
    notes = [_change_note(calibration, base_judges, reference, source)
             + _spend(calibration.spend + spend)]
    notes += _disagreement_notes(calibration)
    return _Checked(list(check_rules(calibration, rules, reference)), notes,
                    _agreements(calibration, reference))


async def _reference(suite: SuiteConfig, base: Config, base_root: Path, rules: JudgeRules,
                     evals: EvalContext | None,
                     caller: ModelCaller | None) -> tuple[dict[str, float], str, RunUsage]:
    """Criterion -> agreement to compare with: base's snapshot, else base's judges now; where
    it came from; what measuring it spent."""
    snapshot = load_snapshot(base_root, rules.labels)
    if snapshot is not None:
        return {name: float(doc["agreement"]) for name, doc in snapshot.items()
                if isinstance(doc.get("agreement"), int | float)}, "the snapshot at base", \
            RunUsage()
    measured = await calibrate_suite(suite, base.settings, base_root, rules.labels, evals,
                                     path=base.path, caller=caller)
    return {c.name: c.agreement.value for c in measured.criteria if c.decided}, \
        "base's judge, measured now (no snapshot at base)", measured.spend


def _spend(spend: RunUsage) -> str:
    """The calibration's model calls, for the note (head's run's totals include them)."""
    unpriced = f", {spend.unpriced_calls} of unknown cost" if spend.unpriced_calls else ""
    return (f" (judge calibration: {spend.provider_calls} provider calls, {spend.cache_hits} "
            f"cache hits, ${spend.cost_usd:.4f}{unpriced})")


def _change_note(calibration: JudgeCalibration, base_judges: Mapping[str, JudgeSpec],
                 reference: dict[str, float], source: str) -> str:
    parts = []
    for c in calibration.criteria:
        before = reference.get(c.name)
        was = base_judges.get(c.name)
        model = f"{was.endpoint.model} -> {c.model}" if was is not None else c.model
        shown = f"{before:.0%} -> " if before is not None else ""
        parts.append(f"{c.name} ({model}): agreement {shown}{c.agreement.value:.0%}, "
                     f"kappa {c.kappa.value:.2f}, n {c.n}")
    return (f"suite {calibration.suite}: head changes the judge; on {calibration.labels} "
            f"(reference: {source}): " + "; ".join(parts))


def _agreements(calibration: JudgeCalibration,
                reference: Mapping[str, float]) -> list[JudgeAgreement]:
    """Each criterion's figures as the report keeps them (`JudgeAgreement`; NaN -> None)."""
    return [JudgeAgreement(suite=calibration.suite, criterion=c.name, model=c.model,
                           labels=calibration.labels, agreement=_finite(c.agreement.value),
                           reference=_finite(reference.get(c.name)),
                           kappa=_finite(c.kappa.value), n=c.n, judge_errors=c.judge_errors)
            for c in calibration.criteria]


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _disagreement_notes(calibration: JudgeCalibration) -> list[str]:
    notes = []
    for c in calibration.criteria:
        if not c.disagreements:
            continue
        shown = c.disagreements[:SHOWN_DISAGREEMENTS]
        items = "; ".join(f"{d.id}: human {_rating(d.human, c.graded)}, judge "
                          f"{_rating(d.judge, c.graded)}" + (f" ({d.reason})" if d.reason else "")
                          for d in shown)
        notes.append(f"judge disagreements, {calibration.suite} {c.name} ({len(shown)} of "
                     f"{len(c.disagreements)}): {items}")
    return notes


def _rating(value: int, graded: bool) -> str:
    return str(value) if graded else ("pass" if value else "fail")


def _undecided(suite: str, reason: str) -> RuleOutcome:
    return RuleOutcome(suite, metric_name("judge"), "judge rules", None, None, None,
                       "inconclusive", reason, effect="undecided")


def _concluded(report: GateReport, outcomes: list[RuleOutcome], base: Config) -> GateReport:
    failed = [o for o in outcomes if o.status == "fail"]
    if failed:
        first = failed[0]
        return replace(report, conclusion="failure",
                       headline=f"judge not trusted: {first.suite} {first.metric}, "
                                f"{first.rule}: {first.reason}")
    unknown = [o for o in outcomes if o.status == "inconclusive"]
    if unknown and report.conclusion in _PASSING:
        conclusion: Conclusion = "neutral" if base.settings.undecided == "neutral" \
            else "action_required"
        return replace(report, conclusion=conclusion,
                       headline=f"judge not trusted yet: {unknown[0].suite} "
                                f"{unknown[0].metric}: {unknown[0].reason}")
    return report
