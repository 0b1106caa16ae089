"""Benchmark one sharded gate over 1 and 2 real worker processes, and a small PR behind a huge
one (issue 20).

Every part is a real process on loopback (`worker.cli.demo.Stack`): redis-server, the
schema-checking fake GitHub, the web process and N arq workers; the fake OpenAI-compatible
provider (``tests/fakes/fake_llm.py``) is one more process, with a fixed latency per call
(``--latency-ms``, 200 ms by default: it sleeps, so one process serves hundreds of calls at once).
The suite is I/O-bound: a model target whose answer a ``contains`` check scores (no judge),
``--examples`` (800) tickets on base and on head, whose prompts differ (so no answer of one side
serves the other, and both sides run at once). ``LLMGATE_SHARD_EXAMPLES`` (``--shard``, 50) cuts
each side into shards.

Settings, and why doubling the workers can double the throughput. Throughput is examples
answered per second by the fleet. A shard answers its examples ``settings.concurrency``
(``--concurrency``, 4) at a time, so one shard runs at most concurrency / latency calls a second
(20/s), whatever the worker. Each worker runs ``LLMGATE_MAX_JOBS`` (``--max-jobs``, 3) jobs at
once; the gate's own job holds one slot while it waits for its shards, so one worker runs at most
max_jobs - 1 = 2 shards: it is **slot-bound** (latency-bound, 40 calls/s, far from its CPU), not
CPU-bound. ``LLMGATE_SHARD_OUTSTANDING`` (``--outstanding``, default 2 x (max_jobs - 1) = 4) caps
the gate's shards queued or running at once; it is set to what two workers can run with the
same per-worker limit (2 shards each), so two workers run 4 shards at once and one runs 2: the
same concurrency per shard and the same shards per worker, twice the workers. (Left higher, the
second worker would also run the slot the gate's job holds on the first, 5 against 2, and the
ratio would flatter.) The fleet's calls stay far below what the two cores and the fake provider
serve (80 calls/s at 2 workers); the bench prints the machine's load average at the start and
the end, as other work shares the cores.

What it runs and prints, one fresh stack per case (fresh Redis: no cache, no stored baseline):

1. **Throughput**: the gate of one pull request (2 x ``--examples`` examples answered), by 1
   worker and by 2; each gate's wall (delivery to completed check run), its shard span (first
   shard's start to last shard's end, from arq's stored job results) and the examples answered
   per second over each. ``shard_throughput_2w_vs_1w`` is wall(1 worker) / wall(2 workers) of
   the same gate (goal >= 1.8); the span ratio beside it leaves the gate's fixed work out.
2. **4 workers on paper**: each shard's measured duration (arq's start and finish times) of the
   1-worker run plus its hand-over (the 1-worker span's idle slot time shared out per shard:
   the gate's 0.1 s poll, arq's pick-up), list-scheduled in the order they ran onto 2 x W slots
   (W workers, 2 shards each, outstanding 2 x W: the settings above, scaled), plus the gate's
   fixed work: its 1-worker wall minus the same model's 1-worker makespan (delivery, checkouts,
   estimate, scoring, check run). The model's 2-worker figure is printed beside the measured one as
   its check; 4 / 1 is the model's wall(1) / wall(4) (goal >= 3.4). It assumes shard durations
   do not grow with more workers (no shared CPU limit: true while the fleet is latency-bound).
3. **Fairness** (2 workers): the latency of a small pull request's gate (``--small``, 20
   examples, below the shard size: its own job answers it) alone, and delivered ``--behind`` (2)
   seconds after a huge one's (``--huge``, 800 examples a side); both, and their ratio. The
   huge gate keeps at most ``--outstanding`` shards queued or running, so the small gate's job
   finds a free slot at once instead of waiting for the huge gate's shards in arq's queue (first
   in, first out).

    python bench/shard_throughput.py
    python bench/shard_throughput.py --examples 800 --latency-ms 100 --concurrency 8
    python bench/shard_throughput.py --keep /tmp/sb   # keep every process's log

How to read it: a 2w/1w ratio well below 2 with a span ratio near 2 is the gate's fixed work
(raise ``--examples``); a span ratio below 2 means the shards themselves slowed (look at the
per-worker shard counts, the load average, the shard durations of each run). Table columns:
``mean`` is the shards running at once on average (their durations over the span: <= the cap),
``most`` the peak (a shard whose result is written may overlap the next by a moment before arq
records its finish). The last line is
``shard_throughput_2w_vs_1w=<ratio>``.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import psutil
import redis
from arq.jobs import deserialize_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_services import in_folder, load_average, wait_for  # noqa: E402
from tests.e2e.model_support import KEY_ENV, build_support_repo  # noqa: E402
from tests.unit.worker_support import commit  # noqa: E402
from worker.cli.demo import Stack, pull_request_payload  # noqa: E402
from worker.contract import WORKERS_KEY  # noqa: E402

OWNER = "acme"


@dataclass(frozen=True)
class Shard:
    """One shard job's run: arq's start and finish (epoch seconds), its examples, its worker."""

    key: str
    start_s: float
    end_s: float
    examples: int
    worker: str

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class GateRun:
    """One gate's wall (delivery to completed check run, seconds), conclusion, shards and the
    CPU seconds each process spent meanwhile."""

    wall_s: float
    conclusion: str
    shards: list[Shard]
    cpu_s: dict[str, float]

    @property
    def span_s(self) -> float:
        return max(s.end_s for s in self.shards) - min(s.start_s for s in self.shards)

    @property
    def examples(self) -> int:
        return sum(s.examples for s in self.shards)


def config(url: str, concurrency: int) -> str:
    """Return ``.llmgate.yml``: one suite, a model target at ``url``, a ``contains`` check."""
    return f"""\
