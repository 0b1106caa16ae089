"""Soak llmgate under chaos: N pull requests over M minutes while workers die, Redis restarts
and GitHub fails a fifth of its requests; count what is lost, duplicated or stuck (issue 14).

Every part is a real process on loopback (tests/e2e/chaos_support.py): redis-server (AOF on,
as the deploy files should have it; ``--wipe`` restarts it empty instead), the web process, the
workers (a supervisor restarts any that exits, as a container's restart policy does), the
schema-checking fake GitHub with GitHub's secondary limits, and the fake provider. During the M
minutes:

- each pull request is opened at a random time and pushed to once more later (``synchronize``);
- a random worker is SIGKILLed every ``--kill-every`` seconds on average, and Redis is
  restarted (down ``--redis-down`` seconds) every ``--restart-every`` seconds on average
  (exponential gaps, seeded);
- GitHub answers a 5xx to ``--fault-rate`` of the installation's requests, half of them
  *after* performing the request (a gateway timeout after a POST created its check run).

Then it stops the faults, waits up to ``--settle`` seconds (60) for the system to converge
(every newest head concluded, no check run in progress), waits ``--hold`` seconds more (15: three
passes of the reconciler, whose period is 5 s in the harness, so a late pass that concludes or
queues something is seen), counts what GitHub shows then, and prints
lost / duplicated / stuck gates (per pull request's newest head: chaos_tally.py), the p50/p99
delivery-to-conclusion time, the writes against GitHub's limits, and last the line
``faulty_gates=<lost + duplicated + stuck>`` (0 is the target).

    python bench/soak.py [--prs 20] [--minutes 3] [--workers 2] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_services import in_folder  # noqa: E402
from tests.e2e.chaos_processes import RedisOptions  # noqa: E402
from tests.e2e.chaos_repo import build_chaos_repo  # noqa: E402
from tests.e2e.chaos_support import ChaosFakes, ChaosStack  # noqa: E402
from tests.e2e.chaos_tally import Tally  # noqa: E402
from tests.fakes.fake_github_faults import CONTENT_PER_HOUR, CONTENT_PER_MINUTE  # noqa: E402


@dataclass(frozen=True)
class Plan:
    """When each thing happens, seconds from the start, sorted."""

    pushes: list[tuple[float, int, int]]  # (at, pr, push)
    kills: list[float]
    restarts: list[float]


def _gaps(rng: random.Random, mean_s: float, until_s: float) -> list[float]:
    out, t = [], rng.expovariate(1 / mean_s)
    while t < until_s:
        out.append(t)
        t += rng.expovariate(1 / mean_s)
    return out


def make_plan(args: argparse.Namespace) -> Plan:
    """Draw the schedule from ``--seed`` (pushes in the first 90% of the time)."""
    rng = random.Random(args.seed)
    span_s = args.minutes * 60
    pushes = []
    for pr in range(1, args.prs + 1):
        opened = rng.uniform(0, 0.6 * span_s)
        pushes += [(opened, pr, 1), (rng.uniform(opened + 1, 0.9 * span_s), pr, 2)]
    return Plan(sorted(pushes), _gaps(rng, args.kill_every, span_s),
                _gaps(rng, args.restart_every, span_s))


def github_faults(rate: float, seed: int) -> list[dict[str, object]]:
    """5xx on ``rate`` of the requests to ``/repos/...``: half after performing them."""
    half = rate / 2
    return [{"path_glob": "/repos/*", "status": 502, "rate": half, "seed": seed,
             "times": None, "after": True},
            {"path_glob": "/repos/*", "status": 503, "rate": half / (1 - half),
             "seed": seed + 1, "times": None}]


def chaos(stack: ChaosStack, plan: Plan, args: argparse.Namespace, start: float,
          stop: threading.Event, log: list[str]) -> None:
    """Kill workers and restart Redis on schedule until ``stop`` is set."""
    rng = random.Random(args.seed + 2)
    events = sorted([(t, "kill") for t in plan.kills] + [(t, "restart") for t in plan.restarts])
    for at, what in events:
        if stop.wait(max(0.0, start + at - time.monotonic())):
            return
        if what == "kill":
            live = stack.live_workers()
            if live:
                victim = rng.choice(live)
                stack.kill_worker(victim, signal.SIGKILL)
                log.append(f"{at:6.1f}s SIGKILL {victim.name}")
        else:
            stack.redis.restart(args.redis_down, hard=False)
            log.append(f"{at:6.1f}s Redis restarted ({args.redis_down:g} s down)")


def run(args: argparse.Namespace, work: Path) -> Tally:
    """Run the soak in ``work``; return the tally after the settle."""
    plan = make_plan(args)
    repo = build_chaos_repo(work / "repo", args.prs, 2, sleep_s=args.target_s)
    redis = RedisOptions(appendonly=not args.wipe)
    with ChaosFakes(work) as fakes, ChaosStack(work, fakes, workers=args.workers, redis=redis,
                                               supervise=True) as stack:
        stack.github.setup({"faults": github_faults(args.fault_rate, args.seed)})
        log: list[str] = []
        stop, start = threading.Event(), time.monotonic()
        thread = threading.Thread(target=chaos, args=(stack, plan, args, start, stop, log))
        thread.start()
        newest: dict[int, str] = {}
        try:
            for at, pr, push in plan.pushes:
                time.sleep(max(0.0, start + at - time.monotonic()))
                stack.push(repo, pr, push)
                newest[pr] = repo.heads[(pr, push)]
            time.sleep(max(0.0, start + args.minutes * 60 - time.monotonic()))
        finally:
            stop.set()
            thread.join()
        stack.github.setup({"clear_faults": True})
        print("\n".join(log) or "(no fault fired)")
        settled = stack.settle(newest, args.settle, stop_on_duplicate=False)
        time.sleep(args.hold)  # a late reconciler pass may still conclude or queue something
        counted = stack.tally(newest)
        print(f"counted {args.hold:g} s after the settle ended "
              f"({'converged' if settled.converged else 'not converged'} then)")
        print(f"worker exits: {stack.worker_exits()}")
        refused = [d for d in stack.deliveries if not 200 <= d.status < 300]
        print(f"deliveries: {len(stack.deliveries)} sent, {len(refused)} refused "
              f"({sorted({d.status for d in refused})})")
    print(f"chaos: {len(plan.kills)} worker kills, {len(plan.restarts)} Redis restarts "
          f"({'wiped' if args.wipe else 'AOF'}), GitHub 5xx on {args.fault_rate:.0%} of requests "
          "(half after performing them)")
    return counted


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=30.0, help="mean seconds")
    parser.add_argument("--restart-every", type=float, default=60.0, help="mean seconds")
    parser.add_argument("--redis-down", type=float, default=1.0, help="seconds")
    parser.add_argument("--wipe", action="store_true", help="Redis without persistence")
    parser.add_argument("--fault-rate", type=float, default=0.2, help="fraction 0-1")
    parser.add_argument("--target-s", type=float, default=1.0,
                        help="seconds the heads' target sleeps per example")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds after the faults")
    parser.add_argument("--hold", type=float, default=15.0,
                        help="seconds after the settle before counting")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None,
                        help="run in this (new) folder and keep it: every process's log")
    args = parser.parse_args(argv)
    counted = in_folder(args.keep, "llmgate-soak-", lambda folder: run(args, folder))
    print(f"soak: {args.prs} PRs ({2 * args.prs} heads) over {args.minutes:g} min, "
          f"{args.workers} workers, settle up to {args.settle:g} s, counted {args.hold:g} s "
          "later")
    print(f"lost={len(counted.lost)} duplicated={counted.duplicated} stuck={len(counted.stuck)}"
          f"  (lost PRs {counted.lost}; duplicated {counted.duplicated_checks} "
          f"{counted.duplicated_comments}; stuck check runs {counted.stuck})")
    print(f"conclusions: {counted.conclusions}")
    print(f"delivery_to_conclusion: p50 {counted.percentile_s(0.5):.1f} s, "
          f"p99 {counted.percentile_s(0.99):.1f} s over {len(counted.latencies_s)} heads")
    print(f"writes: {counted.writes} ({counted.superseded_writes} on superseded heads), "
          f"at most {counted.max_writes_per_minute} in a minute (GitHub: {CONTENT_PER_MINUTE} "
          f"a minute, {CONTENT_PER_HOUR} an hour); violations {counted.violations}")
    print(f"faulty_gates={len(counted.lost) + counted.duplicated + len(counted.stuck)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
