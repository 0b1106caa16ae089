"""Sequential stopping (``settings.sequential: true``): calls per PR and error rates.

The simulated suite of bench/gate_calibration.py (n examples in 5 groups, 10 metrics, 60
``regression`` tests at alpha 0.05, examples weighted from 5 earlier A/A runs) is gated twice on
the same draws: once on the full head run (the sign-flip family, ``method: signflip``) and once
sequentially (worker/evals/verdict/sequential.py: ``looks`` batches, alpha spending, predictive
futility), which stops calling the model at the first look that fails or passes. The
sequential gate is decided on the same draws and the same sign patterns under each spending
function of ``--spending`` (default: ``obrien_fleming``, the spending before, and
``haybittle_peto``, the default after): each look's statistics are computed once and every
spending's boundaries are set on them (`decide`), as `sequential_look` does; the first
`SPOT_CHECKS` PRs per kind are also run through `sequential_look` and the report's family
(`run_sequential`), which must agree.
Kinds of pull request:

- unchanged: head drawn like base;
- clear pass: head better on every metric (each pass/fail metric's failure probability halved,
  scores + 0.1);
- clear regression: 0.15 n examples that pass at base fail at head on the first metric;
- concentrated / diffuse: the 5-point drops of bench/gate_calibration.py (power).

Prints, per kind and spending: how often each gate fails (the false-alarm rate for unchanged,
power for the drops), head calls per PR as a multiple of the full head run, and the stops by
look; then, per spending, the power lost against the full run. Last line
``sequential_calls_clear=<the larger of the two clear cases' calls per PR, last spending>``.

Usage: ``python bench/gate_sequential.py [--sims 200] [--n 300] [--looks 4] [--seed 1]
[--spending obrien_fleming,haybittle_peto]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, replace
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
from worker.evals.verdict.multiplicity import subgroup_signs  # noqa: E402
from worker.evals.verdict.paired import PairedSuite  # noqa: E402
from worker.evals.verdict.sequential import (  # noqa: E402
    DRAWS,
    FUTILITY,
    FUTILITY_FROM,
    Look,
    Spending,
    boundaries,
    family_p,
    look_sizes,
    predictive_failure,
    sequential_look,
    spent_alpha,
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
#: PRs per kind also decided by `run_sequential` (the pipeline's path), which must agree.
SPOT_CHECKS = 2


@dataclass
class Statistics:
    """One PR's looks, computed once for every spending function.

    Attributes:
        g: shape (patterns, looks): the family's G of every sign pattern at each look (row 0
            observed); predictive: per look, the predictive probability of a failing full run
            (0 at the last look); sizes: cumulative examples per look; members: the family's
            suite at each look; reports: look index -> the report's smallest adjusted p-value
            on the examples seen (computed when first asked, `report_p`).
    """

    g: np.ndarray
    predictive: tuple[float, ...]
    sizes: tuple[int, ...]
    members: list[FamilySuite]
    reports: dict[int, float]

    def report_p(self, k: int) -> float:
        """The smallest adjusted p-value of the report's family at look index ``k`` (the
        interim reports draw their own patterns, so they can differ from G_k)."""
        if k not in self.reports:
            options = replace(SIGNFLIP, draws=max(SIGNFLIP.draws, DRAWS))
            found = family_p_values([self.members[k]], options).values()
            self.reports[k] = min((adjusted for _, adjusted in found), default=1.0)
        return self.reports[k]


def statistics(base: np.ndarray, head: np.ndarray, weights: np.ndarray,
               args: argparse.Namespace, seed: int) -> Statistics:
    """Compute every look's G under every sign pattern and its predictive probability (the
    quantities `sequential_look` computes, once instead of once per spending)."""
    n = base.shape[0]
    sizes = look_sizes(n, args.looks)
    signs = subgroup_signs(n, args.draws, seed)
    columns, predictive, members = [], [], []
    for size in sizes:
        member = FamilySuite("sim", paired(base, head, size), SUITE.gate, 5,
                             weights=weights[:size])
        members.append(member)
        x, scopes, shares = family_arrays([member], SIGNFLIP)
        g, smallest = family_p(x, scopes, shares, signs[:, :size])
        columns.append(g)
        predictive.append(0.0 if size == n else predictive_failure(
            x, scopes, shares, n, float(np.quantile(smallest, ALPHA))))
    return Statistics(np.column_stack(columns), tuple(predictive), sizes, members, {})


def decide(found: Statistics, spending: Spending, futility: float) -> tuple[int, bool]:
    """Return (the look the run stops at, 1-based; whether it fails) under ``spending``.

    As `run_sequential`: at an interim look, fail when G_k <= c_k and the report on the examples
    seen fails at c_k; pass early, from half the examples on (`FUTILITY_FROM`), when the
    predictive probability is under ``futility`` and the report finds no regression at
    alpha. The last look is the report at c_K.
    """
    total, last = found.sizes[-1], len(found.sizes) - 1
    spent = [spent_alpha(n / total, ALPHA, spending) for n in found.sizes]
    levels = boundaries(found.g, np.diff(np.array([0.0, *spent])))
    for k in range(last):
        if float(found.g[0, k]) <= levels[k] and found.report_p(k) <= levels[k]:
            return k + 1, True
        if found.predictive[k] < futility and found.report_p(k) > ALPHA and \
                found.sizes[k] >= FUTILITY_FROM * total:
            return k + 1, False
    return last + 1, found.report_p(last) <= levels[last]


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
    with its regression alphas scaled to a look's boundary: worker/pipeline/sequential.py), on
    the patterns of the looks."""
    options = replace(SIGNFLIP, draws=max(SIGNFLIP.draws, DRAWS))
    return any(adjusted <= level
               for _, adjusted in family_p_values([member], options).values())


