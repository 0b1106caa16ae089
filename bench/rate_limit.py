"""Benchmark pacing model calls to a provider's quota (issue 29): the calls' span against N / R.

A provider allows R requests a second (a token bucket: full at first, R per second); llmgate
learns that rate from its answers (worker/evals/llm/pace.py) and should send its N calls in
about N / R seconds, with few refusals (429) and no example lost. The bench starts the fake
OpenAI-compatible provider (``tests/fakes/fake_llm.py``, its own process, a fixed latency per
answer, ``--latency-ms``: 100 ms) and a ``redis-server`` (bench/local_services.py), writes a git
repository in a temporary folder with one suite of ``--calls`` (N, 400) examples, each with its
own prompt (a model target on the fake, ``settings.concurrency`` ``--concurrency`` (10), a
``contains`` check every answer passes), and runs ``python -m worker.cli run --no-cache --format
json`` in it as a whole process (``PYTHONPATH`` the code's checkout), one side: N calls.

Cases, each with its own API key (so its own buckets at the fake and its own quota in llmgate)
after a ``/_fake/setup`` of its ``rate_limit`` (which refills the buckets) and a ``/_fake/reset``:

1. ``retry_after_ms``: R = ``--rps`` (20) requests/s; a 429 carries ``retry-after-ms`` and
   ``retry-after``.
2. ``retry_after``: the same, a 429 carries only ``retry-after`` (whole seconds, at least 1).
3. ``headers``: the same, every answer carries OpenAI's ``x-ratelimit-*`` and a 429 no
   ``Retry-After``.
4. ``tokens``: the token limit binds instead: 1000 requests/s, ``tokens_per_min`` set so that
   tokens allow R calls a second (the fake counts tokens as OpenAI does, ``token_counts``, and
   charges a call its prompt's tokens plus its ``max_tokens``, 200, set in the target's params;
   a call's prompt tokens are asked of the fake before the case), 429s with ``retry-after-ms``.
5. ``redis_x2``: two ``llmgate run`` processes at once, each with N / 2 examples of its own,
   against the same fake with the same key, sharing one quota through Redis (``REDIS_URL`` set
   in both; the other cases run without it), announced as in case 1.

What is measured, from the fake's own records (``/_fake/state``: each call's monotonic ``t``
and ``status``; Linux's monotonic clock is the machine's, so the bench's launch time compares):
requests, 429s and their share of the requests, and the **call span**: the first request to
the last answer (the last admitted call's ``t`` plus the latency). The floor is N / R (N the
case's calls in all; for ``tokens``, the tokens the run was charged over the token rate, the same
by construction) and the ratio is span / floor; a full bucket at the start lets R calls through
at once, so a perfect pacer's ratio is about (N - R) / N + latency / floor, 0.955 by default.
Printed apart and not in the ratio: the start-up (launch to the first request: mostly litellm's
import, about 4 s on two cores) and the process's wall. Every example must be answered: the JSON
report holds an output and no error for each of them, and the exit code is 0 or 1 (never 4,
undecided). The pacer's own line on stderr (``paced at ... requests/s``) is printed under the
table.

Goals: ratio <= 1.10, no example lost, under 5% of the requests answered 429. With ``--before
PATH`` (a checkout of other code, e.g. ``git worktree add /tmp/before <commit>``), cases 1 and 3
also run with that code (``PYTHONPATH=PATH``: its own ``worker`` package and provider
processes), printed beside; they do not count towards the exit status.

    python -m bench.rate_limit
    python -m bench.rate_limit --calls 200 --rps 10 --timeline   # calls per second per case
    python -m bench.rate_limit --before /tmp/before              # also the code of /tmp/before
    python -m bench.rate_limit --keep /tmp/rl     # keep repos, reports, logs, the fake's records
    python -m bench.rate_limit --cases tokens,redis_x2           # only these cases

The exit status is 1 when a case of this code lost an example, was undecided (exit 4) or had
5% or more of its requests answered 429 (the reasons are printed). The last line is
``rate_limit_wall_vs_floor=<the worst ratio over the cases of this code>``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_services import in_folder, load_average, processes  # noqa: E402

#: The environment variable holding the (fake) API key in the children.
KEY_ENV = "BENCH_RATE_KEY"
#: The model the target names (the fake answers any; litellm sends ``bench-model``).
MODEL = "openai/bench-model"
#: The prompt; ``{{ input }}`` is each example's ticket.
PROMPT = "Answer the customer: {{ input }}"
#: The suite's name.
SUITE = "tickets"
#: ``max_tokens`` of the token case's calls (charged by the fake as the call arrives).
MAX_TOKENS = 200
#: Requests per second of the token case: high, so the token limit binds.
TOKEN_CASE_RPS = 1000.0
#: Goals: span / floor at most this, and a share of 429s below this.
GOAL_RATIO = 1.10
GOAL_REFUSED = 0.05
#: Exit codes of a decided ``llmgate run`` (pass, fail); 4 is undecided.
DECIDED = (0, 1)


@dataclass(frozen=True)
class Case:
    """One quota the run meets: how 429s are announced, which limit binds, how many runs."""

    name: str
    announce: str
    tokens: bool = False
    runs: int = 1


CASES = (Case("retry_after_ms", "retry_after_ms"), Case("retry_after", "retry_after"),
         Case("headers", "headers"), Case("tokens", "retry_after_ms", tokens=True),
         Case("redis_x2", "retry_after_ms", runs=2))
#: The cases run with ``--before`` code too.
BEFORE_CASES = ("retry_after_ms", "headers")


@dataclass(frozen=True)
class Code:
    """The code a case runs: a label and the checkout put first on ``PYTHONPATH``."""

    label: str
    root: Path


def ticket(i: int) -> str:
    """Return example ``i``'s input (zero-padded: every prompt has the same number of tokens)."""
    return f"ticket {i:06d}: where is my order?"


