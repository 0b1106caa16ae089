"""Base's target errors: the examples base's own target gave no answer for (pure).

A target that could not answer (error kind ``target``: a command target that crashed, exited
non-zero, timed out, or wrote a missing, oversized or invalid output file; an agent that gave
no answer within ``max_steps``) is scored as a failure at **head**: the pull request's target
failed. At **base** the same error measures nothing of base's code, which is merged and trusted:
the run could not evaluate it, whatever the cause (a flaky dependency, a loaded worker, or a
process the pull request's target left behind that sabotaged base's: docs/security-model.md).
Counted as base failures, those examples would make head look better than base exactly where
base could not answer (base 0.000 against head 0.750, and the regression passed).

So such an example has **no verdict at base**, like base's provider errors
(worker/evals/verdict/causes.py puts both ``outside`` the pull request): `unscore` marks it
unscored, so it drops out of base's rates and means and out of the pairing (head gets no credit
for passing it, and head's failure there is not a regression: nothing to compare with), and it
is left out of base's ``error_rate`` (worker/evals/score/metrics.py). What it does to the check
is worker/evals/verdict/health.py's rule 3: above base's ``max_provider_error_rate`` of base's
examples (counted with its provider errors) the run is undecided, and never ``neutral``
because a pull request's process can bring such errors about; at or below it `note` says how
many and quotes the first. A base run with such examples is never stored as a baseline, and a
stored one with them is never reused (worker/baselines/reuse.py).

**The allowance cannot hide examples** (as at head: worker/evals/verdict/unanswered.py). A pull
request that can make base's target fail can make it fail on exactly the examples it
regresses, few enough to stay under the allowance; left out of the pairing, those regressions
would go unseen. So when the rules would let the pull request through and an example base gave
no answer for (no scored repeat at base) fails at head (most of its scored repeats), the run is
undecided, never ``neutral``, naming them (`hidden`): the gate cannot tell whether head
regressed them. A re-run clears a flaky base; an example base's target always crashes on is
fixed in base, or listed in base's ``quarantine:``.
"""

from __future__ import annotations

from dataclasses import replace

from worker.evals.score import suite_metrics
from worker.evals.types import Config, ExampleResult, RunResult, SuiteResult

#: Error kinds of a target that gave no answer of its own (`worker.evals.llm_types.ErrorKind`).
TARGET_KINDS: tuple[str, ...] = ("target",)
#: Longest error text quoted in a note or headline, characters.
MAX_QUOTED_CHARS = 300


def no_answer(example: ExampleResult) -> bool:
    """Return whether ``example``'s target gave no answer (error kind in `TARGET_KINDS`)."""
    return example.errored and example.error_kind in TARGET_KINDS


def unscore(base: RunResult) -> RunResult:
    """Return ``base`` with its examples without a target answer unscored (module docstring).

    Such an example keeps its error, error kind and ``errored``; it becomes unscored, not
    passed, without per-example custom metric values. The suite metrics of `suite_metrics` are
    recomputed where an example changed (a metric it no longer gives, e.g. ``pass_rate`` with
    no scored example left, is dropped); the others (custom whole-suite metrics, ``win_rate``)
    are kept. Idempotent; a run without such examples is returned as it is.
    """
    suites: dict[str, SuiteResult] = {}
    changed = False
    for name, suite in base.suites.items():
        examples = tuple(replace(e, unscored=True, passed=False, custom={})
                         if no_answer(e) and not e.unscored else e for e in suite.examples)
        if all(a is b for a, b in zip(examples, suite.examples, strict=True)):
            suites[name] = suite
            continue
        changed = True
        stale = suite_metrics(suite.examples)
        kept = {k: v for k, v in suite.metrics.items() if k not in stale}
        suites[name] = replace(suite, examples=examples, metrics={**kept,
                                                                  **suite_metrics(examples)})
    return replace(base, suites=suites) if changed else base


def count(run: RunResult | None) -> tuple[int, int, str]:
    """Return (examples without a target answer, examples, the first as ``suite/id: error``)
    of ``run`` (repeats count each; (0, 0, "") for None)."""
    if run is None:
        return 0, 0, ""
    found = [(name, e) for name, suite in run.suites.items() for e in suite.examples
             if no_answer(e)]
    total = sum(len(s.examples) for s in run.suites.values())
    first = f"{found[0][0]}/{found[0][1].id}: {found[0][1].error or ''}" if found else ""
    return len(found), total, _clip(first)


def note(base: RunResult | None, allowed: float) -> str | None:
    """Return the report's note on base's examples without a target answer, or None.

    Args:
        base: the base run the verdict compared (or None).
        allowed: base's ``max_provider_error_rate`` (fraction 0-1).
    """
    found, total, first = count(base)
    if not found:
        return None
    plural = "s" if found != 1 else ""
    return (f"{found} of {total} example result{plural} at base got no answer from base's "
            f"target (it crashed, exited non-zero, timed out or wrote no valid output; the "
            f"first, {first}): base has no verdict for them, so they are left out of the "
            f"comparison, not counted as base failures; above {allowed:.0%} of base's examples "
            "(max_provider_error_rate, with base's provider errors) the run is undecided")


def hidden(head: RunResult, base: RunResult | None, base_config: Config | None) -> list[str]:
    """Return ``suite/id`` of each example base's target gave no answer for (no repeat of it
    scored at base) that fails at head (more than half of its scored repeats do not pass), in
    head's order; ids in base's ``quarantine:`` are left out.

    Args:
        head, base: the compared runs (None base: none).
        base_config: base's config (its quarantine), or None.
    """
    if base is None:
        return []
    quarantine = {s.name: set(s.gate_options.quarantine)
                  for s in (base_config.suites if base_config is not None else ())}
    found: list[str] = []
    for name, suite in head.suites.items():
        at_base = base.suites.get(name)
        if at_base is None:
            continue
        unanswered = {e.id for e in at_base.examples if no_answer(e)} - {
            e.id for e in at_base.examples if not e.unscored and not no_answer(e)}
        for example_id in dict.fromkeys(e.id for e in suite.examples):
            if example_id in unanswered and example_id not in quarantine.get(name, set()) \
                    and _fails(suite, example_id):
                found.append(f"{name}/{example_id}")
    return found


def hidden_headline(ids: list[str]) -> str:
    """Return the headline of a run undecided by `hidden` examples (ten named at most)."""
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    one = len(ids) == 1
    return (f"undecided: base's target gave no answer for {len(ids)} "
            f"{'example that fails' if one else 'examples that fail'} at head ({shown}): the "
            f"gate cannot tell whether head regressed {'it' if one else 'them'}, and a process "
            "of the pull request's can make base's target fail, so this is never neutral "
            "(re-run, or a writer can let it through)")


def _fails(suite: SuiteResult, example_id: str) -> bool:
    scored = [e.passed for e in suite.examples if e.id == example_id and not e.unscored]
    return sum(scored) * 2 <= len(scored) if scored else False


def _clip(text: str) -> str:
    return text if len(text) <= MAX_QUOTED_CHARS else text[:MAX_QUOTED_CHARS - 1] + "…"
