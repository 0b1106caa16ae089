"""Make base and head comparable before the gate compares them, or say that they are not.

The verdict scores head's target on base's evaluation contract (worker/evals/verdict/contract.py),
so its suites are scored alike by construction (``same``; a stored base result without a fingerprint
is re-scored, to the same effect). Re-scoring matters for head's own contract, shown beside the
verdict when head changes it: there base's outputs are scored with head's assertions and judges, so
that head's own verdict compares like with like.

Each suite result carries a fingerprint (worker/evals/run/fingerprint.py) split into what produced
its outputs and what scored them. For every suite run at both base and head:

- **same**: the scoring components match. Base and head are compared as they are (whatever the
  pull request changed on the output side: prompt, model, dataset inputs).
- **rescored**: the scoring differs (an assertion, a judge model, a rubric, an expected value,
  a schema or python file), or base's result has no fingerprint. Base's outputs are scored
  again with head's assertions and judges, on head's expected values (examples only at base
  keep their own), exactly as head was scored (worker/evals/score/scoring.py); judge answers come
  from the response cache when they are there. The gate then compares head with that result.
- **not_comparable**: re-scoring was impossible (base kept no outputs, or head's assertions
  cannot run on them, e.g. a ``python`` entry point missing on the worker or an assertion
  file that cannot be read). The suite's relative rules (``max_drop``, ``regression`` ...)
  are skipped with the reason and no example is listed as a regression; absolute rules at head
  (``min``, ``max``, ``critical``) still apply. When such a skipped rule exists and nothing
  else fails, the run is undecided (``action_required``, or ``neutral`` when base says
  ``settings.undecided: neutral``: worker/evals/verdict/health.py): the gate could not tell, so it
  does not pass the pull request on its own (a failure elsewhere still fails it).

Re-scoring spends head's run's budget when the caller gives its state (issue 31: with a budget
of its own it could spend ``max_cost_usd`` once more), else one with the run's limits. Then base's
examples whose target gave no answer (a command target crashed, timed out or wrote no valid
output) are made unscored: base has no verdict for them (worker/evals/verdict/base_targets.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from worker.errors import ConfigError, ExecutionError
from worker.evals.config import load_schema_file, load_suite_dataset
from worker.evals.context import EvalContext
from worker.evals.run import RunState, changed, describe, difference, digest
from worker.evals.score import Item, apply_metrics, score_items, suite_metrics
from worker.evals.types import (
    Config,
    Example,
    ExampleResult,
    GateReport,
    RuleOutcome,
    RunResult,
    RunUsage,
    Settings,
    SuiteComparability,
    SuiteConfig,
    SuiteResult,
    TargetOutput,
)
from worker.evals.verdict.base_targets import unscore
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.thresholds import NO_BASE

#: Reason of a base result whose examples (and so outputs) were not kept.
NO_OUTPUTS = "the base result kept no outputs to re-score"


async def compare_comparable(config: Config, head_root: Path, head: RunResult,
                             base: RunResult | None, notes: Sequence[str] = (),
                             evals: EvalContext | None = None,
                             state: RunState | None = None) -> GateReport:
    """`worker.evals.verdict.comparison.compare`, with base made comparable to head first (module
    docstring).

    Args:
        config: the config to gate with (the suites, assertions and settings head ran, the
            rules of worker/evals/verdict/rules.py).
        head_root: head's checkout (python assertion files and schema files are read there,
            or at a suite's ``contract_root``).
        head, base: the runs; base None compares nothing (only absolute rules apply).
        notes: lines to carry into the report.
        evals: the response cache and clocks for judge calls, and the examples' earlier values
            (``history``) that weigh the sign-flip family; None for none.
        state: head's run state, whose budget and totals re-scoring spends (None: its own).

    Returns:
        The report, with ``comparability`` set per suite run on both sides and ``base`` the
        base run as re-scored, its examples without a target answer unscored.
    """
    history = evals.history if evals is not None else None
    if base is None:
        return compare(config, head, None, notes, history=history)
    verdicts, rescored = await reconcile(config, head_root, head, base, evals, state)
    rescored = unscore(rescored)  # after re-scoring, which scores a target error as failed
    blocked = {v.suite for v in verdicts if v.status == "not_comparable"}
    gated = replace(rescored, suites={name: suite for name, suite in rescored.suites.items()
                                      if name not in blocked})
    return apply(compare(config, head, gated, notes, history=history), verdicts, rescored)


async def reconcile(config: Config, head_root: Path, head: RunResult, base: RunResult,
                    evals: EvalContext | None = None, state: RunState | None = None,
                    ) -> tuple[list[SuiteComparability], RunResult]:
    """Decide each suite's comparability and re-score base where scoring differs, on
    ``state``'s budget (head's run's; None: a new one with the run's limits).

    Returns:
        One verdict per suite of ``config`` run at both sides, and ``base`` with the re-scored
        suites replaced (the others as they were).
    """
    verdicts: list[SuiteComparability] = []
    suites = dict(base.suites)
    for suite in config.suites:
        head_suite, base_suite = head.suites.get(suite.name), base.suites.get(suite.name)
        if head_suite is None or base_suite is None:
            continue
        scoring, outputs = _changes(head_suite, base_suite)
        if scoring == () and base_suite.fingerprint is not None \
                and head_suite.fingerprint is not None:
            verdicts.append(SuiteComparability(suite.name, "same", (), outputs))
            continue
        state = state or RunState(config.settings, evals)
        before = state.caller.total
        result = await rescore(suite, config.settings, head_root, head_suite, base_suite, state)
        spend = difference(state.caller.total, before)
        if isinstance(result, str):
            verdicts.append(SuiteComparability(suite.name, "not_comparable", scoring, outputs,
                                               _blocked_reason(scoring, result), spend))
            continue
        suites[suite.name] = result
        verdicts.append(SuiteComparability(suite.name, "rescored", scoring, outputs,
                                           _rescored_reason(scoring), spend))
    return verdicts, replace(base, suites=suites)


async def rescore(suite: SuiteConfig, settings: Settings, head_root: Path, head: SuiteResult,
                  base: SuiteResult, state: RunState) -> SuiteResult | str:
    """Score ``base``'s outputs with ``suite``'s (head's) assertions and judges.

    Each base example takes head's ``expected``, ``vars`` and own assertions when head has its
    id (examples only at base keep their ``expected`` and no own assertions). Errored and
    unscored target answers stay so. Metrics are recomputed (custom metrics too, by head's
    ``metrics:``); ``judge_trap_accuracy``, trap
    results and judge versions are head's (the same judge on the same traps).

    Returns:
        The re-scored result, or why re-scoring was impossible (a sentence).
    """
    if not base.examples:
        return NO_OUTPUTS + (f" ({base.stopped})" if base.stopped else "")
    root = suite.contract_root or head_root  # where the scoring's files are
    try:
        at_head = {e.id: e for e in load_suite_dataset(root, suite)}
        specs = tuple(load_schema_file(spec, root) for spec in suite.assertions)
        items = [Item(_example(r, at_head.get(r.id), root), _output(r), r.repeat,
                      settings.repeats == 1) for r in base.examples]
        results = await score_items(specs, items, root, settings, state.caller,
                                    suite.dataset)
        results, custom = await apply_metrics(suite.metrics, results, root, settings)
    except (ConfigError, ExecutionError, OSError) as err:
        return f"head's assertions cannot score base's outputs: {err}"
    metrics = suite_metrics(results) | custom
    if "judge_trap_accuracy" in head.metrics:
        metrics["judge_trap_accuracy"] = head.metrics["judge_trap_accuracy"]
    fingerprint = base.fingerprint
    if fingerprint is not None and head.fingerprint is not None:
        scoring = dict(head.fingerprint.scoring)
        fingerprint = replace(fingerprint, scoring=scoring,
                              digest=digest([fingerprint.outputs, scoring]))
    return replace(base, examples=tuple(results), metrics=metrics, traps=head.traps,
                   judge_versions=head.judge_versions, fingerprint=fingerprint)


def apply(report: GateReport, verdicts: Sequence[SuiteComparability],
          base: RunResult) -> GateReport:
    """Put the verdicts into a compared report (see the module docstring for the conclusion).

    Relative rules of a not-comparable suite, skipped because its base was held back, get
    the reason instead of "no base result". ``base`` becomes the report's base run.
    """
    blocked = {v.suite: v for v in verdicts if v.status == "not_comparable"}
    outcomes = tuple(_mark(o, blocked) for o in report.outcomes)
    skipped = [o.suite for o, old in zip(outcomes, report.outcomes, strict=True) if o is not old]
    conclusion, headline = report.conclusion, report.headline
    if skipped and conclusion in ("success", "neutral"):
        names = ", ".join(dict.fromkeys(skipped))
        conclusion = "action_required"  # undecided (health.py)
        headline = headline or f"{names} not comparable with base: relative rules not applied"
    return replace(report, conclusion=conclusion, headline=headline, outcomes=outcomes,
                   base=base, comparability=tuple(verdicts))


def _mark(outcome: RuleOutcome, blocked: dict[str, SuiteComparability]) -> RuleOutcome:
    verdict = blocked.get(outcome.suite)
    if verdict is None or outcome.status != "skipped" or outcome.reason != NO_BASE:
        return outcome
    return replace(outcome, reason=f"not comparable with base: {verdict.reason}")


def _changes(head: SuiteResult, base: SuiteResult) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if head.fingerprint is None or base.fingerprint is None:
        return (), ()
    return (changed(base.fingerprint.scoring, head.fingerprint.scoring),
            changed(base.fingerprint.outputs, head.fingerprint.outputs))


def _rescored_reason(scoring: tuple[str, ...]) -> str:
    why = (f"the scoring changed ({describe(scoring)})" if scoring
           else "base's result does not say how it was scored")
    return f"{why}: base's outputs were re-scored with head's assertions and judges"


def _blocked_reason(scoring: tuple[str, ...], cause: str) -> str:
    why = (f"the scoring changed ({describe(scoring)})" if scoring
           else "base's result does not say how it was scored")
    return f"{why} and {cause}"


def _example(result: ExampleResult, head: Example | None, root: Path) -> Example:
    if head is None:
        return Example(result.id, result.line, result.input, result.expected, {}, (),
                       result.tags, result.metadata, result.id_from_line)
    own = tuple(load_schema_file(spec, root) for spec in head.assertions)
    return Example(result.id, result.line, result.input, head.expected, head.vars, own,
                   result.tags, result.metadata, result.id_from_line,
                   relevant_ids=head.relevant_ids)


def _output(result: ExampleResult) -> TargetOutput:
    """Return the target answer an example result holds (its spend stays with base's run)."""
    return TargetOutput(result.output, result.error, result.latency_ms, dict(result.usage),
                        result.cost_usd, result.error_kind, RunUsage(), result.cached,
                        result.contexts, result.retrieved_ids, result.error_field,
                        trace=result.trace)