def prompt_of(i: int) -> str:
    """Return the user message llmgate sends for example ``i``."""
    return PROMPT.replace("{{ input }}", ticket(i))


def config_text(url: str, concurrency: int, max_tokens: int | None) -> str:
    """Return the ``.llmgate.yml`` of the generated repository."""
    params = f", params: {{max_tokens: {max_tokens}}}" if max_tokens is not None else ""
    return (f"version: 1\nsettings: {{concurrency: {concurrency}, timeout: 30}}\nsuites:\n"
            f"  - name: {SUITE}\n    dataset: evals/tickets.jsonl\n"
            f'    target: {{model: {MODEL}, prompt: prompts/answer.txt, api_base: "{url}", '
            f"api_key_env: {KEY_ENV}{params}}}\n"
            "    assertions: [{type: contains, value: ticket}]\n")


def write_repo(folder: Path, url: str, ids: range, concurrency: int,
               max_tokens: int | None) -> None:
    """Write and commit a repository with one suite of the examples ``ids``."""
    (folder / "evals").mkdir(parents=True)
    (folder / "prompts").mkdir()
    (folder / "prompts" / "answer.txt").write_text(PROMPT, encoding="utf-8")
    (folder / "evals" / "tickets.jsonl").write_text("".join(
        json.dumps({"id": f"e{i}", "input": ticket(i)}) + "\n" for i in ids), encoding="utf-8")
    (folder / ".llmgate.yml").write_text(config_text(url, concurrency, max_tokens),
                                         encoding="utf-8")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-C", str(folder)]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)


def rate_limit(case: Case, rps: float, tokens_per_call: int) -> dict[str, Any]:
    """Return the fake's ``rate_limit`` setup of ``case``: ``rps`` calls a second bind."""
    if case.tokens:
        return {"requests_per_s": TOKEN_CASE_RPS, "tokens_per_min": rps * 60 * tokens_per_call,
                "announce": case.announce}
    return {"requests_per_s": rps, "announce": case.announce}


@dataclass(frozen=True)
class CallFigures:
    """What the fake's records say of a case's calls (times on the monotonic clock)."""

    requests: int
    refused: int
    answered: int
    first_t: float
    span_s: float


def call_figures(calls: Sequence[dict[str, Any]], latency_s: float) -> CallFigures:
    """Count ``calls`` (the fake's records) and measure their span: the first request to the
    last answer (an admitted call answers ``latency_s`` after its record, a 429 at once)."""
    if not calls:
        return CallFigures(0, 0, 0, math.nan, math.nan)
    refused = sum(c["status"] == 429 for c in calls)
    first = min(float(c["t"]) for c in calls)
    last = max(float(c["t"]) + (0.0 if c["status"] == 429 else latency_s) for c in calls)
    return CallFigures(len(calls), refused, len(calls) - refused, first, last - first)


