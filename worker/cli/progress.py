"""Progress of a long ``llmgate run`` on stderr: one line per suite and side.

Each line (worker/pipeline/progress.py `SuiteLine`) gives the calls done of those expected,
cache hits, cost so far, time and ETA, e.g. ``llmgate: head 1a2b3c4 tickets: 120/400 calls (30
cached), $0.0123, 35 s, about 1 min 22 s left``. On a terminal the block of lines is redrawn in
place (at most every `TTY_EVERY_S`); otherwise (CI logs) the lines that moved are printed at most
every `LOG_EVERY_S` seconds, so a long run is never silent for minutes and a short one prints
nothing. Base and head may progress at once (worker/pipeline/sides.py): every redraw or batch of
lines is one write of whole lines, so two sides never garble a line.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from worker.evals.context import CallEvent, RunPlan
from worker.pipeline import GateProgress

#: Seconds between lines when stderr is not a terminal (the issue's "every ~10 s in CI").
LOG_EVERY_S = 10.0
#: Seconds between redraws on a terminal.
TTY_EVERY_S = 0.2


class Progress:
    """Prints a gate's progress lines (see the module docstring).

    Args:
        stream: where to print (stderr by default).
        clock: monotonic seconds.
        tty: whether to redraw in place (default: whether ``stream`` is a terminal).
        columns: the terminal's width (default: read from ``stream`` at each redraw).
    """

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 tty: bool | None = None, columns: int | None = None) -> None:
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = self.stream.isatty() if tty is None else tty
        self.columns = columns
        self.counts = GateProgress(clock)
        self.shown = clock()
        self.drawn = 0  # lines of the block on screen (a terminal)
        self.printed: dict[int, str] = {}  # line position -> its text last printed (CI)

    def plan(self, plan: RunPlan) -> None:
        """Start a side's suites (`worker.evals.context.Observers.on_plan`); the next line is
        due an interval from now (checkouts and estimates before it do not count)."""
        self.counts.plan(plan)
        self.shown = self.clock()

    def call(self, event: CallEvent) -> None:
        """Count one finished call and print when it is due."""
        self.counts.call(event)
        now = self.clock()
        if now - self.shown >= (TTY_EVERY_S if self.tty else LOG_EVERY_S):
            self.shown = now
            self._print(now)

    def _print(self, now: float) -> None:
        texts = [line.text(now) for line in self.counts.lines()]
        if self.tty:
            # a line wider than the terminal wraps onto two rows, and moving up by lines would
            # leave the extra rows behind: clip every line to the width
            width = max(self._columns() - 1, 20)
            texts = [text if len(text) <= width else text[:width - 1] + "…" for text in texts]
            up = f"\x1b[{self.drawn}F" if self.drawn else ""  # to the block's first line
            self.stream.write(up + "".join(f"\r\x1b[2K{text}\n" for text in texts))
            self.drawn = len(texts)
        else:
            lines = self.counts.lines()
            moved = [(i, text) for i, text in enumerate(texts)
                     if (lines[i].done or lines[i].commands) and
                     self.printed.get(i, "").split(", $")[:1] != text.split(", $")[:1]]
            if not moved:
                return
            self.printed.update(moved)
            self.stream.write("".join(text + "\n" for _, text in moved))
        self.stream.flush()

    def _columns(self) -> int:
        """The terminal's width in columns (`columns` when given; 80 when it cannot be read)."""
        if self.columns is not None:
            return self.columns
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return 80

    def finish(self) -> None:
        """Show the final counts: draw the block a last time (a terminal), or print the lines
        that moved since the last print (a log that printed any line: its last one must not
        stop at "61 commands" of 120; a run too short to print stays silent)."""
        if self.drawn or self.printed:
            self._print(self.clock())
