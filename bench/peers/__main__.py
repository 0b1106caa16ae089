"""Side by side: llmgate, llmci and promptfoo on the same job, each as a whole process.

The job (bench/peers/jobs.py): 200 support tickets, one model call each, against one local fake
OpenAI-compatible provider (tests/fakes/fake_llm.py, its own process) that answers every call
after 100 ms, at concurrency 10 in every tool. The floor of one side is 200 x 0.1 s / 10 = 2.0 s;
of a base + head gate (400 calls) 4.0 s. Each repetition runs, tool after tool in an order that
rotates from one repetition to the next:

- **cold**: one side with an empty response cache, as a new process (the OS's file cache is
  warm: an untimed warm-up run of each tool on a 5-ticket job comes first);
- **warm**: the same command again at once, every answer from the response cache (llmgate's
  in the bench's redis-server; the peers' on disk);
- **gate**: base + head with an empty cache (llmgate: ``llmgate run --base``; a peer: two runs,
  base then head);
- ``llmgate --version`` and ``llmgate --help``.

Each command is measured as a process tree (bench/peers/tree.py): wall time until it exits, CPU
of every process of its tree once reaped (the bench is their subreaper, so processes that
outlive the command are counted too), the peak of the tree's summed RSS (sampled every 0.1 s;
not a cgroup's), and how many of its processes outlived it. Every run is checked: exit code 0,
the fake provider's count of calls (200 cold, 0 warm, 400 for a gate), and the tool's own report
of all examples passed. A check that fails stops the bench.

The peers are optional (``--install`` puts llmci in a venv and promptfoo in node_modules under
bench/.peers/, git-ignored). A peer that is not installed is compared with its figures in
bench/peers/recorded.json (``--record`` writes them), and the output says so. The machine has 2
cores shared with other work: the load average is printed at the start and the end.

    python -m bench.peers                   # 9 interleaved repetitions
    python -m bench.peers --repeat 3        # fewer
    python -m bench.peers --install --record
    python -m bench.peers --only rate-limited --repeat 3

Each repetition ends with the **rate-limited** row (issue 29; bench/peers/limited.py): one side
cold again, with the fake provider allowing 20 requests/s (429 with ``retry-after-ms`` beyond
it), floor 10 s. Its checks differ: the fake's admitted calls are counted (200) and its 429s
reported; a peer that loses examples is reported as such, while llmgate must answer every
example and decide (exit 0 or 1), else the bench stops. ``--only rate-limited`` runs this
row alone.

The last line is ``peers_cold_wall_vs_promptfoo=<llmgate's median cold wall / promptfoo's>``;
with ``--only rate-limited``, ``peers_rate_limited_wall_vs_fastest_peer=<llmgate's median wall /
that of the fastest peer that answered every example in every repetition>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis

from bench.local_services import load_average, processes
from bench.peers import jobs, limited, parse, table, tools
from bench.peers.tree import SAMPLE_INTERVAL_S, TreeRun, become_subreaper, measure

PEERS = ("llmci", "promptfoo")
#: The name of llmgate run from ``--before``'s checkout (a column of the table, like a peer).
BEFORE = "llmgate-before"
#: How `BEFORE` is started: the CLI's ``main`` of whichever ``worker`` PYTHONPATH names
#: (``python -P``: the working directory is not put first on the path).
BEFORE_MAIN = "import sys; from worker.cli.main import main; sys.exit(main())"
#: The fake provider's latency per call, milliseconds (default).
LATENCY_MS = 100.0
#: Tickets of the untimed warm-up run.
WARMUP_EXAMPLES = 5


class Fake:
    """Control of the fake provider over its HTTP control endpoints."""

    def __init__(self, api_base: str) -> None:
        self.root = api_base.removesuffix("/v1")

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.root + path, data=data,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # loopback only
            return json.loads(response.read() or b"null")

    def setup(self, config: dict[str, Any]) -> None:
        """Merge ``config`` into the fake's (see tests/fakes/fake_llm.py)."""
        self._call("/_fake/setup", config)

    def reset(self) -> None:
        """Forget the calls recorded so far."""
        self._call("/_fake/reset", {})

    def chat_calls(self) -> int:
        """Return the chat calls answered since the last reset."""
        return sum(1 for c in self._call("/_fake/state")["calls"] if c["path"] == "chat")

    def chat_counts(self) -> limited.Counts:
        """Return the chat requests received since the last reset, how many were refused (429),
        and the seconds from the first request to the last admitted one's answer."""
        state = self._call("/_fake/state")
        calls = [c for c in state["calls"] if c["path"] == "chat"]
        admitted = [c["t"] for c in calls if c["status"] != 429]
        latency_s = float(state["config"].get("latency_ms") or 0) / 1000
        span_s = max(admitted) + latency_s - calls[0]["t"] if admitted else 0.0
        return limited.Counts(len(calls), sum(1 for c in calls if c["status"] == 429), span_s)


