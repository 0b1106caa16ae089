"""Run lifecycle with real processes: superseded runs, a SIGKILLed worker, tries running out.

Everything is a real process on loopback (``worker.cli.demo.Stack``: redis-server, the fake GitHub,
the web process, arq workers); the repository's ``pr/slow`` target sleeps, so a push or a
``kill -9`` lands while the run is busy.

- A push to the pull request cancels the running job of the older head: its check run ends
  ``cancelled`` with the reason, the new head's run completes, and the sticky comment only
  ever shows the new head. Closing a pull request cancels its running job the same way.
- The field case: job timeout 60 s, 3 tries, lease 3 s. SIGKILL the worker while the check is
  ``in_progress`` and start a new one: the job resumes within the lease (not after arq's
  60 + 10 s in-progress TTL) on the same check run, which reaches ``completed``. When every
  try is killed, the sweeper concludes the check run ``timed_out`` with the explanation.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.e2e.ops_support import OWNER, REPO, build_repo, check_runs, open_pr, wait_until
from worker.cli.demo import Stack, pull_request_payload

pytestmark = pytest.mark.slow

LEASE_S = 3
FIELD_ENV = {"LLMGATE_JOB_TIMEOUT_S": "60", "LLMGATE_JOB_MAX_TRIES": "3",
             "LLMGATE_JOB_LEASE_S": str(LEASE_S), "LLMGATE_SWEEP_INTERVAL_S": "5"}
#: arq's own in-progress TTL for these settings: the longest timeout (60 s) + 10 s.
ARQ_IN_PROGRESS_S = 70
#: After the lease runs out, a worker polls the queue (every 0.5 s) and starts the job.
POLL_SLACK_S = 2.5


def _in_progress(stack: Stack, head_sha: str) -> dict[str, Any] | None:
    runs = check_runs(stack, head_sha)
    return runs[-1] if runs and runs[-1]["status"] == "in_progress" else None


def _running_try(stack: Stack) -> int:
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


def _wait_forgotten(stack: Stack) -> None:
    """Wait (up to 5 s) until no run is registered. Whoever concludes a check run (the job or
    the sweeper) forgets its run right after GitHub answers the PATCH, so a test that saw the
    conclusion can read Redis a moment before the entry is gone."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        wait_until(lambda: not client.keys("llmgate:run:*"), 5, "the run was not forgotten")
    finally:
        client.close()


def _summary(run: dict[str, Any]) -> str:
    summary: str = run["output"]["summary"]
    return summary


def test_a_push_or_a_close_cancels_the_running_job_of_the_older_head(tmp_path: Path) -> None:
    shas = build_repo(tmp_path / "repo")
    clone_url = (tmp_path / "repo").as_uri()
    slow, quick = shas["pr/slow"], shas["pr/quick"]
    with Stack(tmp_path, workers=1) as stack:
        assert stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/slow", 1)
                             ).status_code == 202
        wait_until(lambda: _in_progress(stack, slow), 60, "the slow run did not start")
        time.sleep(1)  # into the slow target
        pushed = time.time()
        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/quick", 1, "synchronize"))
        (new,) = stack.wait_for_check(quick, timeout_s=90)
        (old,) = stack.wait_for_check(slow, timeout_s=30)
        assert (old["conclusion"], _summary(old)) == (
            "cancelled", f"Superseded by a push of {quick[:7]}.")
        assert old["output"]["title"] == "llmgate: cancelled"
        assert new["conclusion"] == "success"
        cancelled_at = max(r["at"] for r in stack.state()["requests"]
                           if r["operation"] == "checks/update"
                           and r["path"].endswith(f"/check-runs/{old['id']}"))
        assert cancelled_at - pushed < 10  # the watch polls every 2 s; the slow run needs 4+
        (comment,) = [c for c in stack.state()["comments"] if c["issue_number"] == 1]
        versions = [comment["body"], *comment.get("history", [])]  # every edit, oldest first
        assert quick[:7] in comment["body"]
        assert all(slow[:7] not in body for body in versions)

        stack.deliver("pull_request", open_pr(stack, shas, clone_url, "pr/slow", 2))
        wait_until(lambda: len(check_runs(stack, slow)) == 2 and _in_progress(stack, slow), 60,
                   "the second slow run did not start")
        closed = pull_request_payload("closed", owner=OWNER, repo=REPO, clone_url=clone_url,
                                      number=2, head_sha=slow, base_sha=shas["main"])
        stack.github("POST", "/_fake/setup", {"pulls": [{
            "owner": OWNER, "repo": REPO, "number": 2, "head_sha": slow,
            "base_sha": shas["main"], "base_ref": "main", "head_ref": "pr/slow",
            "clone_url": clone_url, "state": "closed"}]})
        answer = stack.deliver("pull_request", closed)
        assert (answer.status_code, answer.json()) == (200, {"status": "recorded"})
        runs = stack.wait_for_check(slow, count=2, timeout_s=30)
        assert [(r["conclusion"], _summary(r)) for r in runs][1] == (
            "cancelled", "The pull request was closed.")
        assert [c["issue_number"] for c in stack.state()["comments"]] == [1]
        assert stack.state()["violations"] == []