def run_sequential(base: np.ndarray, head: np.ndarray, weights: np.ndarray,
                   args: argparse.Namespace, seed: int, spending: Spending) -> Look:
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
                                seed=seed, futility=args.futility, spending=spending)
        if size == n:
            return replace(found, verdict="fail" if fails_at(member, found.level) else "pass")
        if found.verdict == "fail" and fails_at(member, found.level):
            return found
        if found.verdict == "pass" and not fails_at(member, ALPHA):
            return found
    raise AssertionError("the last look always decides")


def one_pr(rng: np.random.Generator, n: int, kind: str, args: argparse.Namespace,
           check: bool) -> tuple[bool, dict[str, tuple[int, bool]]]:
    """Simulate one PR; return whether the full-run gate fails and, per spending, where the
    sequential gate stops and whether it fails (checked against `run_sequential` when
    ``check``)."""
    world, base = world_of(rng, n, kind)
    head = draws(rng, world, True)[0]
    if kind == "clear pass":
        head[:, BINARY:] = np.clip(head[:, BINARY:] + 0.1, 0, 1)
    weights = history_weights(np.moveaxis(draws(rng, world, False, HISTORY_RUNS), 0, -1))
    full = family_fails(paired(base, head, n), weights)
    found = statistics(base, head, weights, args, GATE_SEED)
    decided = {}
    for spending in args.spending.split(","):
        decided[spending] = decide(found, spending, args.futility)  # type: ignore[arg-type]
        if check:
            look = run_sequential(base, head, weights, args, GATE_SEED,
                                  spending)  # type: ignore[arg-type]
            if (look.look, look.verdict == "fail") != decided[spending]:
                raise AssertionError(f"{kind}, {spending}: {decided[spending]} differs from "
                                     f"the pipeline's look {look.look}: {look.verdict}")
    return full, decided


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
    parser.add_argument("--spending", default="obrien_fleming,haybittle_peto",
                        help="comma-separated spending functions, decided on the same draws")
    args = parser.parse_args()
    spendings = args.spending.split(",")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"n = {args.n}, {len(METRICS)} metrics x (suite + 5 groups) = 60 regression tests at "
          f"alpha {ALPHA}; {args.looks} looks, {args.draws} sign patterns, futility "
          f"{args.futility}; {args.sims} PRs per kind; spending: {', '.join(spendings)}")
    print("kind             | spending       | fails, full run [95% Wilson] | "
          "fails, sequential        | calls/PR sequential | stops (look:verdict)")
    clear = dict.fromkeys(spendings, 0.0)
    lost: dict[str, list[str]] = {s: [] for s in spendings}
    for kind in args.kinds.split(","):
        full_hits = 0
        seq_hits = dict.fromkeys(spendings, 0)
        calls = dict.fromkeys(spendings, 0.0)
        stops: dict[str, Counter[str]] = {s: Counter() for s in spendings}
        for sim in range(args.sims):
            full, decided = one_pr(rng, args.n, kind, args, sim < SPOT_CHECKS)
            full_hits += full
            for spending, (look, failed) in decided.items():
                seq_hits[spending] += failed
                calls[spending] += look / args.looks / args.sims
                stops[spending][f"{look}:{'fail' if failed else 'pass'}"] += 1
        for spending in spendings:
            if kind.startswith("clear"):
                clear[spending] = max(clear[spending], calls[spending])
            if kind in ("concentrated", "diffuse"):
                lost[spending].append(f"{kind} {(full_hits - seq_hits[spending]) / args.sims:+.3f}")
            shown = " ".join(f"{key}={count}" for key, count in sorted(stops[spending].items()))
            print(f"{kind:<16} | {spending:<14} | {rate(full_hits, args.sims):<28} | "
                  f"{rate(seq_hits[spending], args.sims):<24} | {calls[spending]:<19.2f} | "
                  f"{shown}")
    for spending in spendings:
        print(f"{spending}: power lost against the full run: {', '.join(lost[spending])}; "
              f"clear-case calls/PR {clear[spending]:.3f}")
    print(f"elapsed_s={time.perf_counter() - start:.1f}")
    print(f"sequential_calls_clear={clear[spendings[-1]]:.3f}")


if __name__ == "__main__":
    main()