version: 1
settings: {{concurrency: {concurrency}, timeout: 30}}
suites:
  - name: tickets
    dataset: evals/tickets.jsonl
    target: {{model: openai/bench-model, prompt: prompts/support.txt, api_base: "{url}",
              api_key_env: {KEY_ENV}}}
    assertions: [{{type: contains, value: ticket}}]
    gate: {{pass_rate: {{max_drop: 0.1}}}}
"""


def build_repo(dest: Path, url: str, examples: int, concurrency: int) -> tuple[str, str]:
    """Build a repository of ``examples`` tickets; return (base SHA, head SHA: a new prompt).

    The tickets name the repository, so no two repositories share a commit (or a check run)."""
    tickets = [f"{dest.name} ticket number {i}" for i in range(examples)]
    base = build_support_repo(dest, config(url, concurrency), "Be kind. {{ input }}", tickets)
    return base, commit(dest, "pr/brief", {"prompts/support.txt": "Be brief. {{ input }}\n"})


def start_gate(stack: Stack, repo: Path, shas: tuple[str, str], number: int) -> float:
    """Open pull request ``number`` of ``repo`` (base -> head) and deliver it; return when."""
    base, head = shas
    clone_url = repo.as_uri()
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": OWNER, "repo": repo.name, "number": number, "head_sha": head,
        "base_sha": base, "base_ref": "main", "head_ref": f"pr{number}",
        "clone_url": clone_url}]})
    payload = pull_request_payload("opened", owner=OWNER, repo=repo.name, clone_url=clone_url,
                                   number=number, head_sha=head, base_sha=base)
    started = time.monotonic()
    if stack.deliver("pull_request", payload).status_code >= 300:
        raise SystemExit("the web process refused a delivery")
    return started


def finish_gate(stack: Stack, head: str, started: float) -> tuple[float, str]:
    """Wait for the check run on ``head``; return (wall s since ``started``, conclusion)."""
    run = stack.wait_for_check(head, timeout_s=900)[-1]
    return time.monotonic() - started, str(run["conclusion"])


def shard_runs(stack: Stack, skip: frozenset[str] = frozenset()) -> list[Shard]:
    """Return every shard job's run on the stack but those of ``skip`` (keys): arq's stored
    result (start, finish) and the worker whose log says it answered it."""
    client = redis.Redis.from_url(stack.redis_url)
    workers: dict[str, str] = {}
    for log in stack.workdir.glob("worker-*.log"):
        for key in re.findall(r"shard (llmgate:shard:[0-9a-f]+:\d+): answered", log.read_text()):
            workers[key] = log.stem
    out = []
    for raw in client.scan_iter("llmgate:shard:*:work"):
        key = raw.decode()[:-len(":work")]
        if key in skip:
            continue
        result = cast(bytes | None, client.get(f"arq:result:{key}:job"))
        if result is None:
            raise SystemExit(f"{key}: no arq result stored")
        info = deserialize_result(result)
        examples = len(json.loads(cast(bytes | None, client.get(raw)) or b"{}")["examples"])
        out.append(Shard(key, info.start_time.timestamp(), info.finish_time.timestamp(),
                         examples, workers.get(key, "?")))
    client.close()
    return sorted(out, key=lambda s: s.start_s)


def wait_ready(stack: Stack, workers: int, timeout_s: float = 120) -> None:
    """Wait until every worker has started (litellm loaded: its metrics heartbeat is in Redis,
    `worker.contract.WORKERS_KEY`, written once its start-up hook ended)."""
    client = redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + timeout_s
    try:
        while cast(int, client.hlen(WORKERS_KEY)) < workers:
            if time.monotonic() > deadline:
                raise SystemExit("the workers did not start (see worker-*.log)")
            time.sleep(0.2)
    finally:
        client.close()


def processes(stack: Stack, fake_pid: int) -> dict[str, int]:
    """Return the stack's processes by name (Stack starts redis, github, web, then workers)."""
    names = ["redis", "github", "web", *(f"worker-{i}" for i in range(stack.workers))]
    return {"fake-llm": fake_pid, **{n: p.pid for n, p in zip(names, stack.procs, strict=True)}}


