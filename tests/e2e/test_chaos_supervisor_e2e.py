"""Issue 14's table: Redis restarts, then a worker is killed while its gate runs, under a
supervisor that starts it again (tests/e2e/test_chaos_e2e.py says how a row is checked).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.chaos_repo import build_chaos_repo
from tests.e2e.chaos_rows_support import (
    CAUSES,
    ONE_JOB,
    RECONCILE_SETTLE_S,
    assert_no_loss,
    chaos_fakes,  # noqa: F401 (the fixture fakes)
    in_progress,
    report,
)
from tests.e2e.chaos_support import ChaosFakes, ChaosStack
from tests.e2e.ops_support import wait_until

pytestmark = pytest.mark.slow


def test_redis_restart_then_a_worker_killed_under_a_supervisor(tmp_path: Path,
                                                               fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 7, sleep_s=4)
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=ONE_JOB, supervise=True) as stack:
        for pr in range(1, 7):
            stack.push(repo, pr)
        wait_until(lambda: in_progress(stack) >= 2, 60, "two gates running")
        stack.redis.restart(down_s=1.0)
        stack.push(repo, 7)
        worker, _ = wait_until(stack.worker_running_a_target, 30, "a gate running its target")
        stack.kill_worker(worker)  # while its gate runs: its registry entry went with the data
        counted = stack.settle(repo.newest(), RECONCILE_SETTLE_S)
        report("redis restart, supervised, kill", stack, counted, *CAUSES)
        assert_no_loss(counted)
