"""Simulate many gates: false alarms under no change, power against concentrated/diffuse drops.

Each simulated suite has n examples in 5 equal groups and 10 metrics: 5 pass/fail (example i
passes metric j with its own probability p_ij ~ Beta(0.4, 0.1), mean 0.8: most examples nearly
always pass or fail, some are flaky, about 5% flip each way between two runs) and 5 scores
(clip(mu_ij + N(0, 0.1), 0, 1), mu_ij ~ Beta(4, 2)). Base and head are independent draws of
the same examples, and so are 5 earlier runs of the unchanged code (what ``llmgate calibrate``
records; no pull request pays for them). Under "no change" head is drawn like base. The drops
hit the first metric only (all groups alike):

- concentrated: 0.05 n examples that pass at base (6.25% of the passing ones, a 5-point drop)
  fail at head in every draw; the rest unchanged;
- diffuse: every example's pass probability is scaled by 0.9375, so the mean falls 5 points.

Every metric carries ``regression: {alpha: 0.05}`` with ``groups: {by: category}``: 60
one-sided tests (10 metrics x (suite + 5 groups)), all run through the gate's own code
on the same draws (the decisions through the functions `compare` uses, and `SPOT_CHECKS` PRs
per cell through `worker.evals.verdict.comparison.paired_verdicts`, which must agree):

- today: Holm over each test's McNemar / Wilcoxon p-value (``method: holm``);
- new: the sign-flip family (``method: signflip``: weighted step-down min-P, examples weighted
  by their flakiness in the earlier runs), without and with ``confirm_flips: 0.25`` (the most
  telling discordant examples run once more at base and at head, worker/evals/verdict/confirm.py);
- naive: fail when any metric's mean drops by more than 0.02;
- one test: a gate holding only the test that matters (first metric, whole suite, McNemar at
  alpha 0.05: no multiplicity to pay for, and no knowledge of which metric will drop).

Prints, per n and method: the false-alarm rate with its 95% Wilson interval, power against
both drops, and provider calls per PR as a multiple of one head run (base comes from a stored
baseline). The last line is ``gate_power_n300=<concentrated power of the new method>``.

Usage: ``python bench/gate_calibration.py [--sims 400] [--seed 1]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from worker.evals.types import (
    CommandTarget,
    GateOptions,
    GateRule,
    StatisticsSettings,
    SuiteConfig,
)
from worker.evals.verdict import stats
from worker.evals.verdict.comparison import paired_verdicts
from worker.evals.verdict.comparisons import StatSettings
from worker.evals.verdict.confirm import choose_confirmations, confirm_budget
from worker.evals.verdict.flakiness import history_weights
from worker.evals.verdict.paired import PairedSuite
from worker.evals.verdict.signflip import FamilySuite, family_p_values

ALPHA = 0.05
NAIVE_DROP = 0.02
TRUE_DROP = 0.05
GROUPS = 5
BINARY, SCORES = 5, 5
HISTORY_RUNS = 5
CONFIRM = 0.25
#: PRs per cell also decided by the gate's `paired_verdicts`, which must agree.
SPOT_CHECKS = 5
METRICS = tuple(f"assertion.b{j}.pass_rate" for j in range(BINARY)) + tuple(
    f"assertion.s{j}.mean_score" for j in range(SCORES))
SIZES = (100, 200, 300, 500)
KINDS = ("none", "concentrated", "diffuse")
METHODS = ("today (Holm)", "new", "new + confirm", "naive", "one test")
SETTINGS = StatSettings(resamples=200)
HOLM = StatisticsSettings(method="holm")
SIGNFLIP = StatisticsSettings(method="signflip", draws=1000)


@dataclass
class World:
    """One simulated suite: pass probabilities and score means of base and head."""

    p: np.ndarray
    mu: np.ndarray
    head_p: np.ndarray


def suite_config() -> SuiteConfig:
    """One suite: ``regression: {alpha: 0.05}`` on every metric, grouped by category."""
    rules = {m: GateRule(m, regression_alpha=ALPHA) for m in METRICS}
    return SuiteConfig("sim", "sim.jsonl", CommandTarget("x"), (), rules,
                       gate_options=GateOptions(group_by="category", group_min_items=5))


SUITE = suite_config()
SINGLE = SuiteConfig("one", "sim.jsonl", CommandTarget("x"), (),
                     {METRICS[0]: GateRule(METRICS[0], regression_alpha=ALPHA)})


def draws(rng: np.random.Generator, world: World, head: bool, k: int = 1) -> np.ndarray:
    """Return k runs of the world's examples, shape (k, n, 10): 5 pass/fail then 5 scores."""
    n = world.p.shape[0]
    binary = (rng.random((k, n, BINARY)) < (world.head_p if head else world.p)).astype(float)
    scores = np.clip(world.mu + rng.normal(0, 0.1, (k, n, SCORES)), 0, 1)
    return np.concatenate([binary, scores], axis=2)