def cpu_times(pids: dict[str, int]) -> dict[str, float]:
    """Return each process's CPU seconds so far (user + system, with its waited-for children:
    a worker's git)."""
    out = {}
    for name, pid in pids.items():
        t = psutil.Process(pid).cpu_times()
        out[name] = t.user + t.system + t.children_user + t.children_system
    return out


def worker_env(args: argparse.Namespace) -> dict[str, str]:
    """Return the workers' environment: the shard settings of the module docstring."""
    return {KEY_ENV: "sk-bench-fake", "LLMGATE_SHARD_EXAMPLES": str(args.shard),
            "LLMGATE_SHARD_OUTSTANDING": str(args.outstanding),
            "LLMGATE_MAX_JOBS": str(args.max_jobs),
            # the gate's job answering a shard no worker took (its deadlock guard) would give
            # 1 worker a third shard slot that 2 workers never need: off, like with like
            "LLMGATE_SHARD_WAIT_S": "3600"}


def gate_alone(work: Path, repo: Path, shas: tuple[str, str], workers: int,
               args: argparse.Namespace, warm: tuple[Path, tuple[str, str]]) -> GateRun:
    """Gate ``repo``'s pull request on a fresh stack of ``workers`` workers, after a warm-up
    gate (``warm``: sharded over every worker, so each has made its first calls, as the
    fairness case's stack has before its huge gate)."""
    work.mkdir()
    with Stack(work, workers=workers, worker_env=worker_env(args)) as stack:
        wait_ready(stack, workers)
        finish_gate(stack, warm[1][1], start_gate(stack, *warm, 2))
        warmed = frozenset(s.key for s in shard_runs(stack))
        pids = processes(stack, args.fake_pid)
        before = cpu_times(pids)
        wall_s, conclusion = finish_gate(stack, shas[1], start_gate(stack, repo, shas, 1))
        after = cpu_times(pids)
        return GateRun(wall_s, conclusion, shard_runs(stack, warmed),
                       {n: after[n] - before[n] for n in pids})


