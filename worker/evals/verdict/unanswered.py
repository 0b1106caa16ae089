"""Count head's examples that got no verdict, where base has one, as failed (pure).

Base's settings tolerate a share of examples without an answer (``max_provider_error_rate``:
429, 5xx and timeouts on an endpoint base uses too) or without a judge's verdict
(``max_judge_error_rate``) before a run is undecided or fails (worker/evals/verdict/health.py). Left
unscored, such an example is neither a pass nor a failure: it drops out of the means and the
paired tests. A pull request can bring that about for the very examples it regresses: a
prompt or a ``max_tokens`` that makes those calls run past base's ``timeout``, or outputs that
make the judge reply without a verdict (or the judge call fail). Under the allowance they
would be hidden.

So at head, an example unscored for such a cause whose base result (any repeat) was scored
counts as **failed**: the worst case, so that the verdict holds whatever the answer would
have been. Its error (or its judge's message) says so; when a provider was at fault, a
re-run scores it. Left as they are: examples base did not score either (nothing to compare
with; base's target giving no answer is no verdict either: worker/evals/verdict/base_targets.py),
those not sent because base's budget or time ran out (the run is stopped and blocked:
health.py rule 2), and those whose call error is the head's (they fail the run already:
health.py rule 1).
"""

from __future__ import annotations

from dataclasses import replace

from worker.evals.score import suite_metrics
from worker.evals.types import AssertionResult, ExampleResult, RunResult, SuiteResult
from worker.evals.verdict.base_targets import no_answer
from worker.evals.verdict.causes import Attribution

#: Appended to the error or judge message of an example counted as failed.
COUNTED = "counted as failed: base has a verdict for this example, so head's missing one " \
          "could hide a regression (a re-run scores it if the provider was at fault)"


def count_as_failed(head: RunResult, base: RunResult | None, attribution: Attribution,
                    max_provider_error_rate: float) -> tuple[RunResult, int]:
    """Return ``head`` with its examples unscored where base scored them made failures.

    Args:
        head: the head run the verdict compares.
        base: base's run, or None (nothing changes without a base).
        attribution: the causes of the run's call errors (worker/evals/verdict/causes.py).
        max_provider_error_rate: base's allowance (fraction 0-1). Above it at either side
            the run is undecided whatever the rules say (an outage: health.py rule 3), so
            its examples without an answer are left unscored, not listed as regressions.

    Returns:
        The run (suites' metrics recomputed where an example changed; the others kept, e.g.
        ``win_rate``, ``judge_trap_accuracy``) and how many example results changed.
    """
    if base is None:
        return head, 0
    calls = _within(attribution, head, base, max_provider_error_rate)
    suites, count = {}, 0
    for name, suite in head.suites.items():
        found = base.suites.get(name)
        scored = {e.id for e in found.examples if not e.unscored and not no_answer(e)} \
            if found is not None else set()
        examples = tuple(_failed(e) if e.id in scored and _hidden(attribution, name, e, calls)
                         else e for e in suite.examples)
        changed = sum(a is not b for a, b in zip(examples, suite.examples, strict=True))
        suites[name] = _with(suite, examples) if changed else suite
        count += changed
    return replace(head, suites=suites), count


def note(count: int) -> str:
    """The report's note on ``count`` examples counted as failed ("" for none)."""
    if not count:
        return ""
    plural = "s" if count != 1 else ""
    return (f"{count} example result{plural} of head got no answer or no judge verdict where "
            f"base has one: {COUNTED}")


def _within(attribution: Attribution, head: RunResult, base: RunResult,
            threshold: float) -> bool:
    """Whether both sides' examples without an answer for an outside cause are within the
    allowance (`worker.evals.verdict.health` rule 3 does not make the run undecided)."""
    outside = {"head": 0, "base": 0}
    for side, _, _, cause in attribution.each(head, base):
        outside[side] += cause == "outside"
    totals = {side: sum(len(s.examples) for s in run.suites.values())
              for side, run in (("head", head), ("base", base))}
    return all(not totals[side] or outside[side] / totals[side] <= threshold
               for side in outside)


def _hidden(attribution: Attribution, suite: str, example: ExampleResult,
            calls: bool) -> bool:
    """Whether ``example`` is unscored for a cause the allowances tolerate (a call error
    only when ``calls``: within the provider allowance)."""
    if not example.unscored:
        return False
    if example.errored:
        return calls and attribution.cause("head", suite, example) == "outside"
    return any(a.errored for a in example.assertions)  # a judge error


def _failed(example: ExampleResult) -> ExampleResult:
    if example.errored:
        return replace(example, unscored=False, passed=False,
                       error=f"{example.error} ({COUNTED})")
    return replace(example, unscored=False, passed=False,
                   assertions=tuple(_counted(a) for a in example.assertions))


def _counted(result: AssertionResult) -> AssertionResult:
    return replace(result, message=f"{result.message} ({COUNTED})") if result.errored \
        else result


def _with(suite: SuiteResult, examples: tuple[ExampleResult, ...]) -> SuiteResult:
    return replace(suite, examples=examples,
                   metrics={**suite.metrics, **suite_metrics(examples)})
