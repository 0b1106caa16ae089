"""Confirm flips: choose the discordant examples to run once more at base and at head (pure).

One draw of an LLM is noisy: an example that passed at base and failed at head may do the
opposite on the next draw. ``settings.statistics.confirm_flips: f`` spends at most f of one
head run's calls on running the most telling discordant examples (pass/fail differs between
base and head on some pass/fail metric) once more on *both* sides; each side's value is then
the mean of its draws. A real break fails again at head and passes again at base (its
difference stays -1); a one-off flip mostly does not (its difference shrinks to -1/2 or 0).

Which examples are re-run depends only on |head - base|, the example weights (earlier runs)
and a seeded random order: flipping the sign of an example (swapping its base and head)
changes none of them, and its extra draws are taken alike on both sides. So base and head of
every example stay exchangeable under no change and the sign-flip family of
worker/evals/verdict/multiplicity.py keeps its exact false-alarm rate (selection invariant under the
group of sign changes: Lehmann & Romano 2005, *Testing Statistical Hypotheses*, section 15.2).

Repeats never count as examples: the tests and intervals treat an example's mean as one value,
so three identical answers give that answer once, not a zero-width interval.
"""

from __future__ import annotations

import math

import numpy as np

from worker.evals.verdict.stats import FloatArray


def confirm_budget(fraction: float, head_calls: int) -> int:
    """Return how many examples may be re-run on both sides with ``fraction`` of ``head_calls``.

    Each re-run example costs one run at base and one at head: floor(fraction * calls / 2).
    Raises ValueError unless 0 <= fraction <= 1 and head_calls >= 0.
    """
    if not 0 <= fraction <= 1 or head_calls < 0:
        raise ValueError(f"need 0 <= fraction <= 1 and head_calls >= 0, got {fraction}, "
                         f"{head_calls}")
    return math.floor(fraction * head_calls / 2 + 1e-9)


def choose_confirmations(base: FloatArray, head: FloatArray, weights: FloatArray, budget: int,
                         seed: int = 0) -> list[int]:
    """Return the rows of the discordant examples to re-run, most telling first.

    Args:
        base, head: each example's value per metric, shape (n, m) (mean over its draws; NaN
            where not scored). Only pass/fail columns (all values 0 or 1) count.
        weights: example weights, shape (n, m) (worker/evals/verdict/flakiness.py; ones without
            history).
        budget: most examples to choose (`confirm_budget`).
        seed: seed of the random order that breaks ties.

    Returns:
        Row indices, at most ``budget``, in decreasing weight x |difference| (ties: seeded
        random order); only rows with a pass/fail flip.

    Raises:
        ValueError: shapes disagree or budget < 0.
    """
    if base.shape != head.shape or weights.shape != base.shape or budget < 0:
        raise ValueError(f"shapes disagree ({base.shape}, {head.shape}, {weights.shape}) or "
                         f"budget {budget} < 0")
    change = np.abs(head - base)
    binary = [j for j in range(base.shape[1]) if _binary(base[:, j]) and _binary(head[:, j])]
    if not binary or budget == 0:
        return []
    score = np.nanmax(np.where(np.isnan(change[:, binary]), 0.0,
                               change[:, binary] * weights[:, binary]), axis=1)
    ties = np.random.default_rng(seed).random(score.size)
    order = np.lexsort((ties, -score))
    return [int(i) for i in order[:budget] if score[i] > 0]


def _binary(values: FloatArray) -> bool:
    known = values[~np.isnan(values)]
    return bool(known.size) and bool(np.all((known == 0) | (known == 1)))
