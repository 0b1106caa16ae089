"""Tell a failure the unanswered examples could still undo from one they cannot (pure).

A run whose examples were partly not answered (a provider's 429 storm or outage above base's
``max_provider_error_rate``, judge calls lost, a budget or time limit that stopped it) is
undecided (worker/evals/verdict/health.py): the rules were checked on the answered examples
alone, and what the others would give is unknown. ``settings.undecided: neutral`` may relax
what is undecided, never what was decided (issue 32): a rule that fails **whatever the
unanswered examples give** fails the run.

**Decided** means: no outcome of the unanswered example results could make the rule pass.
Every rule checked here is monotone in each example's value, so one outcome is the most
favourable to head of all of them, the **best case**: each unanswered result at head passes
with every assertion passed at score 1.0 (no target error), and each unanswered result at base
fails with every assertion failed at score 0.0 (a target error). If the rule still fails in the
best case it fails in every case. Per rule kind:

- a threshold on a mean (``min``, ``max_drop`` on ``pass_rate``, ``mean_score``,
  ``assertion.<type>.pass_rate`` / ``mean_score``; ``max`` / ``max_increase`` on ``error_rate``):
  head's mean can only rise, and base's only fall, as the unanswered values move toward their
  bounds (1 and 0, or 0 and 1 for ``error_rate``); the best-case means bound every outcome's.
  E.g. 20 of 40 examples unanswered at head, 6 of the 20 answered failing where base (all
  answered) passes every one: head's best ``pass_rate`` is 34/40 = 0.85, a drop of 0.15 from
  1.00; a ``max_drop 0.1`` fails whatever the 20 give.
- a paired test (``regression``: McNemar, sign-flip or Wilcoxon; ``non_inferiority_margin``:
  the bootstrap interval of head - base): the best case adds every unanswered pair as one in
  which head is as far above base as the metric allows. For a fixed set of pairs, raising one
  difference head - base never lowers the one-sided p-value of a drop: McNemar's counts move
  from broken to tied to fixed; in the sign-flip test the observed (weighted) sum rises at
  least as much as any sign draw's sum does (studentizing changes nothing: a paired t is a
  monotone function of the sum over the root of the sum of squares, which no flip changes);
  Wilcoxon's W+ (the count of positive Walsh averages) cannot fall. Nor does it move a
  bootstrap resample's mean down. All pairs answered, every outcome has the best case's pairs,
  resamples and sign draws (seeded), so the best case's p-value and interval bound those of
  every outcome. (For a lower-is-better metric read "rise" for drop.) With several tests in
  one sign-flip family, the best case's step-down adjusted p-values are taken as computed:
  every test's own statistic is then at its least extreme.
- a count of examples (``max_new_failures``, ``critical``, ``max_example_drop``): an example
  that passes at base and fails at head among the answered ones stays so whatever the others
  give; the best case adds no broken example, so its count is the count of the answered ones.

A rule on any other metric (latency, cost, tokens, custom, agent, RAG or consistency metrics,
``win_rate``, percentiles) has no bound known to the gate for an unanswered value: its failure
is never decided here, and the run stays undecided. Quarantined examples, groups and repeats are
kept as they are (each unanswered repeat is set alone). The best case is checked with the very
rules, family and history of the verdict (`worker.evals.verdict.comparison.compare`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from worker.evals.score import suite_metrics
from worker.evals.types import (
    AssertionResult,
    Config,
    ExampleResult,
    GateReport,
    RuleOutcome,
    RunResult,
    SuiteResult,
)
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.reason_text import DECIDED_RULE
from worker.evals.verdict.signflip import History

#: Metrics whose unanswered values the best case bounds (module docstring).
DECIDABLE = ("pass_rate", "mean_score", "error_rate", "critical examples")
_ASSERTION = re.compile(r"assertion\..+\.(pass_rate|mean_score)\Z")
#: The message of an assertion the best case sets.
BEST_CASE = "best case of an unanswered example"


@dataclass(frozen=True)
class Settled:
    """Which failing rules of a partly answered run are decided.

    Attributes:
        decided: the outcomes (as checked on the answered examples) that fail in the best case
            too, each with the best case's reason appended.
        undecided: the failing outcomes the unanswered examples could still make pass.
        unanswered: side (``head``, ``base``) -> example results without an answer.
        totals: side -> example results.
    """

    decided: tuple[RuleOutcome, ...]
    undecided: tuple[RuleOutcome, ...]
    unanswered: Mapping[str, int]
    totals: Mapping[str, int]

    def unanswered_text(self) -> str:
        """Say how many results had no answer, e.g. ``20 of 40 example results at head and
        4 of 40 at base had no answer``."""
        sides = [side for side in ("head", "base") if self.unanswered.get(side)]
        parts = [f"{self.unanswered[side]} of {self.totals[side]}" for side in sides]
        if not parts:
            return "every example result was answered"
        parts[0] += " example results"
        return " and ".join(f"{part} at {side}" for part, side in zip(parts, sides,
                                                                       strict=True)) + \
            " had no answer"


def failing(outcome: RuleOutcome) -> bool:
    """Whether an outcome fails the run (a failed threshold, a regression, or an inconclusive
    rule set to fail)."""
    return outcome.status in ("fail", "regression") or outcome.effect == "failure"


def decidable(metric: str) -> bool:
    """Whether the best case bounds ``metric``'s unanswered values (module docstring)."""
    return metric in DECIDABLE or _ASSERTION.match(metric) is not None


