"""The report's note on command targets that left processes running after they exited (pure).

A command target is finished when its process exits; what it left behind holding its output is
ended after a short grace (worker/security/process.py, issue 31), and each such example carries
the note `worker.security.process.LEFT_RUNNING_NOTE` (or `LEFT_OUTSIDE_NOTE`). The report counts
them per suite and side, so a target that leaks a process on every example is seen without
opening each one. The verdict is not changed: the answers were read when the target exited.
"""

from __future__ import annotations

from worker.evals.types import SuiteResult
from worker.security import LEFT_OUTSIDE_NOTE, LEFT_RUNNING_NOTE


def left_running_notes(name: str, head: SuiteResult | None,
                       base: SuiteResult | None) -> list[str]:
    """Return at most one note for suite ``name``: on how many examples (of how many) each
    side's target left processes running after it exited; [] when none did.

    Example: ``tickets: the target left processes running after it exited on 2 of 2 examples
    at head and 2 of 2 at base; they were ended``.
    """
    counts = [(side, _count(run), len(run.examples)) for side, run in (("head", head),
                                                                       ("base", base))
              if run is not None]
    found = [(side, n, total) for side, n, total in counts if n]
    if not found:
        return []
    sides = " and ".join(f"{n} of {total}{' examples' if i == 0 else ''} at {side}"
                         for i, (side, n, total) in enumerate(found))
    outside = any(LEFT_OUTSIDE_NOTE in e.notes for run in (head, base) if run is not None
                  for e in run.examples)
    ended = ("those of its process group were ended, and one that left the group still held "
             "its output (where the kernel allows user namespaces, each target gets a PID "
             "namespace that ends everything it started: worker/security/pidns.py)"
             if outside else "they were ended")
    return [f"{name}: the target left processes running after it exited on {sides}; {ended}"]


def _count(run: SuiteResult) -> int:
    return sum(LEFT_RUNNING_NOTE in e.notes or LEFT_OUTSIDE_NOTE in e.notes
               for e in run.examples)
