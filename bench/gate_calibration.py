"""Simulate many gates: false-alarm rate under no change, power against a true 5-point drop.

Each simulated suite has n examples in 5 equal groups and 10 metrics: 5 pass/fail (example i
passes metric j with its own probability p_ij ~ Beta(0.4, 0.1), mean 0.8: most examples nearly
always pass or fail, some are flaky, about 5% flip each way between two runs) and 5 scores
(clip(mu_ij + N(0, 0.1), 0, 1), mu_ij ~ Beta(4, 2)).
Base and head are independent draws of the same examples. Under "no change" head is drawn like
base; under "5-point drop" the pass probabilities of the first metric are scaled by 0.9375 so
its expected pass rate falls by 0.05 (all groups alike).

Every metric carries ``regression: {alpha: 0.05}`` with ``groups: {by: category}``: 60 one-sided
tests (10 metrics x (suite + 5 groups)) in one Holm family, run through the gate's own code
(`worker.evals.gate.paired_verdicts`: the same pairing arrays, tests, Holm and verdicts as
``compare``; 200 bootstrap resamples, which the regression verdicts do not use). The naive rule
fails the gate when any metric's mean drops by more than 0.02 (0.02 absolute on the 0-1 scale).

Prints, per n: the gate's false-alarm rate and power with a 95% Wilson interval, the naive
rule's on the same runs, and for reference the power of a gate holding only the one test that
matters (the first metric, whole suite, alpha 0.05: no multiplicity to pay for). The last
line is ``gate_false_alarm_rate=<max over n>``.

Usage: ``python bench/gate_calibration.py [--sims 200] [--seed 1]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from worker.evals.comparisons import StatSettings
from worker.evals.gate import paired_verdicts
from worker.evals.paired import PairedSuite
from worker.evals.types import CommandTarget, GateOptions, GateRule, SuiteConfig

ALPHA = 0.05
NAIVE_DROP = 0.02
TRUE_DROP = 0.05
GROUPS = 5
BINARY, SCORES = 5, 5
METRICS = tuple(f"assertion.b{j}.pass_rate" for j in range(BINARY)) + tuple(
    f"assertion.s{j}.mean_score" for j in range(SCORES))
SIZES = (100, 200, 500)
SETTINGS = StatSettings(resamples=200)


def suite_config() -> SuiteConfig:
    """One suite: ``regression: {alpha: 0.05}`` on every metric, grouped by category."""
    rules = {m: GateRule(m, regression_alpha=ALPHA) for m in METRICS}
    return SuiteConfig("sim", "sim.jsonl", CommandTarget("x"), (), rules,
                       gate_options=GateOptions(group_by="category", group_min_items=5))


def draw(rng: np.random.Generator, n: int, drop: float) -> tuple[np.ndarray, np.ndarray]:
    """Return base and head values, shape (n, 10): 5 pass/fail then 5 scores."""
    p = rng.beta(0.4, 0.1, size=(n, BINARY))
    mu = rng.beta(4.0, 2.0, size=(n, SCORES))
    head_p = p.copy()
    head_p[:, 0] *= 1 - drop / 0.8

    def one(pass_p: np.ndarray) -> np.ndarray:
        binary = (rng.random((n, BINARY)) < pass_p).astype(float)
        scores = np.clip(mu + rng.normal(0, 0.1, (n, SCORES)), 0, 1)
        return np.hstack([binary, scores])

    return one(p), one(head_p)


def simulate(rng: np.random.Generator, n: int, drop: float, sims: int) -> tuple[int, int, int]:
    """Return how often (gate, naive rule, one-test gate) failed over ``sims`` simulated PRs."""
    config, single = suite_config(), SuiteConfig(
        "one", "sim.jsonl", CommandTarget("x"), (),
        {METRICS[0]: GateRule(METRICS[0], regression_alpha=ALPHA)})
    ids = tuple(f"e{i}" for i in range(n))
    groups = tuple(f"category=g{i % GROUPS}" for i in range(n))
    gate_fails = naive_fails = single_fails = 0
    for _ in range(sims):
        base, head = draw(rng, n, drop)
        paired = PairedSuite(ids, METRICS, base[:, :, None], head[:, :, None], groups, (), ())
        gate_fails += paired_verdicts([(config, paired)], SETTINGS)[0] == "failure"
        naive_fails += bool(np.any(base.mean(axis=0) - head.mean(axis=0) > NAIVE_DROP))
        alone = PairedSuite(ids, METRICS[:1], base[:, :1, None], head[:, :1, None],
                            ("",) * n, (), ())
        single_fails += paired_verdicts([(single, alone)], SETTINGS)[0] == "failure"
    return gate_fails, naive_fails, single_fails


def wilson(hits: int, total: int) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (Wilson 1927, JASA 22:209-212)."""
    z = 1.959963984540054
    p = hits / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def rate(hits: int, total: int) -> str:
    """Format a rate with its 95% interval."""
    low, high = wilson(hits, total)
    return f"{hits / total:.3f} [{low:.3f}, {high:.3f}]"


def main() -> None:
    """Run the simulations and print the table, then the headline figure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sims", type=int, default=200, help="simulated PRs per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"{len(METRICS)} metrics x ({GROUPS} groups + suite), regression alpha {ALPHA}, "
          f"Holm; naive rule: any mean drop > {NAIVE_DROP}; {args.sims} PRs per cell")
    print("n    | gate false alarm     | naive false alarm    | gate power (5-pt drop) "
          "| naive power          | one-test power")
    worst = 0.0
    for n in SIZES:
        null_gate, null_naive, _ = simulate(rng, n, 0.0, args.sims)
        drop_gate, drop_naive, drop_single = simulate(rng, n, TRUE_DROP, args.sims)
        worst = max(worst, null_gate / args.sims)
        print(f"{n:<4} | {rate(null_gate, args.sims)} | {rate(null_naive, args.sims)} | "
              f"{rate(drop_gate, args.sims)}   | {rate(drop_naive, args.sims)} | "
              f"{rate(drop_single, args.sims)}")
    print(f"elapsed_s={time.perf_counter() - start:.1f}")
    print(f"gate_false_alarm_rate={worst:.3f}")


if __name__ == "__main__":
    main()