def settle(report: GateReport, rules: Config,
           history: Mapping[str, History] | None = None) -> Settled:
    """Check ``report``'s failing rules again on the best case of its unanswered examples.

    Args:
        report: a compared report (its ``head`` and ``base`` as compared: base re-scored, its
            examples without a target answer unscored; ``comparability`` set).
        rules: the config the report was compared under (the rules of the verdict).
        history: the examples' earlier values the verdict's sign-flip family was weighed with.

    Returns:
        The failing outcomes split into decided and undecided, with the counts of example
        results without an answer. Without a head run, nothing is decided.
    """
    failed = [o for o in report.outcomes if failing(o)]
    if report.head is None:
        return Settled((), tuple(failed), {}, {})
    head, head_count = _best(report.head, best=True)
    base, base_count = _best(report.base, best=False) if report.base is not None else (None, 0)
    totals = {"head": _total(report.head), "base": _total(report.base)}
    if base is not None:
        blocked = {v.suite for v in report.comparability if v.status == "not_comparable"}
        base = replace(base, suites={n: s for n, s in base.suites.items() if n not in blocked})
    found = {_key(o): o for o in compare(rules, head, base, history=history).outcomes
             if failing(o)}
    decided = tuple(_with_best(o, found[_key(o)]) for o in failed
                    if decidable(o.metric) and _key(o) in found)
    undecided = tuple(o for o in failed if not (decidable(o.metric) and _key(o) in found))
    return Settled(decided, undecided, {"head": head_count, "base": base_count}, totals)


def _key(o: RuleOutcome) -> tuple[str, str, str, str]:
    return o.suite, o.metric, o.rule, o.group


def _with_best(outcome: RuleOutcome, best: RuleOutcome) -> RuleOutcome:
    why = f" ({best.reason})" if best.reason and best.reason != outcome.reason else ""
    return replace(outcome, reason=f"{outcome.reason}; {DECIDED_RULE}: in their best case "
                                   f"too{why}")


def _total(run: RunResult | None) -> int:
    return sum(len(s.examples) for s in run.suites.values()) if run is not None else 0


def _best(run: RunResult, *, best: bool) -> tuple[RunResult, int]:
    """``run`` with each unscored example result set to its best (head) or worst (base)."""
    suites: dict[str, SuiteResult] = {}
    count = 0
    for name, suite in run.suites.items():
        types = _types(suite.examples)
        examples = tuple(_set(e, types, best) if e.unscored else e for e in suite.examples)
        changed = sum(e.unscored for e in suite.examples)
        count += changed
        suites[name] = replace(suite, examples=examples,
                               metrics={**suite.metrics, **suite_metrics(examples)}) \
            if changed else suite
    return replace(run, suites=suites), count


def _types(examples: Sequence[ExampleResult]) -> tuple[str, ...]:
    """The assertion types the suite's examples carry, in order of first use."""
    return tuple(dict.fromkeys(a.type for e in examples for a in e.assertions))


def _set(example: ExampleResult, types: tuple[str, ...], best: bool) -> ExampleResult:
    own = tuple(dict.fromkeys(a.type for a in example.assertions)) or types
    score = 1.0 if best else 0.0
    assertions = tuple(AssertionResult(t, best, score, BEST_CASE) for t in own)
    return replace(example, unscored=False, passed=best, errored=not best,
                   error=None if best else BEST_CASE, error_kind=None,
                   assertions=assertions)