@dataclass
class Bench:
    """The tools, the job and every measured run (``runs[tool][kind]``, one per repetition;
    the rate-limited row's in ``limited[tool]``)."""

    fake: Fake
    job: jobs.Job
    logs: Path
    runs: dict[str, dict[str, list[TreeRun]]] = field(default_factory=dict)
    limited: dict[str, list[limited.LimitedRun]] = field(default_factory=dict)

    def run(self, tool: tools.Tool, commands: Sequence[tools.Invocation], kind: str,
            calls: int, sides: int = 1) -> TreeRun:
        """Measure ``commands`` one after another as one run of ``tool``, check each, and
        record it under ``kind``.

        Args:
            tool: the tool.
            commands: its commands (a peer's gate has two).
            kind: where the run is recorded.
            calls: provider calls all the commands should send together.
            sides: sides each command's report must show whole (0: no report to check).

        Raises:
            SystemExit: a command failed, or did not do the whole job.
        """
        run = table.combine([self._one(tool, command, calls // len(commands), sides)
                             for command in commands])
        self.runs.setdefault(tool.name, {}).setdefault(kind, []).append(run)
        return run

    def _one(self, tool: tools.Tool, command: tools.Invocation, calls: int,
             sides: int) -> TreeRun:
        self.fake.reset()
        log_path = self.logs / f"{tool.name.split()[0]}.log"
        with log_path.open("wb") as log:
            run = measure(command.argv, cwd=command.cwd, env=command.env, log=log)
        output = log_path.read_text(encoding="utf-8", errors="replace")
        sent = self.fake.chat_calls()
        problem = (f"exit code {run.exit_code}" if run.exit_code != 0 else
                   f"{sent} provider calls, expected {calls}" if sent != calls else
                   parse.whole_job(tool.name, output, self.job.examples, sides) if sides
                   else None)
        if problem:
            raise SystemExit(f"{tool.name}: {' '.join(command.argv)}: {problem}\n"
                             f"{output[-3000:]}")
        return run


def build_tools(root: Path, job: jobs.Job, redis_url: str, peers: bool,
                before: Path | None = None) -> list[tools.Tool]:
    """Write the job for every tool under ``root``; return llmgate, (``before``) llmgate run
    from another checkout's code as `BEFORE`, and (``peers``) each installed peer."""
    redis = Redis.from_url(redis_url)

    def flush() -> None:
        redis.flushall()

    base_sha = jobs.write_llmgate(root / "llmgate", job)
    found = [tools.llmgate_tool(root / "llmgate", base_sha, redis_url, flush)]
    if before is not None:  # the venv's Python, importing ``worker`` from ``before``
        # Not the console script: it names this checkout's entry point (worker.cli.entry),
        # which older checkouts lack; every version has had ``worker.cli.main``.
        old = tools.llmgate_tool(root / "llmgate", base_sha, redis_url, flush,
                                 (sys.executable, "-P", "-c", BEFORE_MAIN),
                                 PYTHONPATH=str(before.resolve()))
        found.append(dataclasses.replace(old, name=BEFORE, version=f"{old.version} ({before})"))
    if peers and tools.llmci_bin().exists():
        jobs.write_llmci(root / "llmci", job)
        found.append(tools.llmci_tool(root / "llmci"))
    if peers and tools.promptfoo_bin().exists():
        jobs.write_promptfoo(root / "promptfoo", job)
        found.append(tools.promptfoo_tool(root / "promptfoo"))
    return found


def rotated(items: Sequence[tools.Tool], by: int) -> list[tools.Tool]:
    """Return ``items`` started at ``by`` (mod their count), so no tool always runs first."""
    shift = by % len(items)
    return [*items[shift:], *items[:shift]]


def repetition(bench: Bench, every: Sequence[tools.Tool], rep: int) -> None:
    """Run one repetition: each tool cold then warm, then each gate, then --version/--help,
    then the rate-limited row."""
    examples = bench.job.examples
    for tool in rotated(every, rep):
        tool.clear()
        bench.run(tool, (tool.cold,), "cold", examples)
        bench.run(tool, (tool.cold,), "warm", 0)
    for tool in rotated(every, rep):
        tool.clear()
        both = len(tool.gate) == 1  # llmgate: one command runs base and head
        bench.run(tool, tool.gate, "gate", 2 * examples, sides=2 if both else 1)
    llmgate = every[0]
    for flag in ("--version", "--help"):
        command = tools.Invocation((llmgate.cold.argv[0], flag), llmgate.folder,
                                   llmgate.cold.env)
        bench.run(llmgate, (command,), flag, 0, sides=0)
    limited_repetition(bench, every, rep)


def limited_repetition(bench: Bench, every: Sequence[tools.Tool], rep: int) -> None:
    """Run the rate-limited row once for each tool (bench/peers/limited.py)."""
    limited.repetition(bench.fake, rotated(every, rep), bench.job.examples, bench.logs,
                       bench.limited)


def warm_up(fake: Fake, root: Path, api_base: str, args: argparse.Namespace,
            redis_url: str) -> None:
    """Run each tool once on a small job (untimed): the OS caches their files, and a broken
    install fails here, before minutes are spent."""
    small = jobs.Job(api_base, WARMUP_EXAMPLES, args.concurrency)
    bench = Bench(fake, small, root)
    for tool in build_tools(root, small, redis_url, not args.without_peers, args.before):
        tool.clear()
        bench.run(tool, (tool.cold,), "warm-up", WARMUP_EXAMPLES)


def machine() -> str:
    """Return one line naming this machine: CPU model, cores, memory, kernel."""
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "?")
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{model}, {len(os.sched_getaffinity(0))} usable cores, {memory_gb:.0f} GiB, "
            f"Linux {platform.release()}")


