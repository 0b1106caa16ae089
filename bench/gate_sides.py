"""Benchmark a base + head gate with its sides one after the other and at once, cold and warm.

Starts the fake OpenAI-compatible provider (``tests/fakes/fake_llm.py``, its own process, a fixed
latency: 100 ms by default) and a ``redis-server`` (bench/local_services.py), writes a git
repository whose base and head differ in every suite's prompt (so no answer of one side serves the
other), and gates it with `worker.pipeline.trees.gate_trees` in this process: three suites of
``--examples``, 6 and 6 examples with a model target and a ``contains`` check, at
``--concurrency`` (10) for the whole gate. Each repetition runs, in an order that rotates, both
ways of running the sides (``worker.pipeline.sides.CONCURRENT_SIDES`` False: base, then head,
as before issue 19; True: at once, one limiter), each **cold** (an empty response cache:
Redis flushed) and then **warm** (the same gate again, every answer from the cache). Every
run's report must be the same as the first one's of its kind (cold or warm) apart from timings
(latencies and their metrics, the estimate), and every run must pass.

    python bench/gate_sides.py
    python bench/gate_sides.py --examples 100 --repeat 3 --latency-ms 50

It prints the median wall of each kind and the ratios; the last line is
``gate_sides_warm_ratio=<median warm wall at once / one after the other>`` (goal: <= 1.05, no
slower warm re-runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_services import load_average, processes  # noqa: E402
from worker.evals.context import EvalContext  # noqa: E402
from worker.evals.llm import client as llm  # noqa: E402
from worker.evals.serialize import to_jsonable  # noqa: E402
from worker.pipeline import trees  # noqa: E402

try:
    from worker.pipeline import sides
except ImportError:  # a checkout before issue 19: one after the other only
    sides = None  # type: ignore[assignment]

KEY_ENV = "BENCH_FAKE_KEY"
#: Report fields that measure time, not results (left out of the comparison).
TIMING_FIELDS = frozenset({"latency_ms", "estimate"})


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity; return its output."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(repo),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@localhost",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@localhost"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def write_tree(root: Path, url: str, sizes: dict[str, int], concurrency: int,
               prompt: str) -> None:
    """Write the config, one dataset per suite and the prompt."""
    (root / "evals").mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "p.txt").write_text(prompt + " {{ input }}")
    suites = ""
    for name, count in sizes.items():
        (root / "evals" / f"{name}.jsonl").write_text("".join(
            json.dumps({"id": f"{name}{i}", "input": f"ticket number {i}"}) + "\n"
            for i in range(count)))
        suites += (f"  - name: {name}\n    dataset: evals/{name}.jsonl\n"
                   f"    target: {{model: openai/bench-model, prompt: prompts/p.txt, "
                   f'api_base: "{url}", api_key_env: {KEY_ENV}, '
                   "pricing: {input: 1, output: 2}}\n"
                   "    assertions: [{type: contains, value: ticket}]\n"
                   "    gate: {pass_rate: {min: 0.9, max_drop: 0.05}}\n")
    (root / ".llmgate.yml").write_text(
        f"version: 1\nsettings: {{concurrency: {concurrency}, timeout: 30}}\nsuites:\n{suites}")


def checkouts(tmp: Path, url: str, sizes: dict[str, int], concurrency: int
              ) -> tuple[Path, Path, str, str]:
    """Return (head tree, base tree, head SHA, base SHA): two commits of one repository."""
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_tree(repo, url, sizes, concurrency, "Answer the customer:")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base_sha = git(repo, "rev-parse", "HEAD")
    base = tmp / "base"
    git(repo, "worktree", "add", "-q", "--detach", str(base), base_sha)
    write_tree(repo, url, sizes, concurrency, "Answer the customer kindly:")
    git(repo, "commit", "-qam", "head")
    return repo, base, git(repo, "rev-parse", "HEAD"), base_sha


def without_timings(value: Any) -> Any:
    """Return a report's JSON value without the `TIMING_FIELDS` and ``latency_*`` metrics."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if k not in TIMING_FIELDS and not k.startswith("latency_")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


async def gate_once(where: tuple[Path, Path, str, str], redis: Redis, concurrent: bool
                    ) -> tuple[float, Any]:
    """Gate once with the sides at once or one after the other; return (wall s, report)."""
    head, base, head_sha, base_sha = where
    if sides is not None:
        sides.CONCURRENT_SIDES = concurrent
    ctx = EvalContext.of(redis=redis, namespace="bench", say=lambda _: None)
    started = time.perf_counter()
    report = await trees.gate_trees(head, base, head_sha=head_sha, base_sha=base_sha,
                                    evals=ctx)
    wall = time.perf_counter() - started
    if report.conclusion != "success":
        raise SystemExit(f"the gate concluded {report.conclusion}: {report.headline}")
    return wall, without_timings(to_jsonable(report))


async def main_async(args: argparse.Namespace) -> None:
    os.environ[KEY_ENV] = "bench-key"
    print(f"machine load average (1, 5, 15 min) at the start: {load_average()}")
    sizes = {"tickets": args.examples, "small": 6, "tiny": 6}
    modes = {"one after the other": False, "at once": True}
    if sides is None:
        modes = {"one after the other": False}  # a checkout before issue 19
    walls: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="llmgate-sides-") as tmp, \
            processes(Path(tmp), args.latency_ms) as (url, redis_url):
        llm.litellm_module()  # its import, once per worker process, is not timed
        where = checkouts(Path(tmp), url, sizes, args.concurrency)
        redis = Redis.from_url(redis_url)
        first: dict[str, Any] = {}
        try:
            await gate_once(where, redis, False)  # warm-up: imports, first connections
            for rep in range(args.repeat):
                names = list(modes)
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    for kind in ("cold", "warm"):
                        if kind == "cold":
                            await redis.flushall()
                        wall, report = await gate_once(where, redis, modes[name])
                        walls.setdefault((name, kind), []).append(wall)
                        if first.setdefault(kind, report) != report:
                            raise SystemExit(f"{name} {kind}: the report differs from the "
                                             "first run's (apart from timings)")
        finally:
            await redis.aclose()
    calls = 2 * sum(sizes.values())
    floor = calls * args.latency_ms / 1000 / args.concurrency
    print(f"gate: {calls} model calls cold over 2 sides, 3 suites ({args.examples}, 6, 6 "
          f"examples), concurrency {args.concurrency} for the whole gate, latency "
          f"{args.latency_ms:g} ms: floor {floor:.2f} s; {args.repeat} repetitions")
    median = {key: statistics.median(values) for key, values in walls.items()}
    for (name, kind), value in sorted(median.items()):
        runs = ", ".join(f"{w:.2f}" for w in walls[(name, kind)])
        print(f"{kind} {name}: median {value:.3f} s ({runs})")
    print("every report the same apart from timings: yes")
    print(f"machine load average (1, 5, 15 min) at the end: {load_average()}")
    if len(modes) == 2:
        cold = median[("at once", "cold")] / median[("one after the other", "cold")]
        warm = median[("at once", "warm")] / median[("one after the other", "warm")]
        print(f"gate_sides_cold_ratio={cold:.3f}")
        print(f"gate_sides_warm_ratio={warm:.3f}")
    else:
        print(f"gate_sides_warm_s={median[('one after the other', 'warm')]:.3f}")


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
