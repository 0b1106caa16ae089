"""The rate-limited row (issue 29): one side, cold, against a provider allowing 20 requests/s.

For this row only the fake provider (tests/fakes/fake_llm.py) gets `RATE_LIMIT`: a token bucket
per API key of 20 requests, full at first and refilled at 20 a second; a call beyond it is
answered 429 at once (no latency) with ``retry-after-ms`` and ``retry-after`` and OpenAI's error
body. Each tool runs one side of the job (200 tickets, concurrency 10) cold: empty response
cache, and for llmgate a flushed Redis, so nothing it learned of the quota before is left. The
fake's buckets are refilled before each command. The floor is 200 / 20 = 10 s (a perfect pacer
does a little better, (200 - 20) / 20 + 0.1 = 9.1 s: the first 20 calls pass at once).

Recorded per run: the wall; the calls' span at the fake (its first request to its last admitted
answer: the wall less start-up and exit, which are CPU-bound and so suffer most from the
machine's load); the CPU of the tool's process tree; the requests the fake received (429s
included), the 429s and the calls it admitted; the examples the tool answered (its own account,
`parse.answered`); the exit code.

llmgate must answer every example (200 calls admitted, none lost in its report) and decide (exit
0 or 1, never 4, undecided): else the bench stops, as for any other failed check. A peer (and
``llmgate-before``) that loses examples, exits non-zero or is killed after `TIMEOUT_S` is
reported as such. (llmci leaves its "target errors", calls that failed after its retries, out
of its accuracy and exits 0: they are counted from its report.)
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.peers import parse, table, tools
from bench.peers.tree import measure

#: How the row is named (``--only``, the kind of run).
NAME = "rate-limited"
#: Requests a second the provider allows.
RPS = 20.0
#: The fake provider's setup for the row (``/_fake/setup``; None lifts it).
RATE_LIMIT: dict[str, Any] = {"requests_per_s": RPS, "request_burst": 20,
                              "announce": "retry_after_ms"}
#: Longest one command of the row may run, seconds (30 times the floor), before it is killed.
TIMEOUT_S = 300.0
#: The figures of the row kept per tool (one value per repetition; `table.Figures`).
METRICS = table.LIMITED_METRICS
#: Exit codes that mean llmgate decided (0 pass, 1 fail).
DECIDED = (0, 1)
#: The tool whose losses fail the bench.
OURS = "llmgate"


@dataclass(frozen=True)
class Counts:
    """The fake provider's account of a run: chat ``requests`` received (429s included),
    ``refused`` with 429, and ``span_s`` from the first request to the last admitted call's
    answer (its time plus the latency)."""

    requests: int
    refused: int
    span_s: float


class Provider(Protocol):
    """The fake provider's control (bench/peers/__main__.py's ``Fake``)."""

    def setup(self, config: dict[str, Any]) -> None: ...

    def reset(self) -> None: ...

    def chat_counts(self) -> Counts: ...


@dataclass(frozen=True)
class LimitedRun:
    """One tool's run of the row.

    Attributes:
        wall_s: seconds until the command exited (or was killed).
        cpu_s: CPU of its whole process tree, reaped.
        exit_code: its exit status (negative: killed by that signal).
        requests: chat requests the fake received, refused ones included.
        refused: of them answered 429.
        span_s: the fake's first request to its last admitted answer: the calls' share of
            the wall (the rest is start-up and exit, CPU-bound, so load-sensitive).
        answered: examples the tool's output says were answered (None: it says nothing).
        note: what else happened (``killed after 300 s``), or empty.
    """

    wall_s: float
    cpu_s: float
    exit_code: int
    requests: int
    refused: int
    span_s: float
    answered: int | None
    note: str = ""

    @property
    def admitted(self) -> int:
        """Requests the fake admitted (answered after its latency)."""
        return self.requests - self.refused


def run_one(tool: tools.Tool, fake: Provider, examples: int, log_path: Path) -> LimitedRun:
    """Run ``tool``'s cold command once against the rate-limited fake (set up by the caller)
    and return what happened; the tool's output goes to ``log_path``.

    Raises:
        SystemExit: llmgate lost an example or did not decide (see the module docstring).
    """
    tool.clear()
    fake.reset()  # refills the buckets
    command, note = tool.cold, ""
    with log_path.open("wb") as log:
        try:
            tree = measure(command.argv, cwd=command.cwd, env=command.env, log=log,
                           timeout_s=TIMEOUT_S)
            wall_s, cpu_s, code = tree.wall_s, tree.cpu_s, tree.exit_code
        except subprocess.TimeoutExpired:
            wall_s, cpu_s, code = TIMEOUT_S, float("nan"), -9
            note = f"killed after {TIMEOUT_S:.0f} s"
    output = log_path.read_text(encoding="utf-8", errors="replace")
    counts = fake.chat_counts()
    run = LimitedRun(wall_s, cpu_s, code, counts.requests, counts.refused, counts.span_s,
                     parse.answered(tool.name, output, examples), note)
    problem = failure(tool.name, run, examples)
    if problem:
        raise SystemExit(f"{tool.name}: {' '.join(command.argv)} ({NAME}): {problem}\n"
                         f"{output[-3000:]}")
    return run


def failure(name: str, run: LimitedRun, examples: int) -> str | None:
    """Return why ``run`` fails the bench (only llmgate's can), or None."""
    if name != OURS:
        return None
    if run.exit_code not in DECIDED:
        return f"exit code {run.exit_code}{f' ({run.note})' if run.note else ''}, expected 0 or 1"
    if run.answered != examples:
        return f"llmgate answered {run.answered} of {examples} examples"
    if run.admitted != examples:
        return f"the provider admitted {run.admitted} calls, expected {examples}"
    return None


def repetition(fake: Provider, every: Sequence[tools.Tool], examples: int, logs: Path,
               into: dict[str, list[LimitedRun]]) -> None:
    """Run the row once for each tool of ``every`` (in that order) with the fake rate-limited,
    appending each run to ``into[tool.name]``; the fake's limit is lifted afterwards."""
    fake.setup({"rate_limit": RATE_LIMIT})
    try:
        for tool in every:
            log_path = logs / f"{tool.name.split()[0]}-{NAME}.log"
            into.setdefault(tool.name, []).append(run_one(tool, fake, examples, log_path))
    finally:
        fake.setup({"rate_limit": None})


def figures(runs: Sequence[LimitedRun]) -> table.Figures:
    """Return the row's `METRICS` of a tool, one value per run (an unknown answered count is
    taken as none answered)."""
    return {"limited_wall_s": [r.wall_s for r in runs],
            "limited_span_s": [r.span_s for r in runs],
            "limited_cpu_s": [r.cpu_s for r in runs if r.cpu_s == r.cpu_s],  # not a killed run's
            "limited_requests": [float(r.requests) for r in runs],
            "limited_refused": [float(r.refused) for r in runs],
            "limited_admitted": [float(r.admitted) for r in runs],
            "limited_answered": [float(r.answered or 0) for r in runs],
            "limited_exit": [float(r.exit_code) for r in runs]}


def floor_s(examples: int) -> float:
    """Return the row's floor: ``examples`` calls at `RPS`."""
    return examples / RPS


def _spread(values: Sequence[float], digits: int = 0) -> str:
    """Return the median of ``values`` and, when they differ, ``[lowest–highest]``."""
    if not values:
        return "–"
    text = f"{statistics.median(values):.{digits}f}"
    if min(values) != max(values):
        text += f" [{min(values):.{digits}f}–{max(values):.{digits}f}]"
    return text


def whole(figs: table.Figures, examples: int) -> bool:
    """Whether every run in ``figs`` answered every example (a recorded median: that one)."""
    answered = figs.get("limited_answered", [])
    return bool(answered) and min(answered) >= examples


def _answered(figs: table.Figures, examples: int) -> str:
    answered = figs.get("limited_answered", [])
    if whole(figs, examples):
        return f"all {examples}" + (" every run" if len(answered) > 1 else "")
    return f"{_spread(answered)} of {examples} (LOST examples)"


def _codes(figs: table.Figures) -> str:
    return " / ".join(f"{c:.0f}" for c in figs.get("limited_exit", []))


def lines(figs: Mapping[str, table.Figures], marks: Mapping[str, str], examples: int,
          notes: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Return the row's table: one line per tool with its figures, then llmgate over each
    peer's wall (``notes[name]``: what else happened to a tool's runs)."""
    floor = floor_s(examples)
    out = ["| tool | wall s | ÷ floor | calls s (first request to last answer) | CPU s | "
           "requests | 429s | admitted | answered | exit code |", "|---" * 10 + "|"]
    shown = [n for n, f in figs.items() if f.get("limited_wall_s")]
    for name in shown:
        fig = figs[name]
        extra = "; ".join((notes or {}).get(name, ()))
        cells = [_spread(fig["limited_wall_s"], 1),
                 f"{statistics.median(fig['limited_wall_s']) / floor:.2f}",
                 _spread(fig.get("limited_span_s", []), 1),
                 _spread(fig.get("limited_cpu_s", []), 1),
                 *(_spread(fig.get(m, [])) for m in ("limited_requests", "limited_refused",
                                                      "limited_admitted")),
                 _answered(fig, examples), _codes(fig) + (f" ({extra})" if extra else "")]
        out.append(f"| {name}{marks.get(name, '')} | " + " | ".join(cells) + " |")
    if OURS in shown:
        ours = figs[OURS]["limited_wall_s"]
        out.append("")
        out.extend(f"- wall, llmgate ÷ {name}: {table.ratio(ours, figs[name]['limited_wall_s'])}"
                   f"{'' if whole(figs[name], examples) else f' ({name} lost examples)'}"
                   for name in shown if name != OURS)
    return out


def fastest_whole_peer(figs: Mapping[str, table.Figures], peers: Sequence[str],
                       examples: int) -> str | None:
    """Return the peer of ``peers`` with the lowest median wall among those that answered
    every example in every run, or None."""
    fit = [p for p in peers if p in figs and figs[p].get("limited_wall_s")
           and whole(figs[p], examples)]
    return min(fit, key=lambda p: statistics.median(figs[p]["limited_wall_s"]), default=None)


def headline(figs: Mapping[str, table.Figures], peers: Sequence[str], examples: int) -> str:
    """Return ``peers_rate_limited_wall_vs_fastest_peer=<llmgate's median wall / the fastest
    whole peer's>`` (``nan`` when llmgate or every peer is missing)."""
    peer = fastest_whole_peer(figs, peers, examples)
    ours = figs.get(OURS, {}).get("limited_wall_s")
    value = (f"{statistics.median(ours) / statistics.median(figs[peer]['limited_wall_s']):.3f}"
             if peer and ours else "nan")
    return f"peers_rate_limited_wall_vs_fastest_peer={value}"