def node_version() -> str:
    """Return ``node --version``, or ``"none"``."""
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True,
                              timeout=30).stdout.strip() or "none"
    except OSError:
        return "none"


def collect(bench: Bench, every: Sequence[tools.Tool], args: argparse.Namespace) -> tuple[
        dict[str, table.Figures], dict[str, str], list[str]]:
    """Return each tool's figures (a peer not measured: its recorded ones, marked ``(r)``), the
    marks, and notes saying where each peer's figures come from. With ``--only rate-limited``
    the figures are that row's alone."""
    figs: dict[str, table.Figures] = {} if args.only else {
        t.name: table.figures(bench.runs[t.name]["cold"], bench.runs[t.name].get("warm", []),
                              bench.runs[t.name].get("gate", [])) for t in every}
    for name, runs in bench.limited.items():
        figs.setdefault(name, {}).update(limited.figures(runs))
    marks: dict[str, str] = {}
    notes = [f"{t.name}: {t.version}, measured in this run" for t in every]
    recorded = table.load_recorded()
    absent = "not run (--without-peers)" if args.without_peers else "NOT INSTALLED (--install)"
    needed = "limited_wall_s" if args.only else "cold_wall_s"
    for peer in PEERS:
        if peer in figs:
            continue
        found = recorded and table.recorded_figures(recorded, peer)
        if recorded and found and needed in found:
            figs[peer], marks[peer] = found, " (r)"
            notes.append(f"{peer}: {absent}; compared with its figures recorded on "
                         f"{recorded.date} on {recorded.machine}, {recorded.load} (bench/peers/"
                         f"{table.RECORDED.name}, {recorded.tools[peer].get('version')})")
        else:
            notes.append(f"{peer}: {absent}, and no recorded figures: no comparison")
    measured = [t for t in every if t.name in PEERS]
    if args.record and measured:
        save_record(figs, measured, bench.job, args, len(bench.runs["llmgate"]["cold"]))
        notes.append(f"recorded the medians of {', '.join(t.name for t in measured)} in "
                     f"bench/peers/{table.RECORDED.name}")
    return figs, marks, notes