def make_world(rng: np.random.Generator, n: int, kind: str,
               base: Callable[[World], np.ndarray]) -> tuple[World, np.ndarray]:
    """Draw a world and its base run; apply the drop of ``kind`` to head's probabilities."""
    world = World(rng.beta(0.4, 0.1, size=(n, BINARY)), rng.beta(4.0, 2.0, size=(n, SCORES)),
                  np.empty(0))
    world.head_p = world.p.copy()
    values = base(world)
    if kind == "diffuse":
        world.head_p[:, 0] *= 1 - TRUE_DROP / 0.8
    elif kind == "concentrated":
        passing = np.flatnonzero(values[:, 0] == 1)
        broken = rng.choice(passing, size=min(round(TRUE_DROP * n), passing.size), replace=False)
        world.head_p[broken, 0] = 0.0
    return world, values


def holm_fails(base: np.ndarray, head: np.ndarray, codes: np.ndarray, groups: bool) -> bool:
    """Today's decision: Holm over McNemar (pass/fail) and Wilcoxon (scores) p-values.

    The same tests and Holm as the gate's `compare` (worker/evals/verdict/stats.py), vectorised over
    the score metrics (``scipy.stats.wilcoxon(axis=0)`` equals one call per column); `SPOT_CHECKS`
    PRs per n are also run through `paired_verdicts` and must agree.
    """
    p_values = []
    for rows in [np.ones(base.shape[0], dtype=bool)] + ([codes == g for g in range(GROUPS)]
                                                        if groups else []):
        b, h = base[rows], head[rows]
        for j in range(min(BINARY, b.shape[1])):
            p_values.append(stats.mcnemar_p(int(np.sum((b[:, j] == 1) & (h[:, j] == 0))),
                                            int(np.sum((b[:, j] == 0) & (h[:, j] == 1)))))
        if b.shape[1] > BINARY:
            d = h[:, BINARY:] - b[:, BINARY:]
            nonzero = np.any(d != 0, axis=0)
            found = np.ones(d.shape[1])
            if np.any(nonzero):
                found[nonzero] = sps.wilcoxon(d[:, nonzero], zero_method=stats.ZERO_METHOD,
                                              alternative="less", axis=0).pvalue
            p_values.extend(found.tolist())
    return bool(np.any(stats.holm_adjust(np.array(p_values)) <= ALPHA))


def family_fails(paired: PairedSuite, weights: np.ndarray) -> bool:
    """The new decision: the gate's sign-flip family (worker/evals/verdict/signflip.py)."""
    member = FamilySuite("sim", paired, SUITE.gate, 5, weights=weights)
    return any(adjusted <= ALPHA for _, adjusted in family_p_values([member], SIGNFLIP).values())


