"""The judge calls of re-scoring base's answers, counted in head's estimate (issue 31).

Where head changes a suite's evaluation contract, base's answers are scored once more with
head's assertions and judges, so head's own verdict compares like with like
(worker/evals/verdict/comparable.py). Those calls spend head's run's budget (base's
``max_cost_usd`` and ``max_duration``), so head's estimate counts them: a run whose estimate
with them exceeds the budget does not start. Base's answers are not known when head's run is
estimated (its sides may run at once, worker/pipeline/sides.py), so each is counted as an answer
of ``settings.estimate_output_tokens`` words and as not cached: each judge of such a suite
(``llm_judge`` and ``composite`` criteria, `worker.evals.run.judge_calibration.suite_criteria`)
once per base example and draw. A suite whose contract change leaves its scoring alike (an input
only) is counted too, so the estimate may be high, never low; an embeddings call of
``similar`` is not counted (``max_cost_usd`` still stops its spending).
"""

from __future__ import annotations

from pathlib import Path

from worker.errors import ConfigError
from worker.evals.config import load_suite_dataset
from worker.evals.run import Judging, ModelUse, suite_criteria
from worker.evals.types import Config


def planned_rescoring(own: Config | None, base: Config | None,
                      base_root: Path | None) -> list[Judging]:
    """Return the judge calls re-scoring base's answers with head's own contract will make.

    Args:
        own: head's own contract where it differs from base's (the gate's plan), or None.
        base: base's config; base_root: base's checkout (its datasets are read there).

    Returns:
        One `Judging` per judge, base example and draw of each suite of ``own`` that base runs
        too; none for a suite without a judge, or whose files cannot be read (the re-scoring
        reports it).
    """
    if own is None or base is None or base_root is None:
        return []
    bases = {suite.name: suite for suite in base.suites}
    answer = "x " * own.settings.estimate_output_tokens  # unknown yet: its expected length
    found: list[Judging] = []
    for suite in own.suites:
        at_base = bases.get(suite.name)
        if at_base is None:
            continue
        try:
            judges = suite_criteria(suite, own.settings, own.path)
            examples = load_suite_dataset(base_root, at_base)
        except ConfigError:
            continue
        for name, judge in judges.items():
            use = ModelUse(judge.endpoint.model, own.path, suite.line,
                           f"the judge {name!r} (re-scoring base's answers)")
            found += [Judging(judge, example, answer, use) for example in examples
                      for _ in range(own.settings.repeats)]
    return found