def save_record(figs: dict[str, table.Figures], peers: Sequence[tools.Tool], job: jobs.Job,
                args: argparse.Namespace, repetitions: int) -> None:
    """Write the medians of the ``peers`` measured to bench/peers/recorded.json."""
    measured: dict[str, dict[str, float | str]] = {
        p.name: {**table.medians(figs[p.name]), "version": p.version} for p in peers}
    load = f"1-minute load average {args.load_at_start:.1f} at the start, " \
           f"{os.getloadavg()[0]:.1f} at the end"
    table.save_recorded(table.Recorded(
        machine=machine(), date=datetime.date.today().isoformat(), load=load,
        job={"examples": job.examples, "concurrency": job.concurrency,
             "latency_ms": args.latency_ms, "repetitions": repetitions}, tools=measured))


def goals(bench: Bench, figs: dict[str, table.Figures]) -> list[str]:
    """Return the lines of the issue's goals for later: start-up, what outlives a run, and the
    sampled CPU as a check of the reaped figure."""
    start = {flag: table.median([r.wall_s for r in bench.runs["llmgate"][flag]])
             for flag in ("--version", "--help")}
    lines = [f"- llmgate --version {start['--version']:.3f} s, --help {start['--help']:.3f} s "
             "(median wall; goal <= 0.15 s)"]
    for name, fig in figs.items():
        if name in bench.runs:
            kinds = bench.runs[name]
            lines.append(f"- {name}: at most {fig['outlived'][0]:.0f} processes outlived a "
                         f"command (goal 0), the last ending {fig['linger_s'][0]:.2f} s after "
                         f"it; tree of a cold run: {table.labels_text(kinds['cold'])}; of a "
                         f"gate: {table.labels_text(kinds.get('gate', []))}; CPU sampled by "
                         f"psutil ÷ reaped: {table.ratio(fig['sampled_cpu_s'], fig['cpu_s'])}")
    return lines


def report(bench: Bench, every: Sequence[tools.Tool], args: argparse.Namespace,
           started: float) -> None:
    """Print the tables, the goals for later, the load, the wall time and the headline."""
    figs, marks, notes = collect(bench, every, args)
    if args.only:
        limited_report(bench, figs, marks, notes, args, started)
        return
    floor_s = args.examples * args.latency_ms / 1000 / args.concurrency
    peers = [p for p in (*PEERS, BEFORE) if p in figs]
    print("\n## Side by side (medians; [range of the ratios of single repetitions]; "
          "(r) recorded)\n")
    print("\n".join(table.issue_table(figs, peers, floor_s, 2 * floor_s, 2 * args.examples)))
    print(f"\nfloor {floor_s:.1f} s one side, {2 * floor_s:.1f} s the gate; "
          f"{len(bench.runs['llmgate']['cold'])} repetitions\n")
    print("\n".join(table.absolute_table(figs, marks)))
    if any("limited_wall_s" in f for f in figs.values()):
        print("\n".join(limited_section(bench, figs, marks, args)))
    print("\n## Goals for later\n")
    print("\n".join(goals(bench, figs)))
    print("\n" + "\n".join(f"- {note}" for note in notes))
    print(f"\nload average (1, 5, 15 min) at the end: {load_average()}; bench process CPU "
          f"(sampler included) {time.process_time():.1f} s; bench wall "
          f"{time.perf_counter() - started:.0f} s")
    headline = table.median(figs["promptfoo"]["cold_wall_s"]) if "promptfoo" in figs else None
    ours = table.median(figs["llmgate"]["cold_wall_s"])
    value = f"{ours / headline:.3f}" if headline and ours else "nan"
    print(f"peers_cold_wall_vs_promptfoo={value}")


