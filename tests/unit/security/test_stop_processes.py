"""`stop_processes` with real processes: one that exits on SIGTERM, one that ignores it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.timing import scaled
from worker.security.children import stop_processes

IGNORES_SIGTERM = ("import signal, sys, time\n"
                   "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                   "print('ready', flush=True)\n"
                   "time.sleep(60)\n")


def test_each_process_gets_sigterm_and_one_that_outlives_its_wait_is_killed() -> None:
    polite = subprocess.Popen(["sleep", "60"])
    stubborn = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE,
                                text=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    done = subprocess.Popen(["true"])
    done.wait()
    started = time.monotonic()
    codes = stop_processes([polite, stubborn, done], timeout_s=1.0)
    assert codes == [-signal.SIGTERM, -signal.SIGKILL, 0]
    assert time.monotonic() - started < scaled(10)
    assert all(p.poll() is not None for p in (polite, stubborn, done))
