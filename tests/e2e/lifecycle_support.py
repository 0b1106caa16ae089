"""What the run lifecycle's end-to-end tests share (tests/e2e/test_lifecycle*_e2e.py).

The field case's worker settings (job timeout 60 s, 3 tries, lease 6 s), a slow run started on
two workers, and SIGKILLing the worker that runs its job.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from tests.e2e.ops_support import build_repo, check_runs, open_pr, wait_until
from worker.cli.demo import Stack

#: The job lease (s). 3 s lost leases under load (CI: a try whose renewal, every third of the
#: lease, waited past it for the CPU was tried again, until the tries ran out and the check run
#: concluded ``timed_out``); 6 s still resumes long before arq's 70 s.
LEASE_S = 6
#: The field case's worker settings: job timeout 60 s, 3 tries, the lease `LEASE_S`, a sweep
#: every 5 s.
FIELD_ENV = {"LLMGATE_JOB_TIMEOUT_S": "60", "LLMGATE_JOB_MAX_TRIES": "3",
             "LLMGATE_JOB_LEASE_S": str(LEASE_S), "LLMGATE_SWEEP_INTERVAL_S": "5"}
#: arq's own in-progress TTL for these settings: the longest timeout (60 s) + 10 s.
ARQ_IN_PROGRESS_S = 70
#: After the lease runs out, a worker polls the queue (every 0.5 s) and starts the job.
POLL_SLACK_S = 2.5


def running_try(stack: Stack) -> int:
    """The try of the one registered gate run whose job is running now (0: none)."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        for key in client.keys("llmgate:run:*"):
            entry = client.hgetall(key)
            job_id = entry[b"job_id"].decode()
            if client.exists(f"arq:in-progress:{job_id}"):
                return int(entry[b"attempt"])
        return 0
    finally:
        client.close()


def wait_forgotten(stack: Stack) -> None:
    """Wait (up to 5 s) until no run is registered. Whoever concludes a check run (the job or
    the sweeper) forgets its run right after GitHub answers the PATCH, so a test that saw the
    conclusion can read Redis a moment before the entry is gone."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        wait_until(lambda: not client.keys("llmgate:run:*"), 5, "the run was not forgotten")
    finally:
        client.close()


def job_worker(stack: Stack) -> subprocess.Popen[bytes] | None:
    """The live worker process whose heartbeat says it runs a job (ids ``host:pid:random``)."""
    beats = redis.Redis.from_url(stack.redis_url).hgetall("llmgate:metrics:workers")
    busy = {int(wid.decode().split(":")[-2]) for wid, raw in beats.items()
            if json.loads(raw)["running"] > 0}
    live = [p for p in stack.procs if "arq" in p.args and p.poll() is None and p.pid in busy]
    return live[0] if len(live) == 1 else None


def kill_the_job_worker(stack: Stack, attempt: int) -> float:
    """Wait for try ``attempt`` to run, SIGKILL its worker; start a replacement. Kill time."""
    wait_until(lambda: running_try(stack) == attempt and job_worker(stack), ARQ_IN_PROGRESS_S,
               f"try {attempt} did not start")
    time.sleep(0.5)  # into the run
    worker = job_worker(stack)
    assert worker is not None
    worker.kill()
    worker.wait(timeout=10)
    killed = time.monotonic()
    stack.start_worker(f"worker-after-kill-{attempt}")
    return killed


@contextmanager
def slow_run_started(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    """Two workers with `FIELD_ENV`, gating PR 1 (``pr/slow``) until its check run is in
    progress; yield the stack and the PR's head SHA."""
    shas = build_repo(tmp_path / "repo")
    with Stack(tmp_path, workers=2, worker_env=FIELD_ENV) as stack:
        stack.deliver("pull_request",
                      open_pr(stack, shas, (tmp_path / "repo").as_uri(), "pr/slow", 1))
        wait_until(lambda: in_progress_run(stack, shas["pr/slow"]), 60, "the run did not start")
        yield stack, shas["pr/slow"]


def in_progress_run(stack: Stack, head_sha: str) -> dict[str, Any] | None:
    """The newest ``llmgate`` check run of ``head_sha`` if it is in progress, else None."""
    runs = check_runs(stack, head_sha)
    return runs[-1] if runs and runs[-1]["status"] == "in_progress" else None


def run_summary(run: dict[str, Any]) -> str:
    """The summary of a check run's output (as the fake GitHub recorded it)."""
    summary: str = run["output"]["summary"]
    return summary