def fairness(work: Path, repos: dict[str, tuple[Path, tuple[str, str]]],
             args: argparse.Namespace) -> tuple[float, float, GateRun]:
    """Return the small gate's latency alone and behind the huge one (2 workers), and the
    huge gate's run."""
    work.mkdir()
    with Stack(work, workers=2, worker_env=worker_env(args)) as stack:
        wait_ready(stack, 2)
        pids = processes(stack, args.fake_pid)
        alone_s, _ = finish_gate(stack, repos["small"][1][1],
                                 start_gate(stack, *repos["small"], 1))
        before = cpu_times(pids)
        huge_started = start_gate(stack, *repos["huge"], 1)
        time.sleep(args.behind)
        behind_s, _ = finish_gate(stack, repos["small2"][1][1],
                                  start_gate(stack, *repos["small2"], 1))
        huge_s, conclusion = finish_gate(stack, repos["huge"][1][1], huge_started)
        after = cpu_times(pids)
        return alone_s, behind_s, GateRun(huge_s, conclusion, shard_runs(stack),
                                          {n: after[n] - before[n] for n in pids})


def makespan(durations: list[float], slots: int) -> float:
    """Return the end of list scheduling ``durations`` in order onto ``slots`` slots."""
    free = [0.0] * slots
    for duration in durations:
        heapq.heapreplace(free, free[0] + duration)
    return max(free)


def start_fake_llm(work: Path, latency_ms: float) -> subprocess.Popen[bytes]:
    """Start the fake provider as its own process; return it (its URL is in fake-llm.json)."""
    ready = work / "fake-llm.json"
    log = (work / "fake-llm.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.fake_llm", "--port", "0",
                             "--ready-file", str(ready), "--latency-ms", str(latency_ms)],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    wait_for(ready, proc, "the fake provider")
    return proc


def describe(name: str, run: GateRun) -> str:
    """Return one table row of a gate run."""
    per_worker = Counter(s.worker for s in run.shards)
    durations = [s.duration_s for s in run.shards]
    return (f"{name:<10} {run.wall_s:8.2f} {run.span_s:8.2f} {run.examples / run.wall_s:9.1f} "
            f"{run.examples / run.span_s:9.1f} {len(run.shards):6d} "
            f"{statistics.median(durations):7.2f} {sum(durations) / run.span_s:5.1f} "
            f"{max_overlap(run.shards):5d}  "
            f"{dict(sorted(per_worker.items()))}  {run.conclusion}")


def max_overlap(shards: list[Shard], slack_s: float = 0.25) -> int:
    """Return the most shards that ran at once, each counted until ``slack_s`` before arq's
    finish time: a shard's result is written (and the gate enqueues the next) just before its
    job function returns and arq records the finish, so the next may start a moment earlier."""
    events = sorted([(s.start_s, 1) for s in shards] +
                    [(max(s.start_s, s.end_s - slack_s), -1) for s in shards])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def run(args: argparse.Namespace, work: Path) -> float:
    """Run the three cases in ``work``; print the table and figures; return 2w/1w."""
    fake = start_fake_llm(work, args.latency_ms)
    args.fake_pid = fake.pid
    try:
        url = json.loads((work / "fake-llm.json").read_text())["url"]
        big = work / "gate"
        shas = build_repo(big, url, args.examples, args.concurrency)
        warm = (work / "warm", build_repo(work / "warm", url, 4 * args.shard, args.concurrency))
        one = gate_alone(work / "one", big, shas, 1, args, warm)
        two = gate_alone(work / "two", big, shas, 2, args, warm)
        repos = {name: (work / name, build_repo(work / name, url, size, args.concurrency))
                 for name, size in (("small", args.small), ("small2", args.small),
                                    ("huge", args.huge))}
        alone_s, behind_s, huge = fairness(work / "fair", repos, args)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    print(f"{'case':<10} {'wall s':>8} {'span s':>8} {'ex/s wall':>9} {'ex/s span':>9} "
          f"{'shards':>6} {'med s':>7} {'mean':>5} {'most':>5}  shards per worker  conclusion")
    cases = (("1 worker", one), ("2 workers", two), ("huge (2w)", huge))
    for name, gate in cases:
        print(describe(name, gate))
    for name, gate in cases:
        cpu = ", ".join(f"{n} {s:.1f}" for n, s in gate.cpu_s.items() if s >= 0.05)
        print(f"CPU s during the {name} gate ({gate.wall_s:.1f} s): {cpu}")
    ratio = one.wall_s / two.wall_s
    print(f"throughput 2w/1w: wall {ratio:.2f}, shard span {one.span_s / two.span_s:.2f} "
          "(goal >= 1.8)")
    paper(one, two, args)
    print(f"small PR ({args.small} examples, 2 workers): alone {alone_s:.2f} s, delivered "
          f"{args.behind:g} s after the huge PR's ({args.huge} examples a side) "
          f"{behind_s:.2f} s: ratio {behind_s / alone_s:.2f}; the huge gate took "
          f"{huge.wall_s:.2f} s")
    return ratio


