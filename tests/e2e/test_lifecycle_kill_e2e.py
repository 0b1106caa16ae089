"""Run lifecycle with real processes: a SIGKILLed worker's job resumes within the lease.

Everything is a real process on loopback (``worker.cli.demo.Stack``: redis-server, the fake GitHub,
the web process, arq workers); the repository's ``pr/slow`` target sleeps, so a ``kill -9``
lands while the run is busy. The field case: job timeout 60 s, 3 tries, lease 6 s
(tests/e2e/lifecycle_support.py). SIGKILL the worker while the check is ``in_progress`` and start
a new one: the job resumes within the lease (not after arq's 60 + 10 s in-progress TTL) on the
same check run, which reaches ``completed``. Every try killed: test_lifecycle_tries_e2e.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.lifecycle_support import (
    ARQ_IN_PROGRESS_S,
    LEASE_S,
    POLL_SLACK_S,
    kill_the_job_worker,
    running_try,
    slow_run_started,
    wait_forgotten,
)
from tests.e2e.ops_support import wait_until

pytestmark = pytest.mark.slow


def test_a_killed_worker_resumes_within_the_lease_on_the_same_check_run(tmp_path: Path) -> None:
    with slow_run_started(tmp_path) as (stack, slow):
        killed = kill_the_job_worker(stack, 1)
        wait_until(lambda: running_try(stack) == 2, ARQ_IN_PROGRESS_S, "the job did not resume")
        resumed_s = time.monotonic() - killed
        assert resumed_s < LEASE_S + POLL_SLACK_S, resumed_s  # arq alone: 70 s
        (run,) = stack.wait_for_check(slow, timeout_s=60)
        assert (run["status"], run["conclusion"]) == ("completed", "success")
        assert time.monotonic() - killed < 30
        titles = [h["body"].get("output", {}).get("title") for h in run["history"]]
        assert titles[:2] == ["llmgate: running", "llmgate: running (try 2 of 3)"]
        assert len([c for c in stack.state()["comments"] if c["issue_number"] == 1]) == 1
        wait_forgotten(stack)
        assert stack.state()["violations"] == []
