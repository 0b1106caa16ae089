"""``settings.statistics.confirm_flips`` in a gate: run the discordant examples once more.

Read from base only. After head's run, the most telling discordant examples (pass/fail differs
between base and head; worker/evals/verdict/confirm.py chooses them from |head - base| and the
examples' weights alone, so base and head stay exchangeable and the false-alarm rate holds)
are answered once more at base (base's target, at base's checkout) and at head (head's target
on base's contract), as the next repeat and without the response cache. Each example's value is
then the mean of its draws: a one-off flip counts half, a real break still counts whole.
Deterministic answers (the same text again) leave the mean, the tests and the intervals exactly
as they were: repeats are never counted as examples.

At most ``confirm_flips`` of one head run's calls are spent (`confirm_budget`: each example
costs one call at base and one at head), split over the suites by size. The re-runs are calls
of each side's run: under base's ``max_cost_usd`` less what that side already spent, and added
to its spend (the report's cost line); the report says how many examples were re-run and what
it cost. The suite metrics (means for ``min``/``max_drop``) stay those of the first draw: only
the paired rules see the extra draw.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from worker.evals.context import EvalContext
from worker.evals.run import run_configs
from worker.evals.types import Config, RunResult, Settings, SuiteResult
from worker.evals.verdict import (
    FamilySuite,
    choose_confirmations,
    confirm_budget,
    example_history,
    has_example_values,
    history_weights,
    mean_over_repeats,
    pair_suite,
)
from worker.pipeline.on_paths import restrict


@dataclass(frozen=True)
class Confirmed:
    """Both runs with the extra draws, and the report's note ("" when nothing was re-run)."""

    head: RunResult
    base: RunResult
    note: str


def choose(rules: Config, head: RunResult, base: RunResult,
           history: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]]
           ) -> dict[str, frozenset[str]]:
    """Return suite -> ids of the discordant examples to re-run (module docstring)."""
    fraction = rules.settings.statistics.confirm_flips
    calls = sum(len(s.examples) for s in head.suites.values())
    budget = confirm_budget(fraction, calls)
    chosen: dict[str, frozenset[str]] = {}
    for suite in rules.suites:
        base_suite, head_suite = base.suites.get(suite.name), head.suites.get(suite.name)
        metrics = [m for m in suite.gate if has_example_values(m)]
        if base_suite is None or head_suite is None or not metrics or not calls:
            continue
        paired = pair_suite(base_suite, head_suite, metrics, suite.gate_options.group_by)
        share = budget * len(head_suite.examples) // calls
        member = FamilySuite(suite.name, paired, suite.gate, suite.gate_options.group_min_items,
                             history.get(suite.name))
        weights = history_weights(example_history(member)) if member.history else \
            np.ones((len(paired.ids), len(metrics)))
        rows = choose_confirmations(mean_over_repeats(paired.base),
                                    mean_over_repeats(paired.head), weights, share,
                                    seed=zlib.crc32(suite.name.encode("utf-8")))
        if rows:
            chosen[suite.name] = frozenset(paired.ids[r] for r in rows)
    return chosen


async def confirm_flips(rules: Config, head_config: Config, base_config: Config,
                        roots: tuple[Path, Path], runs: tuple[RunResult, RunResult],
                        evals: EvalContext | None) -> Confirmed:
    """Re-run the chosen discordant examples at head and base and merge the draws.

    Args:
        rules: the config gated with (base's ``settings.statistics`` among its settings).
        head_config: what head ran (head's target on base's contract); base_config: base's.
        roots: (head's checkout, base's checkout); runs: (head's run, base's run).
        evals: the response cache's context (the re-runs never read the cache), history.

    Returns:
        The runs with one more draw of each chosen example, and the note.

    Raises:
        ConfigError: a file the re-run needs is missing or invalid.
    """
    head, base = runs
    chosen = choose(rules, head, base, evals.history if evals is not None else {})
    if not chosen:
        return Confirmed(head, base, "")
    names = list(chosen)
    count = sum(len(ids) for ids in chosen.values())
    if evals is not None:
        evals.observers.say(f"confirm_flips: {count} discordant examples once more at base "
                            f"and at head (about {2 * count} target calls, no cache)")
    head_extra = (await run_configs([_limited(restrict(head_config, names), head)], roots[0],
                                    head.sha, evals, only=chosen))[0]
    base_extra = (await run_configs([_limited(restrict(base_config, names), base)], roots[1],
                                    base.sha, evals, only=chosen))[0]
    extra = head_extra.spend + base_extra.spend
    calls = sum(len(s.examples) for s in head.suites.values())
    note = (f"confirm_flips {rules.settings.statistics.confirm_flips:g}: {count} discordant "
            f"examples run once more at base and at head: {extra.provider_calls} extra "
            f"provider calls ({extra.provider_calls / max(calls, 1):.2f}x one head run), "
            f"${extra.cost_usd:.4f}")
    dropped = _unusable(head_extra) + _unusable(base_extra)
    if dropped:
        note += (f"; {dropped} re-runs gave no usable answer (budget, time or provider "
                 "errors) and count for nothing")
    return Confirmed(_merged(head, head_extra), _merged(base, base_extra), note)


def _unusable(extra: RunResult) -> int:
    return sum(r.unscored or r.error_kind == "budget" for s in extra.suites.values()
               for r in s.examples)


def _limited(config: Config, spent: RunResult) -> Config:
    """The config with base's ``max_cost_usd`` less what its side already spent."""
    settings: Settings = config.settings
    if settings.max_cost_usd is None:
        return config
    left = max(settings.max_cost_usd - spent.spend.cost_usd, 0.0)
    return replace(config, settings=replace(settings, max_cost_usd=left))


def _merged(run: RunResult, extra: RunResult) -> RunResult:
    """``run`` with the extra draws added to its suites' examples and to its spend.

    A re-run without a usable answer (not sent for the budget or time limit, or unscored for
    a provider error) is left out: the extra draws are optional, so they never make a run
    over budget or undecided.
    """
    suites = dict(run.suites)
    for name, more in extra.suites.items():
        first: SuiteResult = suites[name]
        usable = [r for r in more.examples if not r.unscored and r.error_kind != "budget"]
        examples = tuple(sorted((*first.examples, *usable), key=lambda r: (r.line, r.repeat)))
        suites[name] = replace(first, examples=examples, spend=first.spend + more.spend)
    return replace(run, suites=suites, spend=run.spend + extra.spend)
