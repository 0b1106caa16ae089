"""Decide what run errors, budgets and undecidable runs do to a gate verdict (pure).

The rule: a conclusion that lets a pull request merge (``success``, ``neutral``) is given only
when the gate decided that head is good enough, by rules and settings read from the base
(worker/evals/verdict/rules.py, worker/evals/config/base_settings.py). Every model-call error is put
down to its cause (worker/evals/verdict/causes.py), and after the rules are checked
(worker/evals/verdict/comparison.py), in this order:

1. **Caused by the head** (its config, prompt, target or endpoint breaks): ``failure``, with the
   cause named (the provider's status and message, the variable's name, the refused
   ``api_base``, connection refused) in the headline and in `GateReport.errors`, each with the
   ``.llmgate.yml`` line that set it (annotated). One such example is enough, transient or
   not (a 503 from a server only head calls is head's: were it tolerated up to a share, a
   pull request could hide that many failing examples behind it). Those examples are listed
   (`GateReport.errored`, and as regressions when they passed at base), never dropped.
2. **Over budget / over time**: a run (head or base) that stopped at, or was estimated above,
   base's ``max_cost_usd`` or ``max_duration``: ``action_required``, named so, never
   ``neutral`` (whatever ``settings.undecided`` says).
3. **Undecided** (the reason is outside the pull request): more than base's
   ``max_provider_error_rate`` of a side's examples got no answer for an outside cause
   (provider outage or rate limiting on an endpoint both sides use, the worker's own key
   missing for both, base's own calls failing, base's own target failing: a command target
   that crashed, exited non-zero, timed out or wrote no valid output at base,
   worker/evals/verdict/base_targets.py); the rules left the run undecided (an
   inconclusive rule with no ``on_inconclusive``, a suite not comparable with base); or base
   could not be evaluated (its config or a file it names is invalid) while nothing failed.
   The conclusion is ``action_required`` (Re-run, or a writer presses Let through:
   worker/gate/accept.py) unless base's config says ``settings.undecided: neutral`` (head's says
   nothing, even when base's config is broken; with no config at base at all, head's
   applies, as its rules do); the title says which. When only head's calls failed on an
   endpoint that answered base's run in this run (`Attribution.head_only`), head's change may
   be the cause (a prompt that makes every call time out): ``action_required`` whatever
   ``settings.undecided`` says, and the headline says so. The same when base's examples
   without an answer include target errors: a process the pull request's target left behind
   can make base's fail (it did: docs/security-model.md), so this is never ``neutral`` either;
   and, under the allowance, when an example base's target gave no answer for fails at head
   and the rules did not fail the run: the gate cannot tell whether head regressed it.
   The same when more than ``max_judge_error_rate`` of a side's examples lost their judge call
   to a rate limit, a timeout or a 5xx, at base as at head (or with no base run): the judge's
   provider kept the gate from deciding (issue 29: such a run read "fail").
4. Otherwise the rules decide; then, when the share of examples with a judge error (an errored
   assertion) exceeds ``max_judge_error_rate``, a ``success`` becomes ``failure``: fail closed.
5. **A failure found is never undone by missing answers** (issue 32): when the rules failed on
   the answered examples and rule 2 or 3 would block the run as undecided while some example
   results have no answer (unscored: a provider or judge error, a call not sent), each failing
   rule is checked again on the best case of the examples without an answer
   (worker/evals/verdict/decided.py: head's pass, base's fail). A rule that fails there too
   fails whatever they give: the run is ``failure`` (whatever ``settings.undecided`` says, so a
   writer may Accept the regression but never Let it through as undecided), its headline names
   the rule, what had no answer and the regressions found. The others are made
   ``inconclusive`` (effect ``undecided``); when none is decided the run stays undecided and
   its headline names the rules that cannot be decided and why, which the report's Why says
   (worker/report/decision.py), never "decided by" a failing rule beside a Let through.

Base's examples whose target gave no answer are unscored (never base failures that make head
look better) and, whatever the conclusion, counted in a note with the first one's error.
Unscored examples (provider or judge errors not caused by the head) are never listed as
regressions; at head, those whose base result was scored were made failures before the rules
were checked (worker/evals/verdict/unanswered.py), so the allowances of rules 3 and 4 cannot hide
the examples a pull request regresses. Judge errors are always counted in the notes with the first
one's message, a judge rubric changed between base and head is noted, and the first call error of
each kind per suite and side is in `GateReport.errors` with its text, whatever the conclusion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from worker.evals.types import (
    Conclusion,
    Config,
    ExampleResult,
    GateReport,
    Regression,
    RuleOutcome,
    RunError,
    RunResult,
    RunUsage,
    SuiteResult,
)
from worker.evals.verdict.base_targets import TARGET_KINDS, hidden, hidden_headline, no_answer
from worker.evals.verdict.base_targets import note as no_answer_note
from worker.evals.verdict.causes import Attribution
from worker.evals.verdict.decided import Settled, settle
from worker.evals.verdict.outcomes import MAX_IDS
from worker.evals.verdict.reason_text import UNDECIDED_RULE
from worker.evals.verdict.signflip import History

PROVIDER_KINDS = ("rate_limited", "provider", "timeout")
#: Longest errored-assertion message quoted in a note, characters.
MAX_QUOTED_CHARS = 300
#: What the headline of an undecided run ends with, by ``settings.undecided`` (it starts
#: with ``undecided:``, so the check title says which).
UNDECIDED_SUFFIX = {"action_required": " (re-run, or a writer can let it through)",
                    "neutral": " (neutral, as base's settings.undecided says)"}

_Runs = dict[str, RunResult | None]
#: How `_outside_share`'s headline of head's errors starts, and of base's.
_HEAD_SIDE = ("rate limited: ", "provider errors: ")
_BASE_SIDE = "base could not run: "


@dataclass(frozen=True)
class _Found:
    """The call errors of a run, by side and cause."""

    errors: tuple[RunError, ...]
    head_blamed: tuple[tuple[str, ExampleResult], ...]  # (suite, example), cause head
    outside: dict[str, int]  # side -> examples without an answer for an outside cause
    totals: dict[str, int]  # side -> examples
    head_only: bool = False  # head's outside errors hit an endpoint that answered base
    base_targets: int = 0  # base's examples whose own target gave no answer (outside)
    hidden: tuple[str, ...] = ()  # suite/id base gave no answer for that fail at head


def finish_report(report: GateReport, config: Config, base_config: Config | None = None,
                  base_problem: str | None = None, *, rules: Config | None = None,
                  history: Mapping[str, History] | None = None) -> GateReport:
    """Apply the rules of the module docstring to a compared report.

    Args:
        report: what `worker.evals.verdict.comparison.compare` (via comparability) returned.
        config: the config head ran, under base's settings (thresholds, ``undecided``).
        base_config: base's config, or None (none at base, invalid, or no base given).
        base_problem: why base could not be evaluated (its config or a file it names is
            invalid), or None.
        rules: the config ``report`` was compared under (the verdict's rules; None: ``config``),
            with which rule 5 checks the best case of the examples without an answer.
        history: the examples' earlier values the sign-flip family was weighed with (rule 5).

    Returns:
        The report with its conclusion, headline, notes, errors and errored examples.
    """
    if report.config_error is not None or report.head is None:
        return report
    runs: _Runs = {"head": report.head, "base": report.base}
    found = replace(_find(Attribution(config, base_config, report.base, report.head),
                          report.head, report.base),
                    hidden=tuple(hidden(report.head, report.base, base_config)))
    errored = _errored(report, list(found.head_blamed))
    regressions = (*(r for r in report.regressions
                     if not _unscored(report.head, r.suite, r.example_id)),
                   *_regressed(report.base, errored))
    conclusion, headline, undecided = _decide(report, runs, found, config, base_problem)
    outcomes = report.outcomes
    settled = settle(report, rules or config, history) \
        if report.conclusion == "failure" and conclusion != "failure" else None  # rule 5
    if settled is not None and any(settled.unanswered.values()) and \
            (settled.decided or settled.undecided):
        outcomes = _marked(outcomes, settled)
        if settled.decided:
            conclusion, undecided = "failure", False
            headline = _decided_headline(settled, regressions, headline)
        else:
            headline = _with_clause(headline, _cannot_decide(settled))
    if undecided:
        # A base whose config is broken says nothing: head's `undecided` must not pass itself.
        policy = config.settings.undecided if base_config is not None or base_problem is None \
            else "action_required"
        conclusion = "neutral" if policy == "neutral" else "action_required"
        headline = f"undecided: {headline}{UNDECIDED_SUFFIX[policy]}"
    unanswered = no_answer_note(report.base, config.settings.max_provider_error_rate)
    notes = [*report.notes, *([unanswered] if unanswered else []), *_judge_notes(runs),
             *_rubric_notes(report.head, report.base)]
    return replace(report, conclusion=conclusion, regressions=regressions,
                   notes=tuple(notes), headline=headline, errors=found.errors,
                   errored=errored, outcomes=outcomes)


def _with_clause(headline: str, clause: str) -> str:
    """``headline`` with ``; clause`` put before the Let through suffix it may end with."""
    suffix = UNDECIDED_SUFFIX["action_required"]
    if headline.endswith(suffix):
        return f"{headline.removesuffix(suffix)}; {clause}{suffix}"
    return f"{headline}; {clause}"


def _rule_names(outcomes: tuple[RuleOutcome, ...]) -> str:
    names = list(dict.fromkeys(
        f"{o.suite} {o.metric}{f' [{o.group}]' if o.group else ''} {o.rule}" for o in outcomes))
    shown = ", ".join(names[:MAX_IDS])
    return shown + (f" and {len(names) - MAX_IDS} more" if len(names) > MAX_IDS else "")


def _cannot_decide(settled: Settled) -> str:
    """Rule 5's clause of an undecided run whose rules failed on the answered examples only."""
    count = len(dict.fromkeys((o.suite, o.metric, o.rule, o.group) for o in settled.undecided))
    verb = "it fails" if count == 1 else "they fail"
    return (f"{_rule_names(settled.undecided)} cannot be decided: {verb} on the answered "
            f"examples, but {settled.unanswered_text()} and those could make "
            f"{'it' if count == 1 else 'them'} pass")


def _decided_headline(settled: Settled, regressions: tuple[Regression, ...],
                      undecided: str) -> str:
    """Rule 5's headline of a failure the examples without an answer cannot undo."""
    ids = [f"{r.suite}/{r.example_id}" for r in regressions]
    found = (f"; {len(ids)} regression{'s' if len(ids) != 1 else ''} among the answered "
             f"examples: {', '.join(ids[:MAX_IDS])}"
             + (f" and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")) if ids else ""
    undecided = undecided.removeprefix("undecided: ")
    return (f"{_rule_names(settled.decided)} "
            f"{'fails' if len(settled.decided) == 1 else 'fail'} whatever the examples "
            f"without an answer give ({settled.unanswered_text()}: {undecided}){found}")


def _marked(outcomes: tuple[RuleOutcome, ...], settled: Settled) -> tuple[RuleOutcome, ...]:
    """The outcomes with the decided failures' reasons and the undecided ones made
    ``inconclusive`` with effect ``undecided`` (rule 5)."""
    decided = {(o.suite, o.metric, o.rule, o.group): o for o in settled.decided}
    undecided = {(o.suite, o.metric, o.rule, o.group) for o in settled.undecided}
    marked = []
    for o in outcomes:
        key = (o.suite, o.metric, o.rule, o.group)
        if key in decided:
            marked.append(decided[key])
        elif key in undecided:
            marked.append(replace(o, status="inconclusive", effect="undecided",
                                  reason=f"{o.reason}; {UNDECIDED_RULE}"))
        else:
            marked.append(o)
    return tuple(marked)


def _decide(report: GateReport, runs: _Runs, found: _Found, config: Config,
            base_problem: str | None) -> tuple[Conclusion, str, bool]:
    """Rules 1-4 of the module docstring: the conclusion, the headline and whether the run
    is undecided (its conclusion then follows ``settings.undecided``)."""
    head_fault = _head_fault(found)
    if head_fault is not None:
        return "failure", head_fault, False
    stopped = [(side, run, run.stopped) for side, run in runs.items()
               if run is not None and run.stopped]
    if stopped:
        side, run, why = stopped[0]
        return "action_required", f"{_limit_name(why)}: {why} at {side} ({_progress(run)})", \
            False
    outside = _outside_share(found, config.settings.max_provider_error_rate)
    if outside is not None and outside.startswith(_HEAD_SIDE) and found.head_only:
        return "action_required", (
            f"undecided: {outside}; only head's calls failed: the same endpoint answered "
            "base's calls in this run, so head's change (its prompt or parameters) may be "
            "the cause, and this is never neutral (re-run, or a writer can let it through)"), \
            False
    base_targets = _base_targets(report, found, outside)
    if base_targets is not None:
        return "action_required", base_targets, False
    if outside is not None:
        return "action_required", outside, True
    if base_problem is not None and report.conclusion in ("success", "neutral"):
        return "action_required", f"base could not be evaluated ({base_problem})", True
    outage = _judge_outage(runs, config.settings.max_judge_error_rate)
    if outage is not None:
        return "action_required", outage, True
    if report.conclusion == "action_required":  # the rules could not decide
        return "action_required", report.headline or _inconclusive_headline(report), True
    conclusion, headline = _judge_verdict(runs, config, report.conclusion, report.headline)
    return conclusion, headline, False


def _base_targets(report: GateReport, found: _Found, outside: str | None) -> str | None:
    """Rule 3 for base's target errors, never ``neutral``: the headline when the run is
    undecided by errors outside the pull request and base has target errors, or when examples
    base gave no answer for fail at head while the rules would pass
    (worker/evals/verdict/base_targets.py); else None."""
    if outside is not None and found.base_targets:
        return (f"undecided: {outside}; base's target errors can be brought about by a "
                "process of the pull request's, so this is never neutral (re-run, or a writer "
                "can let it through)")
    if outside is None and found.hidden and report.conclusion != "failure":
        return hidden_headline(list(found.hidden))
    return None


#: How `worker.evals.llm.provider.describe` begins the message of a call that failed for a
#: cause outside the pull request (the provider's quota or an outage), as a judge error
#: quotes it.
OUTAGE_MARKS = ("rate limited (HTTP", "timed out", "provider error (HTTP 5")


def _judge_outage_errors(suite: SuiteResult) -> int:
    return sum(any(a.errored and any(m in a.message for m in OUTAGE_MARKS)
                   for a in e.assertions) for e in suite.examples)


def _judge_outage(runs: _Runs, allowed: float) -> str | None:
    """Rule 3 for judges: more than ``allowed`` (``max_judge_error_rate``) of a side's
    examples lost their judge to a rate limit, a timeout or a 5xx, at base as well as at head
    (or with no base run): the provider, not the pull request, kept the gate from deciding."""
    share, count, side = _worst_share(runs, _judge_outage_errors)
    base = runs.get("base")
    if share <= allowed or not count:
        return None
    if side == "head" and base is not None and not any(
            _judge_outage_errors(s) for s in base.suites.values()):
        return None  # only head's judge calls failed: rule 4 (fail closed) decides
    first = next(a.message for run in runs.values() if run is not None
                 for s in run.suites.values() for e in s.examples for a in e.assertions
                 if a.errored and any(m in a.message for m in OUTAGE_MARKS))
    return (f"the judge got no answer: {count} judge errors at {side} ({share:.0%} of "
            f"examples, allowed {allowed:.0%}; the first: {first})")


def _find(attribution: Attribution, head: RunResult, base: RunResult | None) -> _Found:
    blamed, outside = [], {"head": 0, "base": 0}
    head_only, targets = False, 0
    for side, suite, example, cause in attribution.each(head, base):
        if cause == "head":
            blamed.append((suite, example))
        elif cause == "outside":
            outside[side] += 1
            head_only = head_only or (side == "head" and attribution.head_only(suite))
            targets += side == "base" and no_answer(example)
    totals = {side: sum(len(s.examples) for s in run.suites.values()) if run else 0
              for side, run in (("head", head), ("base", base))}
    return _Found(attribution.errors(head, base), tuple(blamed), outside, totals, head_only,
                  targets)


def _head_fault(found: _Found) -> str | None:
    """The headline of a run failed by the head (rule 1), or None."""
    heads = sorted((e for e in found.errors if e.side == "head" and e.cause == "head"),
                   key=lambda e: not e.permanent)  # an error no retry fixes names it first
    if not heads:
        return None
    first, total = heads[0], found.totals["head"]
    count = sum(e.count for e in heads)
    where = f" ({first.field} at {first.path}:{first.line})" if first.line is not None else ""
    return (f"caused by the head: {first.suite}'s target gets no answer: {first.message}"
            f"{where}; {count} of {total} examples at head got no answer")


def _outside_share(found: _Found, threshold: float) -> str | None:
    """The headline of a run undecided by errors outside the pull request (rule 3), or None."""
    for side in ("head", "base"):
        total, count = found.totals[side], found.outside[side]
        if not total or count / total <= threshold:
            continue
        errors = [e for e in found.errors if e.side == side and e.cause == "outside"]
        limited = sum(e.count for e in errors if e.kind == "rate_limited")
        what = "rate limited" if limited * 2 >= count else "provider errors"
        if side == "base" and found.base_targets * 2 >= count:
            what = ("target errors (base's target crashed, exited non-zero, timed out or "
                    "wrote no valid output)")
            errors = [e for e in errors if e.kind in TARGET_KINDS]
        first = errors[0]
        base = _BASE_SIDE if side == "base" else ""
        return (f"{base}{what}: {count} of {total} examples got no answer at {side} "
                f"(the first, {first.suite}/{first.example_id}: {first.message})")
    return None


def _limit_name(stopped: str) -> str:
    return "over time" if stopped.startswith("time limit") else "over budget"


def _inconclusive_headline(report: GateReport) -> str:
    found = next((o for o in report.outcomes if o.effect == "undecided"), None)
    if found is None:
        return "the rules could not decide"
    return f"{found.suite} {found.metric} {found.rule} is inconclusive"


def _judge_verdict(runs: _Runs, config: Config, conclusion: Conclusion,
                   headline: str) -> tuple[Conclusion, str]:
    share, count, side = _worst_share(runs, _judge_errors)
    allowed = config.settings.max_judge_error_rate
    if share > allowed and conclusion == "success":
        return "failure", (f"{count} judge errors at {side} ({share:.0%} of examples, "
                           f"allowed {allowed:.0%})")
    return conclusion, headline


def _errored(report: GateReport,
             blamed: list[tuple[str, ExampleResult]]) -> tuple[Regression, ...]:
    """Head's examples without an answer (caused by the head), once each (first repeat)."""
    found: dict[tuple[str, str], Regression] = {}
    for suite, example in blamed:
        result = report.head.suites.get(suite) if report.head is not None else None
        found.setdefault((suite, example.id), Regression(
            suite, result.dataset if result is not None else "", example.line, example.id,
            example.expected, None, None,
            f"no answer at head (caused by the head): {example.error}"))
    return tuple(found.values())


def _regressed(base: RunResult | None, errored: tuple[Regression, ...]) -> list[Regression]:
    """The errored examples that passed at base (most scored repeats), as regressions."""
    if base is None:
        return []
    found = []
    for item in errored:
        suite = base.suites.get(item.suite)
        results = [e for e in suite.examples if e.id == item.example_id and not e.unscored] \
            if suite is not None else []
        if results and sum(e.passed for e in results) * 2 > len(results):
            output = next(e.output for e in results if e.passed)
            found.append(replace(item, base_output=output))
    return found


def _unscored(run: RunResult, suite: str, example_id: str) -> bool:
    result = run.suites.get(suite)
    return result is not None and any(
        e.unscored for e in result.examples if e.id == example_id)


def _judge_errors(suite: SuiteResult) -> int:
    return sum(any(a.errored for a in e.assertions) for e in suite.examples)


def _worst_share(runs: _Runs, count: Callable[[SuiteResult], int]) -> tuple[float, int, str]:
    """Return (share, count, side) of the side with the largest share of ``count``."""
    worst = (0.0, 0, "head")
    for side, run in runs.items():
        if run is None:
            continue
        total = sum(len(s.examples) for s in run.suites.values())
        found = sum(count(s) for s in run.suites.values())
        if total and found / total > worst[0]:
            worst = (found / total, found, side)
    return worst


def _progress(run: RunResult) -> str:
    examples = [e for s in run.suites.values() for e in s.examples]
    if not examples:
        return "no example ran"
    done = sum(e.error_kind != "budget" for e in examples)
    return f"{done} of {len(examples)} examples ran, {spent_text(run.spend)}"


def spent_text(spend: RunUsage) -> str:
    """Say what a run spent, unknown-cost charges included: never ``$0.0000`` for a run that
    spent something (issue 31: answers without a price or usage are charged to the budget at
    their worst case but are not in ``cost_usd``, so a run stopped over budget said it spent
    $0.0000).

    Returns:
        e.g. ``$0.0123 spent``, ``$0.000040 spent``, ``$0.0123 spent and 3 calls of unknown
        cost`` or ``5 calls of unknown cost spent (charged to the budget at their worst
        case)``.
    """
    cost, unknown = spend.cost_usd, spend.unpriced_calls
    calls = f"{unknown} call{'s' if unknown != 1 else ''} of unknown cost"
    if unknown and cost <= 0:
        return f"{calls} spent (charged to the budget at their worst case)"
    money = f"${cost:.4f}" if cost >= 0.0001 or cost <= 0 else f"${cost:.6f}"
    return f"{money} spent" + (f" and {calls}" if unknown else "")


def _judge_notes(runs: _Runs) -> list[str]:
    """One note a side with errored assertions: how many, and the first one's message (so a
    reason that every example shares, e.g. a local embedding model the worker refused, is
    visible without opening each example)."""
    notes = []
    for side, run in runs.items():
        if run is None:
            continue
        count = sum(_judge_errors(s) for s in run.suites.values())
        if not count:
            continue
        first = next((f"{name}/{e.id}: {a.type}: {a.message}"
                      for name, suite in run.suites.items() for e in suite.examples
                      for a in e.assertions if a.errored), "")
        if len(first) > MAX_QUOTED_CHARS:
            first = first[:MAX_QUOTED_CHARS - 1] + "…"
        notes.append(f"{count} judge error{'s' if count != 1 else ''} at {side} (a judge or "
                     "embedding call failed, or a judge reply had no verdict): those examples "
                     f"are unscored; the first: {first}")
    return notes


def _rubric_notes(head: RunResult, base: RunResult | None) -> list[str]:
    if base is None:
        return []
    return [f"{name}: the judge prompt changed between base and head "
            f"({', '.join(base.suites[name].judge_versions)} -> "
            f"{', '.join(suite.judge_versions)}): judge scores are not comparable"
            for name, suite in head.suites.items()
            if name in base.suites and base.suites[name].judge_versions
            and suite.judge_versions != base.suites[name].judge_versions]
