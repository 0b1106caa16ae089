"""Per-example weights from earlier runs of unchanged code: flaky examples count for less (pure).

Earlier runs of the same examples with nothing changed (the A/A runs of ``llmgate calibrate``,
worker/pipeline/calibrate.py) show how noisy each example is. An example that passed in every
earlier run and fails at head is strong evidence; one that passed in 3 of 5 is not. Each example
gets the inverse of its estimated null variance of head - base as its weight (inverse-variance
weighting: Cochran 1954, Biometrics 10:101-129):

- pass/fail metrics: the pass probability p_i is estimated by empirical Bayes, a beta prior
  fitted to all examples' pass counts by moments (Kleinman 1973, JASA 68:46-54) and the
  posterior mean p~_i = (s_i + a) / (H_i + a + b); the variance of head - base under no change
  is 2 p~ (1 - p~). With a U-shaped prior (most examples nearly always pass or fail) an
  example that passed every time gets a small variance, without the 0 an unsmoothed estimate
  would give.
- scores: the per-example variance shrunk towards the pooled one with `PRIOR_RUNS` runs'
  weight (Smyth 2004, Stat. Appl. Genet. Mol. Biol. 3:3, moderated variances), times 2.

Weights are scaled to mean 1 per metric and bounded to [1 / `MAX_RATIO`, `MAX_RATIO`] around
it. They depend only on the earlier runs, never on this pull request's draws, so the sign-flip
tests of worker/evals/verdict/multiplicity.py keep their exact false-alarm rate whatever the
weights: a wrong weight costs power, not false alarms. An example without history gets the prior's
weight (the mean example's); no history at all gives weight 1 everywhere.
"""

from __future__ import annotations

import numpy as np

from worker.evals.verdict.stats import FloatArray

#: Weight a pooled variance gets, in runs, when shrinking an example's own variance.
PRIOR_RUNS = 4.0
#: Largest ratio of a weight to the mean weight (and of the mean to the smallest).
MAX_RATIO = 50.0
#: Bounds of the prior's spread 1 / (a + b + 1) (intra-class correlation of the runs).
_RHO = (1e-3, 0.999)


def history_weights(history: FloatArray) -> FloatArray:
    """Return the weight of each example and metric from earlier runs of unchanged code.

    Args:
        history: values of shape (n, m, H): example, metric, earlier run; NaN where an
            example was not scored in a run. A metric whose values are all 0 or 1 is treated
            as pass/fail, any other as a score. H may be 0 (no history).

    Returns:
        Shape (n, m), positive, mean 1 per metric (see the module docstring).

    Raises:
        ValueError: ``history`` is not 3-dimensional.
    """
    if history.ndim != 3:
        raise ValueError(f"history must have shape (n, m, runs), got {history.shape}")
    n, m, _ = history.shape
    weights = np.ones((n, m))
    for j in range(m):
        values = history[:, j, :]
        if np.sum(~np.isnan(values)) < 2:
            continue
        known = values[~np.isnan(values)]
        binary = bool(np.all((known == 0) | (known == 1)))
        variance = _binary_variance(values) if binary else _score_variance(values)
        weights[:, j] = _scaled(1.0 / variance)
    return weights


def _binary_variance(values: FloatArray) -> FloatArray:
    """Empirical-Bayes null variance 2 p~ (1 - p~) of head - base per example (module docs)."""
    runs = np.sum(~np.isnan(values), axis=1).astype(np.float64)
    passes = np.nansum(values, axis=1)
    seen = runs > 0
    share = passes[seen] / runs[seen]
    mean = float(np.clip(np.mean(share), 1e-3, 1 - 1e-3))
    size = float(np.mean(runs[seen]))
    spread = float(np.var(share)) * size / (mean * (1 - mean))
    rho = float(np.clip((spread - 1) / max(size - 1, 1e-9), *_RHO)) if size > 1 else _RHO[1]
    total = 1 / rho - 1  # a + b
    posterior = (passes + mean * total) / (runs + total)
    posterior = np.clip(posterior, 1e-6, 1 - 1e-6)
    return np.asarray(2 * posterior * (1 - posterior), dtype=np.float64)


def _score_variance(values: FloatArray) -> FloatArray:
    """Moderated per-example variance of one run, times 2 (module docs)."""
    runs = np.sum(~np.isnan(values), axis=1).astype(np.float64)
    usable = runs >= 2
    own = np.zeros(values.shape[0])
    if np.any(usable):
        own[usable] = np.nanvar(values[usable], axis=1, ddof=1)
    dof = np.maximum(runs - 1, 0)
    pooled = float(np.sum(own * dof) / np.sum(dof)) if np.sum(dof) else 0.0
    if pooled <= 0:
        return np.ones(values.shape[0])
    return np.asarray(2 * (dof * own + PRIOR_RUNS * pooled) / (dof + PRIOR_RUNS), dtype=np.float64)


def _scaled(raw: FloatArray) -> FloatArray:
    """Scale to mean 1, then bound to [1 / MAX_RATIO, MAX_RATIO]."""
    scaled = raw / float(np.mean(raw))
    return np.clip(scaled, 1 / MAX_RATIO, MAX_RATIO)
