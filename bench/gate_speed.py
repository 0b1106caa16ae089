"""Time the statistical gate on a large suite: 10,000 examples x 10 metrics x 5 groups.

Builds a base and a head run in memory (5 assertion types per example: three pass/fail, two
graded; a cost), then times `worker.evals.verdict.compare.compare` with every statistical rule on
every metric, grouping by category (5 groups) and 2,000 bootstrap resamples: pairing, McNemar or
Wilcoxon per metric and group (60 tests), the stratified bootstrap, Holm and the verdicts. Goal:
under 1 s on this machine. The last line is ``gate_speed_s=<median seconds>``.

Usage: ``python bench/gate_speed.py [--examples N] [--repeat K]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    AssertionResult,
    CommandTarget,
    Config,
    ExampleResult,
    GateOptions,
    GateRule,
    RunResult,
    Settings,
    SuiteConfig,
    SuiteResult,
)
from worker.evals.verdict.compare import compare

METRICS = ("pass_rate", "error_rate", "mean_score", "assertion.equals.pass_rate",
           "assertion.contains.pass_rate", "assertion.regex.pass_rate",
           "assertion.llm_judge.pass_rate", "assertion.llm_judge.mean_score",
           "assertion.similar.mean_score", "cost_mean")
GROUPS = ("billing", "shipping", "account", "bug", "other")


def build_run(n: int, seed: int, drift: float) -> RunResult:
    """Return a run of one suite with ``n`` examples; ``drift`` lowers the graded scores."""
    rng = np.random.default_rng(seed)
    skill = np.random.default_rng(0).beta(4, 1.5, size=n)  # per-example difficulty, shared
    examples = []
    for i in range(n):
        hits = rng.random(3) < skill[i]
        judge, similar = np.clip(skill[i] - drift + rng.normal(0, 0.1, 2), 0, 1)
        checks = (AssertionResult("equals", bool(hits[0]), float(hits[0])),
                  AssertionResult("contains", bool(hits[1]), float(hits[1])),
                  AssertionResult("regex", bool(hits[2]), float(hits[2])),
                  AssertionResult("llm_judge", bool(judge >= 0.5), float(judge)),
                  AssertionResult("similar", bool(similar >= 0.5), float(similar)))
        errored = bool(rng.random() < 0.01)
        examples.append(ExampleResult(
            f"ex{i}", i + 1, not errored and all(c.passed for c in checks), errored, "out",
            "want", None, checks, cost_usd=float(rng.gamma(2.0, 0.0005)),
            metadata={"category": GROUPS[i % len(GROUPS)]}))
    return RunResult(f"sha{seed}", {"big": SuiteResult("big", "evals/big.jsonl",
                                                       tuple(examples), suite_metrics(examples))})


def gate_config() -> Config:
    """Every statistical rule on every metric, grouped by category."""
    rules = {m: GateRule(m, regression_alpha=0.05, non_inferiority_margin=0.02,
                         max_new_failures=50, min_detectable=0.02) for m in METRICS}
    options = GateOptions(group_by="category", group_min_items=5)
    return Config(1, (SuiteConfig("big", "evals/big.jsonl", CommandTarget("x"), (), rules,
                                  gate_options=options),), Settings())


def main() -> None:
    """Build the runs once, then time ``compare`` ``--repeat`` times and print the median."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base, head = build_run(args.examples, 1, 0.0), build_run(args.examples, 2, 0.01)
    config = gate_config()
    compare(config, head, base)  # warm-up: imports, scipy's first calls
    times, cpu = [], []
    for _ in range(args.repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = compare(config, head, base)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(f"examples={args.examples} metrics={len(METRICS)} groups={len(GROUPS)} "
          f"resamples=2000 comparisons={len(report.comparisons)} "
          f"holm_tests={report.holm_tests} conclusion={report.conclusion}")
    print(f"min_s={min(times):.3f} max_s={max(times):.3f} "
          f"cpu_s={statistics.median(cpu):.3f} (process CPU, all threads)")
    print(f"gate_speed_s={statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