def one_pr(rng: np.random.Generator, n: int, kind: str,
           check: bool = False) -> dict[str, tuple[bool, float]]:
    """Simulate one PR; return, per method, whether the gate failed and calls / head run.

    With ``check`` the fast decisions are compared with the gate's `paired_verdicts`.
    """
    world, base = make_world(rng, n, kind, lambda w: draws(rng, w, False)[0])
    head = draws(rng, world, True)[0]
    earlier = draws(rng, world, False, HISTORY_RUNS)
    ids = tuple(f"e{i}" for i in range(n))
    labels = tuple(f"category=g{i % GROUPS}" for i in range(n))
    codes = np.arange(n) % GROUPS
    weights = history_weights(np.moveaxis(earlier, 0, -1))
    one = PairedSuite(ids, METRICS, base[:, :, None], head[:, :, None], labels, (), ())
    found = {"today (Holm)": (holm_fails(base, head, codes, True), 1.0),
             "new": (family_fails(one, weights), 1.0)}
    rows = choose_confirmations(base, head, weights, confirm_budget(CONFIRM, n),
                                seed=int(rng.integers(1 << 31)))
    base2, head2 = np.full((n, len(METRICS), 2), np.nan), np.full((n, len(METRICS), 2), np.nan)
    base2[:, :, 0], head2[:, :, 0] = base, head
    if rows:
        part = World(world.p[rows], world.mu[rows], world.head_p[rows])
        base2[rows, :, 1] = draws(rng, part, False)[0]
        head2[rows, :, 1] = draws(rng, part, True)[0]
    two = PairedSuite(ids, METRICS, base2, head2, labels, (), ())
    found["new + confirm"] = (family_fails(two, weights), 1.0 + 2 * len(rows) / n)
    found["naive"] = (bool(np.any(base.mean(axis=0) - head.mean(axis=0) > NAIVE_DROP)), 1.0)
    found["one test"] = (holm_fails(base[:, :1], head[:, :1], codes, False), 1.0)
    if check:
        _check(found, one, two, earlier, ids)
    return found


def _check(found: dict[str, tuple[bool, float]], one: PairedSuite, two: PairedSuite,
           earlier: np.ndarray, ids: tuple[str, ...]) -> None:
    """Assert the fast decisions equal the gate's own `paired_verdicts`."""
    history = {"sim": {metric: {i: earlier[:, row, j].tolist() for row, i in enumerate(ids)}
                       for j, metric in enumerate(METRICS)}}
    slow = {"today (Holm)": paired_verdicts([(SUITE, one)], SETTINGS, HOLM)[0],
            "new": paired_verdicts([(SUITE, one)], SETTINGS, SIGNFLIP, history)[0],
            "new + confirm": paired_verdicts([(SUITE, two)], SETTINGS, SIGNFLIP, history)[0]}
    for method, conclusion in slow.items():
        if (conclusion == "failure") != found[method][0]:
            raise AssertionError(f"{method}: the fast decision differs from the gate's")


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
    parser.add_argument("--sims", type=int, default=400, help="simulated PRs per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"{len(METRICS)} metrics x (suite + {GROUPS} groups) = 60 regression tests at alpha "
          f"{ALPHA}; {args.sims} PRs per cell; {HISTORY_RUNS} earlier A/A runs for weights; "
          f"naive: any mean drop > {NAIVE_DROP}")
    print("n   | method        | false alarm [95% Wilson] | power concentrated   | "
          "power diffuse        | calls/PR")
    headline = 0.0
    for n in SIZES:
        hits = {(k, m): 0 for k in KINDS for m in METHODS}
        calls = dict.fromkeys(METHODS, 0.0)
        for kind in KINDS:
            for sim in range(args.sims):
                for method, (failed, cost) in one_pr(rng, n, kind, sim < SPOT_CHECKS).items():
                    hits[(kind, method)] += failed
                    calls[method] += cost / (len(KINDS) * args.sims)
        for method in METHODS:
            print(f"{n:<3} | {method:<13} | {rate(hits[('none', method)], args.sims):<24} | "
                  f"{rate(hits[('concentrated', method)], args.sims)} | "
                  f"{rate(hits[('diffuse', method)], args.sims)} | {calls[method]:.2f}")
        if n == 300:
            headline = hits[("concentrated", "new + confirm")] / args.sims
    print(f"elapsed_s={time.perf_counter() - start:.1f}")
    print(f"gate_power_n300={headline:.3f}")


if __name__ == "__main__":
    main()
