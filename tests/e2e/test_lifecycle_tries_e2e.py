"""Run lifecycle with real processes: when every try of a job is killed, the sweeper concludes
its check run ``timed_out`` with the explanation (the field case of
tests/e2e/test_lifecycle_kill_e2e.py: job timeout 60 s, 3 tries, lease 6 s).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.lifecycle_support import (
    LEASE_S,
    POLL_SLACK_S,
    kill_the_job_worker,
    run_summary,
    slow_run_started,
    wait_forgotten,
)

pytestmark = pytest.mark.slow


def test_when_every_try_is_killed_the_sweeper_concludes_timed_out(tmp_path: Path) -> None:
    with slow_run_started(tmp_path) as (stack, slow):
        for attempt in (1, 2, 3):
            killed = kill_the_job_worker(stack, attempt)
        (run,) = stack.wait_for_check(slow, timeout_s=LEASE_S + POLL_SLACK_S + 5 + 10)
        concluded_s = time.monotonic() - killed  # the lease, then one sweep (every 5 s)
        assert concluded_s < LEASE_S + POLL_SLACK_S + 5 + 2, concluded_s
        assert (run["status"], run["conclusion"]) == ("completed", "timed_out")
        assert run["output"]["title"] == "llmgate: the run timed out"
        assert run_summary(run) == (
            "The worker running this check stopped 3 times before the run finished (killed, "
            "restarted or out of memory), so llmgate gave up on it.\n\n"
            "Comment `/llmgate rerun` to try again.")
        wait_forgotten(stack)
        assert stack.state()["comments"] == []
        assert stack.state()["violations"] == []