def _job_worker(stack: Stack) -> subprocess.Popen[bytes] | None:
    """The live worker process whose heartbeat says it runs a job (ids ``host:pid:random``)."""
    beats = redis.Redis.from_url(stack.redis_url).hgetall("llmgate:metrics:workers")
    busy = {int(wid.decode().split(":")[-2]) for wid, raw in beats.items()
            if json.loads(raw)["running"] > 0}
    live = [p for p in stack.procs if "arq" in p.args and p.poll() is None and p.pid in busy]
    return live[0] if len(live) == 1 else None


def _kill_the_job_worker(stack: Stack, attempt: int) -> float:
    """Wait for try ``attempt`` to run, SIGKILL its worker; start a replacement. Kill time."""
    wait_until(lambda: _running_try(stack) == attempt and _job_worker(stack), ARQ_IN_PROGRESS_S,
               f"try {attempt} did not start")
    time.sleep(0.5)  # into the run
    worker = _job_worker(stack)
    assert worker is not None
    worker.kill()
    worker.wait(timeout=10)
    killed = time.monotonic()
    stack.start_worker(f"worker-after-kill-{attempt}")
    return killed


@contextmanager
def _slow_run_started(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    """Two workers with `FIELD_ENV`, gating PR 1 (``pr/slow``) until its check run is in
    progress; yield the stack and the PR's head SHA."""
    shas = build_repo(tmp_path / "repo")
    with Stack(tmp_path, workers=2, worker_env=FIELD_ENV) as stack:
        stack.deliver("pull_request",
                      open_pr(stack, shas, (tmp_path / "repo").as_uri(), "pr/slow", 1))
        wait_until(lambda: _in_progress(stack, shas["pr/slow"]), 60, "the run did not start")
        yield stack, shas["pr/slow"]


def test_a_killed_worker_resumes_within_the_lease_on_the_same_check_run(tmp_path: Path) -> None:
    with _slow_run_started(tmp_path) as (stack, slow):
        killed = _kill_the_job_worker(stack, 1)
        wait_until(lambda: _running_try(stack) == 2, ARQ_IN_PROGRESS_S, "the job did not resume")
        resumed_s = time.monotonic() - killed
        assert resumed_s < LEASE_S + POLL_SLACK_S, resumed_s  # arq alone: 70 s
        (run,) = stack.wait_for_check(slow, timeout_s=60)
        assert (run["status"], run["conclusion"]) == ("completed", "success")
        assert time.monotonic() - killed < 30
        titles = [h["body"].get("output", {}).get("title") for h in run["history"]]
        assert titles[:2] == ["llmgate: running", "llmgate: running (try 2 of 3)"]
        assert len([c for c in stack.state()["comments"] if c["issue_number"] == 1]) == 1
        _wait_forgotten(stack)
        assert stack.state()["violations"] == []


def test_when_every_try_is_killed_the_sweeper_concludes_timed_out(tmp_path: Path) -> None:
    with _slow_run_started(tmp_path) as (stack, slow):
        for attempt in (1, 2, 3):
            killed = _kill_the_job_worker(stack, attempt)
        (run,) = stack.wait_for_check(slow, timeout_s=LEASE_S + POLL_SLACK_S + 5 + 10)
        concluded_s = time.monotonic() - killed  # the lease, then one sweep (every 5 s)
        assert concluded_s < LEASE_S + POLL_SLACK_S + 5 + 2, concluded_s
        assert (run["status"], run["conclusion"]) == ("completed", "timed_out")
        assert run["output"]["title"] == "llmgate: the run timed out"
        assert _summary(run) == (
            "The worker running this check stopped 3 times before the run finished (killed, "
            "restarted or out of memory), so llmgate gave up on it.\n\n"
            "Comment `/llmgate rerun` to try again.")
        _wait_forgotten(stack)
        assert stack.state()["comments"] == []
        assert stack.state()["violations"] == []
