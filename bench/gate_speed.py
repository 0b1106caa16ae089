"""Time the statistical gate on a large suite: 10,000 examples x 10 metrics x 5 groups.

Builds a base and a head run in memory (5 assertion types per example: three pass/fail, two
graded; a cost), then times `worker.evals.verdict.comparison.compare` with every statistical rule on
every metric, grouping by category (5 groups) and 2,000 bootstrap resamples: pairing, McNemar or
Wilcoxon per metric and group (60 tests), the stratified bootstrap, the sign-flip family, Holm
and the verdicts. Then it times the four looks of a sequential gate over the same shape
(`worker.evals.verdict.sequential.sequential_look` at 2,500, 5,000, 7,500 and 10,000 examples
of 10 metrics in 6 scopes, 2,048 sign patterns), and prints their sum with the comparison:
the statistics of a sequential gate that goes the whole way. Goal (issue 34): under 1 s.

``--baseline DIR`` runs the same measurement on the code in DIR (a worktree of an earlier
commit) in a child process, alternating with this code, and prints the ratio. The last line
is ``statistics_s=<median seconds of compare + looks>``.

Usage: ``python bench/gate_speed.py [--examples N] [--repeat K] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

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
from worker.evals.verdict.comparison import compare

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


def look_arrays(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Differences (n, 10), scopes (6, n: the suite and 5 groups) and unit weights (6, 10) of a
    sequential gate; one example in ten differs per metric."""
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (n, len(METRICS))) * (rng.random((n, len(METRICS))) < 0.1)
    scopes = np.zeros((len(GROUPS) + 1, n), dtype=bool)
    scopes[0] = True
    for code in range(len(GROUPS)):
        scopes[code + 1] = np.arange(n) % len(GROUPS) == code
    return x, scopes, np.ones((len(GROUPS) + 1, len(METRICS)))


@dataclass(frozen=True)
class Figures:
    """One measurement: median seconds of ``compare``, of the four looks and of both (wall),
    process CPU seconds, and the verdicts (to check that the baseline decides the same)."""

    compare_s: float
    looks_s: float
    statistics_s: float
    cpu_s: float
    conclusion: str
    comparisons: int
    holm_tests: int
    looks: list[str]


def measure(examples: int, repeat: int) -> Figures:
    """`Figures` over ``repeat`` runs after a warm-up (imports, scipy's first calls)."""
    from worker.evals.verdict.sequential import look_sizes, sequential_look

    base, head = build_run(examples, 1, 0.0), build_run(examples, 2, 0.01)
    config = gate_config()
    x, scopes, weights = look_arrays(examples)
    sizes = look_sizes(examples, 4)
    compare(config, head, base)
    sequential_look(x[:sizes[0]], scopes[:, :sizes[0]], weights, sizes, alpha=0.05, seed=7)
    compare_s, looks_s, cpu = [], [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = compare(config, head, base)
        middle = time.perf_counter()
        verdicts = [str(sequential_look(x[:k], scopes[:, :k], weights, sizes, alpha=0.05,
                                        seed=7).verdict) for k in sizes]
        compare_s.append(middle - start)
        looks_s.append(time.perf_counter() - middle)
        cpu.append(time.process_time() - start_cpu)
    both = [a + b for a, b in zip(compare_s, looks_s, strict=True)]
    return Figures(statistics.median(compare_s), statistics.median(looks_s),
                   statistics.median(both), statistics.median(cpu), report.conclusion,
                   len(report.comparisons), report.holm_tests, verdicts)


def _baseline(folder: Path, examples: int, repeat: int) -> Figures:
    """`measure` on the code in ``folder``, in a child process."""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    found = subprocess.run([sys.executable, __file__, "--examples", str(examples), "--repeat",
                            str(repeat), "--json"], env=env, cwd=folder, check=True,
                           capture_output=True, text=True)
    return Figures(**json.loads(found.stdout.splitlines()[-1]))


def main() -> None:
    """Measure (and the baseline, alternating) and print the figures, the headline last."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a worktree of the code to compare with")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asdict(measure(args.examples, args.repeat))))
        return
    ours, theirs = [], []
    for _ in range(2 if args.baseline else 1):  # alternate, so load changes hit both
        ours.append(measure(args.examples, args.repeat))
        if args.baseline:
            theirs.append(_baseline(args.baseline.resolve(), args.examples, args.repeat))
    best = min(ours, key=lambda f: f.statistics_s)
    print(f"examples={args.examples} metrics={len(METRICS)} groups={len(GROUPS)} "
          f"resamples=2000 comparisons={best.comparisons} holm_tests={best.holm_tests} "
          f"conclusion={best.conclusion} looks={','.join(best.looks)}")
    if theirs:
        old = min(theirs, key=lambda f: f.statistics_s)
        same = (old.conclusion, old.looks) == (best.conclusion, best.looks)
        print(f"baseline: compare_s={old.compare_s:.3f} looks_s={old.looks_s:.3f} "
              f"statistics_s={old.statistics_s:.3f} cpu_s={old.cpu_s:.3f} "
              f"same_verdicts={same}")
        print(f"speedup={old.statistics_s / best.statistics_s:.2f}x (baseline / this)")
    print(f"load={os.getloadavg()[0]:.2f} compare_s={best.compare_s:.3f} "
          f"looks_s={best.looks_s:.3f} cpu_s={best.cpu_s:.3f} (process CPU, all threads)")
    print(f"statistics_s={best.statistics_s:.3f}")


if __name__ == "__main__":
    main()
