"""The progress of a gate, per suite and side: calls done of those expected, cache hits, cost, ETA.

Pure counting (no I/O): `GateProgress` is told each side's plan and every call as it ends (the
`worker.evals.context.Observers` hooks ``on_plan`` and ``on_call``) and gives one `SuiteLine`
per suite and side, in the order the plans came. ``llmgate run`` prints them
(worker/cli/progress.py) and the App writes them into its in-progress check run
(worker/gate/progress.py). Both sides of a gate may progress at once (worker/pipeline/sides.py):
each call names its side and suite. A call of no suite the plan named (a pairwise judge, a
judge calibration, a ``confirm_flips`` re-run) counts on its side's latest suite.

A suite's time runs from its side's plan (the first suite) or from its side's last call before
its own first one (the suites of a side run one after another); its ETA is that time per call
done times the calls left (model, judge and embedding calls; commands are counted but have no
total).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from worker.evals.context import CallEvent, RunPlan

#: How a suite line names calls of no suite (a judge calibration after the suites).
OTHER_CALLS = "other calls"


@dataclass
class SuiteLine:
    """The progress of one suite on one side.

    Attributes:
        side: ``base``, ``head`` or "" (a run outside a gate).
        sha: the side's commit ("" for a working tree).
        suite: the suite's name (`OTHER_CALLS` for calls of no suite).
        total: calls expected (sent or cached), 0 when none (a command target alone).
        done, hits: calls ended, and how many of them the response cache answered.
        commands: command-target runs ended.
        cost_usd: USD spent so far.
        started_s: when its time starts (the clock's seconds), None before its first call.
        ended_s: when its last expected call ended (its time stops there), None before.
    """

    side: str
    sha: str
    suite: str
    total: int
    done: int = 0
    hits: int = 0
    commands: int = 0
    cost_usd: float = 0.0
    started_s: float | None = None
    ended_s: float | None = None

    @property
    def where(self) -> str:
        """The side and commit, e.g. ``head 1a2b3c4`` or ``working tree``."""
        commit = self.sha[:7] or "working tree"
        return f"{self.side} {commit}" if self.side else commit

    def elapsed_s(self, now: float) -> float:
        """Seconds since its time started (0 before), until its last expected call ended."""
        end = now if self.ended_s is None else self.ended_s
        return 0.0 if self.started_s is None else max(end - self.started_s, 0.0)

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the pace so far, or None (no total, or nothing done yet)."""
        if not self.total or not self.done:
            return None
        return self.elapsed_s(now) / self.done * max(self.total - self.done, 0)

    def text(self, now: float) -> str:
        """One line, e.g. ``llmgate: head 1a2b3c4 tickets: 120/400 calls (30 cached),
        $0.0123, 35 s, about 1 min 22 s left``."""
        parts = [f"{self.done}/{self.total} calls ({self.hits} cached)" if self.total
                 else f"{self.done} calls ({self.hits} cached)"]
        if self.commands:
            parts.append(f"{self.commands} commands")
        parts += [f"${self.cost_usd:.4f}", duration(self.elapsed_s(now))]
        left = self.eta_s(now)
        if left is not None:
            parts.append("done" if self.done >= self.total else f"about {duration(left)} left")
        return f"llmgate: {self.where} {self.suite}: {', '.join(parts)}"


class GateProgress:
    """Counts a gate's calls per suite and side (see the module docstring).

    Attributes:
        version: grows with every change, so a reader can tell whether anything moved.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lines: dict[tuple[str, str, str], SuiteLine] = {}
        self._latest: dict[str, SuiteLine] = {}  # side -> its suite of the latest call
        self._last_call_s: dict[str, float] = {}  # side -> when its latest call ended
        self.version = 0

    def plan(self, plan: RunPlan) -> None:
        """Start a side's suites (`worker.evals.context.Observers.on_plan`)."""
        now = self.clock()
        suites = plan.suites or (("", plan.calls),)
        for position, (suite, calls) in enumerate(suites):
            line = SuiteLine(plan.side, plan.sha, suite or OTHER_CALLS, calls)
            self._lines[(plan.side, plan.sha, line.suite)] = line
            if position == 0:
                line.started_s = now
        self._last_call_s[plan.side] = now
        self.version += 1

    def call(self, event: CallEvent) -> None:
        """Count one ended call (`worker.evals.context.Observers.on_call`)."""
        line = self._line(event)
        if line.started_s is None:
            line.started_s = self._last_call_s.get(event.side, self.clock())
        if event.kind == "command":
            line.commands += 1
        else:
            line.done += 1
            line.hits += event.cache_hits
        line.cost_usd += event.cost_usd
        self._latest[event.side] = line
        self._last_call_s[event.side] = self.clock()
        if line.total and line.done >= line.total and line.ended_s is None:
            line.ended_s = self._last_call_s[event.side]  # done: its time stops
        self.version += 1

    def _line(self, event: CallEvent) -> SuiteLine:
        name = event.suite or OTHER_CALLS
        found = next((line for (side, _, suite), line in reversed(self._lines.items())
                      if side == event.side and suite == name), None)
        if found is not None:
            return found
        latest = self._latest.get(event.side)
        if latest is not None:
            return latest
        line = SuiteLine(event.side, "", event.suite or OTHER_CALLS, 0)
        self._lines[(event.side, "", line.suite)] = line
        return line

    def lines(self) -> list[SuiteLine]:
        """Every suite line, in the order the plans named them."""
        return list(self._lines.values())


def duration(seconds: float) -> str:
    """Return seconds as ``42 s``, ``3 min 5 s`` or ``1 h 2 min``."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
