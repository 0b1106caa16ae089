"""Progress of a long ``llmgate run`` on stderr: calls done, cache hits, cost so far, ETA.

On a terminal one line is redrawn in place (at most every `TTY_EVERY_S`); otherwise (CI logs)
one line is printed at most every `LOG_EVERY_S` seconds, so a long run is never silent for
minutes and a short one prints nothing. A side starts when the engine announces its plan
(`worker.evals.context.EvalContext.on_plan`): its commit and the model calls it expects. The
ETA is the elapsed time per call done times the calls left (model, judge and embedding calls;
commands are counted but have no total).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from worker.evals.context import CallEvent

#: Seconds between lines when stderr is not a terminal (the issue's "every ~10 s in CI").
LOG_EVERY_S = 10.0
#: Seconds between redraws on a terminal.
TTY_EVERY_S = 0.2


class Progress:
    """Counts one side's calls and prints the progress line (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = self.stream.isatty() if tty is None else tty
        self.side, self.total = "", 0
        self.done = self.hits = self.commands = 0
        self.cost_usd = 0.0
        self.started = self.shown = clock()
        self.drawn = False

    def plan(self, sha: str, calls: int) -> None:
        """Start a side: its commit ("" for the working tree) and the model calls expected."""
        self.finish()
        self.side, self.total = sha[:7] or "working tree", calls
        self.done = self.hits = self.commands = 0
        self.cost_usd = 0.0
        self.started = self.shown = self.clock()

    def call(self, event: CallEvent) -> None:
        """Count one finished call and print the line when it is due."""
        if event.kind == "command":
            self.commands += 1
        else:
            self.done += 1
            self.hits += event.cache_hits
        self.cost_usd += event.cost_usd
        now = self.clock()
        if now - self.shown >= (TTY_EVERY_S if self.tty else LOG_EVERY_S):
            self.shown = now
            self._print(self.line(now))

    def line(self, now: float) -> str:
        """Return the progress line, e.g. ``llmgate: 1a2b3c4: 120/400 calls (30 cached),
        $0.0123, 35 s, about 1 min 22 s left``."""
        parts = [f"{self.done}/{self.total} calls ({self.hits} cached)" if self.total
                 else f"{self.done} calls ({self.hits} cached)"]
        if self.commands:
            parts.append(f"{self.commands} commands")
        elapsed = now - self.started
        parts += [f"${self.cost_usd:.4f}", _duration(elapsed)]
        if self.total and self.done:
            left = elapsed / self.done * max(self.total - self.done, 0)
            parts.append(f"about {_duration(left)} left")
        return f"llmgate: {self.side}: {', '.join(parts)}"

    def _print(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
            self.drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End a redrawn line (a terminal), so what follows starts on its own line."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def _duration(seconds: float) -> str:
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
