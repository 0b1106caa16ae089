"""A worker told to stop while Redis is away exits within seconds (worker/runtime/stopping.py).

Before, its clients waited for Redis forever (worker/runtime/redis_checks.py `PatientRetry`):
the grace waited on a job that could not record its result, and arq's close waited to delete
its health key, until the platform's SIGKILL. Here two real workers (one running a slow gate,
one idle) lose their real ``redis-server`` and get SIGTERM with the default grace (270 s):
both exit promptly and cleanly, and the running gate's check run is left ``in_progress`` for
the job's next try (it is not concluded by the stopped one).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.lifecycle_support import FIELD_ENV, job_worker
from tests.e2e.ops_support import build_repo, check_runs, open_pr, wait_until
from tests.timing import scaled
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow

#: How long a stopping worker may take without Redis, seconds on an idle 2-core machine: one
#: retry pause (2 s) of a client, the job's cancellation and Python's exit.
STOP_BOUND_S = 8.0


def _workers(stack: Stack) -> list[subprocess.Popen[bytes]]:
    return [p for p in stack.procs if "arq" in p.args]


def test_a_worker_stopped_while_redis_is_down_exits_promptly(tmp_path: Path) -> None:
    shas = build_repo(tmp_path / "repo")
    with Stack(tmp_path, workers=2, worker_env=FIELD_ENV) as stack:
        stack.deliver("pull_request",
                      open_pr(stack, shas, (tmp_path / "repo").as_uri(), "pr/slow", 1))
        busy = wait_until(lambda: job_worker(stack), 60, "the job did not start")
        wait_until(lambda: check_runs(stack, shas["pr/slow"]), 30, "no check run was created")
        time.sleep(1)  # into the slow target
        redis = stack.procs[0]
        redis.terminate()
        redis.wait(timeout=30)
        time.sleep(1)  # the workers' poll loops have met the outage
        workers = _workers(stack)
        assert busy in workers and all(p.poll() is None for p in workers)
        started = time.monotonic()
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=scaled(60)) for proc in workers]
        took_s = time.monotonic() - started
        assert codes == [0, 0]
        assert took_s < scaled(STOP_BOUND_S), f"the workers took {took_s:.1f} s to stop"
        (run,) = check_runs(stack, shas["pr/slow"])
        assert run["status"] == "in_progress"  # left to the job's next try
        logs = "".join((tmp_path / f"worker-{i}.log").read_text() for i in range(2))
        assert "cancels its 1 running job(s) now" in logs, logs[-3000:]
        assert "Traceback" not in logs, logs[-3000:]
