"""Sequential stopping (``settings.sequential: true``): calls per PR and error rates.

The simulated suite of bench/gate_calibration.py (n examples in 5 groups, 10 metrics, 60
``regression`` tests at alpha 0.05, examples weighted from 5 earlier A/A runs) is gated twice on
the same draws: once on the full head run (the sign-flip family, ``method: signflip``) and once
sequentially (worker/evals/verdict/sequential.py: ``looks`` batches, O'Brien-Fleming spending,
predictive futility), which stops calling the model at the first look that fails or passes.
Kinds of pull request:

- unchanged: head drawn like base;
- clear pass: head better on every metric (each pass/fail metric's failure probability halved,
  scores + 0.1);
- clear regression: 0.15 n examples that pass at base fail at head on the first metric;
- concentrated / diffuse: the 5-point drops of bench/gate_calibration.py (power).

Prints, per kind: how often each gate fails (the false-alarm rate for unchanged, power for the
drops) and head calls per PR as a multiple of the full head run, then the stops by look.
Last line ``sequential_calls_clear=<the larger of the two clear cases' calls per PR>``.

Usage: ``python bench/gate_sequential.py [--sims 200] [--n 300] [--looks 4] [--seed 1]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gate_calibration import (  # noqa: E402
    ALPHA,
    BINARY,
    HISTORY_RUNS,
    METRICS,
    SIGNFLIP,
    SUITE,
    World,
    draws,
    family_fails,
    make_world,
    rate,
)
from worker.evals.verdict.flakiness import history_weights  # noqa: E402
from worker.evals.verdict.paired import PairedSuite  # noqa: E402
from worker.evals.verdict.sequential import (  # noqa: E402
    DRAWS,
    FUTILITY,
    Look,
    look_sizes,
    sequential_look,
)
from worker.evals.verdict.signflip import (  # noqa: E402
    SEED,
    FamilySuite,
    family_arrays,
    family_p_values,
)

#: The seed the gate itself uses for this suite (worker/evals/verdict/signflip.py), so the
#: last look's boundary is set on the patterns the report's family uses.
GATE_SEED = SEED ^ zlib.crc32(b"sim")
KINDS = ("unchanged", "clear pass", "clear regression", "concentrated", "diffuse")
CLEAR_DROP = 0.15


def world_of(rng: np.random.Generator, n: int, kind: str) -> tuple[World, np.ndarray]:
    """Draw a world and its base run, with head's probabilities changed as ``kind`` says."""
    name = {"unchanged": "none", "clear pass": "none", "clear regression": "none"}.get(kind, kind)
    world, base = make_world(rng, n, name, lambda w: draws(rng, w, False)[0])
    if kind == "clear pass":
        world.head_p = 1 - (1 - world.p) / 2
    elif kind == "clear regression":
        passing = np.flatnonzero(base[:, 0] == 1)
        broken = rng.choice(passing, size=min(round(CLEAR_DROP * n), passing.size),
                            replace=False)
        world.head_p[broken, 0] = 0.0
    return world, base


def paired(base: np.ndarray, head: np.ndarray, rows: int) -> PairedSuite:
    """The first ``rows`` examples as a paired suite (looks take examples in a fixed order)."""
    ids = tuple(f"e{i}" for i in range(rows))
    labels = tuple(f"category=g{i % 5}" for i in range(rows))
    return PairedSuite(ids, METRICS, base[:rows, :, None], head[:rows, :, None], labels, (), ())


def fails_at(member: FamilySuite, level: float) -> bool:
    """Whether the gate's sign-flip family rejects a test at ``level`` (what the report does
    with its regression alphas scaled to a look's boundary: worker/pipeline/sequential.py)."""
    options = replace(SIGNFLIP, draws=max(SIGNFLIP.draws, DRAWS)) if level < ALPHA else SIGNFLIP
    return any(adjusted <= level
               for _, adjusted in family_p_values([member], options).values())


def run_sequential(base: np.ndarray, head: np.ndarray, weights: np.ndarray,
                   args: argparse.Namespace, seed: int) -> Look:
    """Look after each batch until the gate stops, as worker/pipeline/sequential.py does.

    A look fails when the sequential boundary is crossed and the family at that level agrees;
    it passes early when futility holds and the family finds nothing at alpha; the last look
    is the family at the last boundary.
    """
    n = base.shape[0]
    sizes = look_sizes(n, args.looks)
    for size in sizes:
        member = FamilySuite("sim", paired(base, head, size), SUITE.gate, 5,
                             weights=weights[:size])
        x, scopes, shares = family_arrays([member], SIGNFLIP)
        found = sequential_look(x, scopes, shares, sizes, alpha=ALPHA, draws=args.draws,
                                seed=seed, futility=args.futility, spending=args.spending)
        if size == n:
            return replace(found, verdict="fail" if fails_at(member, found.level) else "pass")
        if found.verdict == "fail" and fails_at(member, found.level):
            return found
        if found.verdict == "pass" and not fails_at(member, ALPHA):
            return found
    raise AssertionError("the last look always decides")


def one_pr(rng: np.random.Generator, n: int, kind: str,
           args: argparse.Namespace) -> tuple[bool, Look]:
    """Simulate one PR; return whether the full-run gate fails and the sequential decision."""
    world, base = world_of(rng, n, kind)
    head = draws(rng, world, True)[0]
    if kind == "clear pass":
        head[:, BINARY:] = np.clip(head[:, BINARY:] + 0.1, 0, 1)
    weights = history_weights(np.moveaxis(draws(rng, world, False, HISTORY_RUNS), 0, -1))
    full = family_fails(paired(base, head, n), weights)
    return full, run_sequential(base, head, weights, args, GATE_SEED)


def main() -> None:
    """Run the simulations and print the table, then the headline figure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sims", type=int, default=200, help="simulated PRs per kind")
    parser.add_argument("--n", type=int, default=300, help="examples per suite")
    parser.add_argument("--looks", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=DRAWS, help="sign patterns per look")
    parser.add_argument("--futility", type=float, default=FUTILITY)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    parser.add_argument("--spending", choices=("obrien_fleming", "pocock"),
                        default="obrien_fleming")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"n = {args.n}, {len(METRICS)} metrics x (suite + 5 groups) = 60 regression tests at "
          f"alpha {ALPHA}; {args.looks} looks, {args.spending} spending, {args.draws} sign "
          f"patterns, futility {args.futility}; {args.sims} PRs per kind")
    print("kind             | fails, full run [95% Wilson] | fails, sequential        | "
          "calls/PR full | calls/PR sequential | stops (look:verdict)")
    clear = 0.0
    for kind in args.kinds.split(","):
        full_hits = seq_hits = 0
        calls = 0.0
        stops: Counter[str] = Counter()
        for _ in range(args.sims):
            full, look = one_pr(rng, args.n, kind, args)
            full_hits += full
            seq_hits += look.verdict == "fail"
            calls += look.seen / look.total / args.sims
            stops[f"{look.look}:{look.verdict}"] += 1
        if kind.startswith("clear"):
            clear = max(clear, calls)
        shown = " ".join(f"{key}={count}" for key, count in sorted(stops.items()))
        print(f"{kind:<16} | {rate(full_hits, args.sims):<28} | "
              f"{rate(seq_hits, args.sims):<24} | {1.0:<13.2f} | {calls:<19.2f} | {shown}")
    print(f"elapsed_s={time.perf_counter() - start:.1f}")
    print(f"sequential_calls_clear={clear:.3f}")


if __name__ == "__main__":
    main()