def paper(one: GateRun, two: GateRun, args: argparse.Namespace) -> None:
    """Print the list-scheduling model's walls for 1, 2 and 4 workers (module docstring)."""
    per_worker = args.max_jobs - 1
    durations = [s.duration_s for s in one.shards]
    # the 1-worker span's idle slot time, shared out per shard: the hand-over from one shard to
    # the next (the gate's poll, arq's pick-up), which scales with the shards, not the gate
    gap_s = max(0.0, (one.span_s * per_worker - sum(durations)) / len(durations))
    shards_s = [d + gap_s for d in durations]
    fixed_s = one.wall_s - makespan(shards_s, per_worker)
    model = {w: fixed_s + makespan(shards_s, per_worker * w) for w in (1, 2, 4)}
    print(f"model: fixed gate work {fixed_s:.2f} s + the 1-worker shard durations (+ {gap_s:.2f} s "
          f"hand-over each) list-scheduled on {per_worker} slots a worker: 1w {model[1]:.2f} s, "
          f"2w {model[2]:.2f} s (measured {two.wall_s:.2f} s), 4w {model[4]:.2f} s")
    print(f"on paper 4w/1w: {model[1] / model[4]:.2f} (goal >= 3.4); 2w/1w "
          f"{model[1] / model[2]:.2f}")


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=800, help="a side, throughput gate")
    parser.add_argument("--shard", type=int, default=50, help="LLMGATE_SHARD_EXAMPLES")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="per call")
    parser.add_argument("--concurrency", type=int, default=4, help="calls at once a shard")
    parser.add_argument("--max-jobs", type=int, default=3, help="LLMGATE_MAX_JOBS (>= 2)")
    parser.add_argument("--outstanding", type=int, default=0,
                        help="LLMGATE_SHARD_OUTSTANDING (0: 2 x (max-jobs - 1))")
    parser.add_argument("--small", type=int, default=20, help="examples, fairness's small PR")
    parser.add_argument("--huge", type=int, default=800, help="examples, fairness's huge PR")
    parser.add_argument("--behind", type=float, default=2.0,
                        help="seconds from the huge PR's delivery to the small one's")
    parser.add_argument("--keep", type=Path, default=None,
                        help="run in this (new) folder and keep it: every process's log")
    args = parser.parse_args(argv)
    if args.max_jobs < 2:
        parser.error("--max-jobs must be >= 2: the gate's job holds a slot")
    args.outstanding = args.outstanding or 2 * (args.max_jobs - 1)
    os.environ.setdefault(KEY_ENV, "sk-bench-fake")
    print(f"machine load average (1, 5, 15 min) at the start: {load_average()}")
    began = time.monotonic()
    ratio = in_folder(args.keep, "llmgate-shards-", lambda folder: run(args, folder))
    print(f"settings: {args.examples} examples a side in shards of {args.shard}, latency "
          f"{args.latency_ms:g} ms, concurrency {args.concurrency} a shard, LLMGATE_MAX_JOBS "
          f"{args.max_jobs}, LLMGATE_SHARD_OUTSTANDING {args.outstanding}; bench "
          f"{time.monotonic() - began:.0f} s")
    print(f"machine load average (1, 5, 15 min) at the end: {load_average()}")
    print(f"shard_throughput_2w_vs_1w={ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