def limited_section(bench: Bench, figs: dict[str, table.Figures], marks: dict[str, str],
                    args: argparse.Namespace) -> list[str]:
    """Return the rate-limited row's heading, table and ratio to the fastest whole peer."""
    repetitions = max((len(runs) for runs in bench.limited.values()), default=0)
    notes = {name: [f"run {i + 1}: {r.note}" for i, r in enumerate(runs) if r.note]
             for name, runs in bench.limited.items()}
    fastest = limited.fastest_whole_peer(figs, PEERS, args.examples)
    return [f"\n## Rate-limited provider ({limited.RPS:.0f} requests/s, burst "
            f"{limited.RATE_LIMIT['request_burst']}, 429 with retry-after-ms): one side cold, "
            f"{args.examples} calls, concurrency {args.concurrency}, floor "
            f"{limited.floor_s(args.examples):.1f} s; {repetitions} repetition(s); medians "
            "[lowest–highest]; (r) recorded\n",
            *limited.lines(figs, marks, args.examples, notes),
            f"- the fastest peer that answered every example: {fastest or 'none'}; "
            + limited.headline(figs, PEERS, args.examples)]


def limited_report(bench: Bench, figs: dict[str, table.Figures], marks: dict[str, str],
                   notes: Sequence[str], args: argparse.Namespace, started: float) -> None:
    """Print the rate-limited row alone (``--only rate-limited``), its headline last."""
    print("\n".join(limited_section(bench, figs, marks, args)))
    print("\n" + "\n".join(f"- {note}" for note in notes))
    print(f"\nload average (1, 5, 15 min) at the end: {load_average()}; bench wall "
          f"{time.perf_counter() - started:.0f} s")
    print(limited.headline(figs, PEERS, args.examples))


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.peers",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=LATENCY_MS)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--install", action="store_true",
                        help="install llmci and promptfoo under bench/.peers/ first")
    parser.add_argument("--without-peers", action="store_true",
                        help="run llmgate alone, against the recorded peer figures")
    parser.add_argument("--record", action="store_true",
                        help="write the peers' medians to bench/peers/recorded.json")
    parser.add_argument("--before", type=Path, default=None, metavar="CHECKOUT",
                        help=f"also run llmgate from CHECKOUT's code (e.g. main) as {BEFORE}: "
                             f"the table's 'llmgate ÷ {BEFORE}' column is after ÷ before")
    parser.add_argument("--only", choices=(limited.NAME,), default=None,
                        help="run only this row (with the untimed warm-up first)")
    args = parser.parse_args(argv)
    if args.only and args.record:
        parser.error("--record keeps the figures of every row: run it without --only")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the side-by-side benchmark and print its figures (see the module docstring)."""
    args = _args(argv)
    if args.install:
        tools.install_peers()
    started = time.perf_counter()
    print(f"machine: {machine()}; Python {platform.python_version()}, node {node_version()}")
    print(f"load average (1, 5, 15 min) at the start: {load_average()}")
    args.load_at_start = os.getloadavg()[0]
    whole = ("" if become_subreaper() else
             " (NOT a subreaper here: CPU of processes outliving a command is missed)")
    print(f"CPU: each command's tree, reaped (getrusage RUSAGE_CHILDREN){whole}; memory: the "
          f"peak of the tree's summed RSS, sampled every {SAMPLE_INTERVAL_S} s (psutil; no "
          "cgroup of our own)")
    with tempfile.TemporaryDirectory(prefix="llmgate-peers-") as tmp, \
            processes(Path(tmp), args.latency_ms) as (url, redis_url):
        fake = Fake(url)
        fake.setup({"default_reply": jobs.REPLY})
        warm_up(fake, Path(tmp) / "warm-up", url, args, redis_url)
        job = jobs.Job(url, args.examples, args.concurrency)
        every = build_tools(Path(tmp) / "job", job, redis_url, not args.without_peers,
                            args.before)
        print("tools: " + "; ".join(t.version if t.version.startswith(t.name) else
                                    f"{t.name} {t.version}" for t in every))
        bench = Bench(fake, job, Path(tmp))
        for rep in range(args.repeat):
            began = time.perf_counter()
            if args.only:
                limited_repetition(bench, every, rep)
            else:
                repetition(bench, every, rep)
            print(f"repetition {rep + 1}/{args.repeat}: {time.perf_counter() - began:.0f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    report(bench, every, args, started)


if __name__ == "__main__":
    main()
