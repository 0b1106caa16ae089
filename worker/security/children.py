"""Stop child processes: SIGTERM each, wait a bounded time, SIGKILL what still runs.

What ``llmgate demo``'s `worker.cli.demo.Stack` and the chaos tests' stacks
(tests/e2e/chaos_support.py) do when they end: every part gets SIGTERM first (a worker drains,
the web process answers the delivery it reads, Redis flushes its AOF), so the parts stop side by
side, and one that outlives its wait is killed and reaped, so no process is left behind.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

#: How long one process is given to exit after SIGTERM before it gets SIGKILL, seconds.
STOP_TIMEOUT_S = 15.0


def stop_processes(procs: Sequence[subprocess.Popen[Any]],
                   timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """SIGTERM every process of ``procs`` still running (in their order), then wait for each in
    turn at most ``timeout_s`` seconds, SIGKILLing and reaping one that has not exited by then.

    Returns:
        Each process's exit status, in the order of ``procs`` (``-9`` for one killed; a negative
        status is the signal that ended it, as in `subprocess.Popen.returncode`).
    """
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    codes: list[int] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=timeout_s))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
    return codes