def report_problems(report: Any, ids: Iterable[str]) -> list[str]:
    """Return what is wrong with a JSON report that should answer every example of ``ids``:
    a missing example, or one without an output or with an error (empty: all answered)."""
    try:
        rows = report["examples"][SUITE]["head"]
    except (KeyError, TypeError):
        return ["no examples in the report"]
    seen = {str(row.get("id")): row for row in rows}
    problems = []
    for name in ids:
        row = seen.get(name)
        if row is None:
            problems.append(f"{name}: missing")
        elif row.get("output") is None or row.get("error") or row.get("errored"):
            problems.append(f"{name}: {row.get('error') or 'no output'}")
    return problems


def input_tokens(report: Any) -> int | None:
    """Return the prompt tokens the report's head side was charged, or None."""
    try:
        return int(report["usage"]["head"]["spend"]["tokens"]["input"])
    except (KeyError, TypeError, ValueError):
        return None


def timeline(calls: Sequence[dict[str, Any]], start: float, step_s: float = 1.0) -> str:
    """Return admitted/refused calls per ``step_s`` from ``start`` as ``a/r`` words."""
    if not calls:
        return "no calls"
    slots = int((max(float(c["t"]) for c in calls) - start) // step_s) + 1
    counts = [[0, 0] for _ in range(slots)]
    for call in calls:
        counts[int((float(call["t"]) - start) // step_s)][call["status"] == 429] += 1
    return " ".join(f"{a}/{r}" for a, r in counts)


@dataclass
class Outcome:
    """One case run by one code."""

    case: Case
    code: str
    calls: int
    floor_s: float
    figures: CallFigures
    startup_s: float
    wall_s: float
    exit_codes: list[int]
    lost: list[str] = field(default_factory=list)
    paced: list[str] = field(default_factory=list)
    timeline: str = ""

    @property
    def ratio(self) -> float:
        """Call span over the floor."""
        return self.figures.span_s / self.floor_s

    @property
    def refused_share(self) -> float:
        """Share of the requests answered 429."""
        return self.figures.refused / max(1, self.figures.requests)

    def row(self) -> str:
        """Return the case's table row."""
        f = self.figures
        answered = f"{self.calls - len(self.lost)}/{self.calls}"
        codes = ",".join(str(c) for c in self.exit_codes)
        return (f"| {self.case.name} | {self.code} | {codes} | {answered} | {f.requests} | "
                f"{f.refused} | {100 * self.refused_share:.1f}% | {self.startup_s:.1f} | "
                f"{f.span_s:.2f} | {self.floor_s:.2f} | {self.ratio:.3f}{'*' if self.lost else ''}"
                f" | {self.wall_s:.1f} |")

    def problems(self) -> list[str]:
        """Return why this outcome misses the hard goals (lost examples, 429s, undecided)."""
        name = f"{self.case.name} ({self.code})"
        problems = []
        if self.lost:
            problems.append(f"{name}: {len(self.lost)} of {self.calls} examples lost, e.g. "
                            f"{self.lost[0]}")
        if any(code not in DECIDED for code in self.exit_codes):
            problems.append(f"{name}: exit codes {self.exit_codes} (0 or 1 expected)")
        if self.refused_share >= GOAL_REFUSED:
            problems.append(f"{name}: {self.figures.refused} of {self.figures.requests} requests "
                            f"answered 429 ({100 * self.refused_share:.1f}%, goal < "
                            f"{100 * GOAL_REFUSED:.0f}%)")
        return problems


HEADER = ("| case | code | exit | answered | requests | 429s | 429 share | start-up s | span s | "
          "floor s | span/floor | wall s |")


def table(outcomes: Sequence[Outcome]) -> list[str]:
    """Return the table of ``outcomes``."""
    return [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"] + [o.row() for o in outcomes]


@dataclass
class Child:
    """One ``llmgate run`` process and its files."""

    popen: subprocess.Popen[bytes]
    repo: Path
    ids: range
    started: float
    ended: float = math.nan


class Bench:
    """The running services and what every case shares."""

    def __init__(self, args: argparse.Namespace, folder: Path, url: str, redis_url: str,
                 http: httpx.Client) -> None:
        self.args, self.folder, self.url, self.redis_url, self.http = (
            args, folder, url, redis_url, http)
        self.base = url.removesuffix("/v1")

    def fake(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """POST ``body`` to (or, without one, GET) a ``/_fake/`` control endpoint."""
        url = f"{self.base}/_fake/{path}"
        response = self.http.post(url, json=body) if body is not None else self.http.get(url)
        response.raise_for_status()
        return response.json()

    def tokens_per_call(self) -> int:
        """Ask the fake what a call of the token case costs: the most prompt tokens of an
        example (first and last; inputs are padded to the same count) plus ``MAX_TOKENS``."""
        self.fake("setup", {"rate_limit": None, "token_counts": True})
        counts = set()
        for i in (0, self.args.calls - 1):
            response = self.http.post(f"{self.url}/chat/completions", json={
                "model": "bench-model", "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": prompt_of(i)}]})
            response.raise_for_status()
            counts.add(int(response.json()["usage"]["prompt_tokens"]))
        if len(counts) > 1:
            print(f"note: prompts of {sorted(counts)} tokens: the token case's floor is taken "
                  "from the report's tokens")
        return max(counts) + MAX_TOKENS

    def launch(self, work: Path, code: Code, ids: range, env: dict[str, str],
               max_tokens: int | None) -> Child:
        """Write a repository of ``ids`` and start ``llmgate run`` of ``code`` in it."""
        repo = work / f"repo-{ids.start}"
        write_repo(repo, self.url, ids, self.args.concurrency, max_tokens)
        command = [sys.executable, "-m", "worker.cli", "run", "--no-cache", "--format", "json"]
        with (repo.parent / f"{repo.name}.json").open("wb") as out, \
                (repo.parent / f"{repo.name}.stderr").open("wb") as err:
            started = time.monotonic()
            popen = subprocess.Popen(command, cwd=repo, env=env, stdout=out, stderr=err)
        return Child(popen, repo, ids, started)

    def env(self, code: Code, key: str, redis: bool) -> dict[str, str]:
        """The children's environment: the code first on ``PYTHONPATH``, the case's key, and
        ``REDIS_URL`` only when the runs share their quota through it."""
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTHONPATH")}
        env.update({"PYTHONPATH": str(code.root), KEY_ENV: key})
        if redis:
            env["REDIS_URL"] = self.redis_url
        return env

    def wait(self, children: Sequence[Child], timeout_s: float) -> None:
        """Wait for every child (killed past ``timeout_s`` from its start)."""
        pending = list(children)
        while pending:
            for child in list(pending):
                if child.popen.poll() is not None:
                    child.ended = time.monotonic()
                    pending.remove(child)
                elif time.monotonic() - child.started > timeout_s:
                    print(f"killing {child.repo.name}: still running after {timeout_s:.0f} s")
                    child.popen.kill()
            time.sleep(0.02)

    def run_case(self, case: Case, code: Code) -> Outcome:
        """Run ``case`` with ``code`` against the fake; return what it measured."""
        n, rps = self.args.calls, self.args.rps
        cost = self.tokens_per_call() if case.tokens else 0
        work = self.folder / f"{case.name}-{code.label}"
        work.mkdir()
        self.fake("setup", {"rate_limit": rate_limit(case, rps, cost),
                            "token_counts": case.tokens, "rules": [], "faults": [],
                            "latency_ms": self.args.latency_ms})
        self.fake("reset", {})
        env = self.env(code, f"bench-{work.name}", redis=case.runs > 1)
        cuts = [n * k // case.runs for k in range(case.runs + 1)]
        floor_s = n / rps
        children = [self.launch(work, code, range(a, b), env, MAX_TOKENS if case.tokens else None)
                    for a, b in zip(cuts, cuts[1:], strict=False)]
        self.wait(children, timeout_s=120 + 10 * floor_s)
        state = self.fake("state")
        (work / "fake-state.json").write_text(json.dumps(state), encoding="utf-8")
        calls = [c for c in state["calls"] if c["path"] == "chat"]
        figures = call_figures(calls, self.args.latency_ms / 1000)
        lost: list[str] = []
        paced: list[str] = []
        charged = 0
        for child in children:
            report = self.read_report(child)
            lost += report_problems(report, (f"e{i}" for i in child.ids))
            charged += (input_tokens(report) or 0) + len(child.ids) * MAX_TOKENS
            stderr = (child.repo.parent / f"{child.repo.name}.stderr").read_text("utf-8", "replace")
            paced += [line.strip() for line in stderr.splitlines() if "paced" in line]
        if case.tokens:
            floor_s = max(floor_s, charged / (rate_limit(case, rps, cost)["tokens_per_min"] / 60))
        start = min(c.started for c in children)
        return Outcome(case, code.label, n, floor_s, figures, figures.first_t - start,
                       max(c.ended for c in children) - start,
                       [c.popen.returncode for c in children], lost, paced,
                       timeline(calls, figures.first_t) if calls else "no calls")

    @staticmethod
    def read_report(child: Child) -> Any:
        """Return the child's JSON report (None when it wrote none)."""
        try:
            return json.loads((child.repo.parent / f"{child.repo.name}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None


def print_notes(outcomes: Sequence[Outcome], show_timeline: bool) -> None:
    """Print each case's pacing lines (and its calls per second with ``show_timeline``)."""
    for o in outcomes:
        paced = "; ".join(dict.fromkeys(o.paced)) or "(no pacing line on stderr)"
        print(f"- {o.case.name} ({o.code}): {paced}")
        if show_timeline:
            print(f"  answered/429 per second from the first request: {o.timeline}")


def run(args: argparse.Namespace, folder: Path) -> int:
    """Run every case; print the table; return the exit status."""
    print(f"machine load average (1, 5, 15 min) at the start: {load_average()}")
    this = Code("this", ROOT)
    outcomes: list[Outcome] = []
    with processes(folder, args.latency_ms) as (url, redis_url), httpx.Client(timeout=30) as http:
        bench = Bench(args, folder, url, redis_url, http)
        cases = [case for case in CASES if case.name in args.cases]
        outcomes += [bench.run_case(case, this) for case in cases]
        if args.before is not None:
            before = Code("before", args.before.resolve())
            outcomes += [bench.run_case(case, before) for case in cases
                         if case.name in BEFORE_CASES]
    print(f"{args.calls} calls a case, {args.rps:g} calls/s allowed (floor "
          f"{args.calls / args.rps:.1f} s), latency {args.latency_ms:g} ms, concurrency "
          f"{args.concurrency}; goals: span/floor <= {GOAL_RATIO}, no example lost, 429s < "
          f"{100 * GOAL_REFUSED:.0f}% of requests")
    print()
    print("\n".join(table(outcomes)))
    if any(o.lost for o in outcomes):
        print("* lost examples: fewer calls answered than the floor counts, the ratio flatters")
    print()
    print_notes(outcomes, args.timeline)
    print(f"machine load average (1, 5, 15 min) at the end: {load_average()}")
    ours = [o for o in outcomes if o.code == this.label]
    for o in ours:
        if not o.ratio <= GOAL_RATIO:
            print(f"misses the goal: {o.case.name}: span/floor {o.ratio:.3f} > {GOAL_RATIO}")
    problems = [p for o in ours for p in o.problems()]
    for problem in problems:
        print(f"FAILED: {problem}")
    worst = max((o.ratio for o in ours), key=lambda r: math.inf if math.isnan(r) else r)
    print(f"rate_limit_wall_vs_floor={worst:.3f}")
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="examples (calls) a case")
    parser.add_argument("--rps", type=float, default=20.0, help="calls a second the quota allows")
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of other code: cases 1 and 3 run with it too")
    parser.add_argument("--cases", type=lambda text: text.split(","),
                        default=[case.name for case in CASES],
                        help=f"comma-separated, of {', '.join(c.name for c in CASES)} "
                        "(default: all)")
    parser.add_argument("--timeline", action="store_true",
                        help="print each case's answered and refused calls per second")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep repos, reports, logs and the fake's records here (new folder)")
    args = parser.parse_args(argv)
    if args.calls < 2 or args.rps <= 0:
        parser.error("--calls must be at least 2 and --rps above 0")
    if unknown := set(args.cases) - {case.name for case in CASES}:
        parser.error(f"--cases: unknown {sorted(unknown)}")
    if args.before is not None and not (args.before / "worker" / "cli" / "__main__.py").exists():
        parser.error(f"--before {args.before}: no worker/cli/__main__.py there")
    sys.exit(in_folder(args.keep, "llmgate-rate-limit-", lambda folder: run(args, folder)))


if __name__ == "__main__":
    main()
