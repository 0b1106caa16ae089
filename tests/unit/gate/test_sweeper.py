"""The sweeper with a real redis-server, arq's own result format and the fake GitHub.

Each case registers a run whose check run is really ``in_progress`` on the fake GitHub, puts
the job where arq would have it (running, queued, or finished with a given result), sweeps
once, and checks what the check run and the registry show afterwards.
"""

from __future__ import annotations

import pytest
from arq.constants import default_queue_name, in_progress_key_prefix
from arq.worker import JobExecutionFailed
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import runs_support
from tests.unit.runs_support import (
    COMMENT_HINT,
    HEAD_SHA,
    check_run,
    store_result,
)
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO
from worker.errors import ExecutionError
from worker.gate.registry import RunEntry, RunRegistry, new_entry
from worker.gate.sweeper import LOST_REASON, sweep
from worker.github.client import GitHubClient, GitHubUnavailable
from worker.runtime.lease import JobLimits

JOB = "gate:acme/tiny#1@" + HEAD_SHA
LIMITS = JobLimits(job_timeout_s=60, lease_s=3, max_tries=3, sweep_interval_s=5)
ALIVE = {"concluded": 0, "forgotten": 0, "alive": 1}

fake_gh, gh = runs_support.fake_gh, runs_support.gh  # fixtures


async def _registered(redis: Redis, gh: GitHubClient, attempt: int = 3) -> RunEntry:
    check_run_id = await gh.create_check_run(OWNER, REPO, HEAD_SHA, output={
        "title": "llmgate: running", "summary": "Running."})
    entry = new_entry(JOB, check_run_id, INSTALLATION_ID, OWNER, REPO, 1, HEAD_SHA, attempt)
    await RunRegistry(redis).put(entry)
    return entry


async def _sweep(redis: Redis, gh: GitHubClient) -> dict[str, int]:
    return await sweep(redis, lambda installation_id: gh, LIMITS)


async def test_tries_used_up_conclude_timed_out_with_the_explanation(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    entry = await _registered(redis, gh, attempt=3)
    await store_result(redis, JOB, success=False, job_try=4,
                       result=JobExecutionFailed("max 3 retries exceeded"))
    assert await _sweep(redis, gh) == {"concluded": 1, "forgotten": 0, "alive": 0}
    run = check_run(fake_gh, entry.check_run_id)
    assert (run["status"], run["conclusion"]) == ("completed", "timed_out")
    assert run["output"]["title"] == "llmgate: the run timed out"
    assert run["output"]["summary"] == (
        "The worker running this check stopped 3 times before the run finished (killed, "
        "restarted or out of memory), so llmgate gave up on it." + COMMENT_HINT)
    assert await RunRegistry(redis).run_ids() == []
    assert await _sweep(redis, gh) == {"concluded": 0, "forgotten": 0, "alive": 0}
    assert fake_gh.state()["violations"] == []


@pytest.mark.parametrize(("result", "summary"), [
    (None, LOST_REASON),
    (JobExecutionFailed("job expired"), LOST_REASON),
    (TimeoutError(), "The run took longer than the job time limit (60 s, "
                             "`LLMGATE_JOB_TIMEOUT_S` of the worker)."),
])
async def test_lost_and_timed_out_jobs_are_concluded(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer,
        result: Exception | None, summary: str) -> None:
    entry = await _registered(redis, gh)
    if result is not None:
        await store_result(redis, JOB, success=False, result=result)
    assert (await _sweep(redis, gh))["concluded"] == 1
    run = check_run(fake_gh, entry.check_run_id)
    assert run["conclusion"] == "timed_out"
    assert run["output"]["summary"] == summary + COMMENT_HINT


@pytest.mark.parametrize("where", ["running", "queued", "deferred retry"])
async def test_running_or_queued_jobs_are_left_alone(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer, where: str) -> None:
    entry = await _registered(redis, gh)
    await redis.zadd(default_queue_name, {JOB: 10**13 if where == "deferred retry" else 1})
    if where == "running":
        await redis.set(in_progress_key_prefix + JOB, b"1", px=3000)
    assert await _sweep(redis, gh) == ALIVE
    assert check_run(fake_gh, entry.check_run_id)["status"] == "in_progress"
    assert await RunRegistry(redis).run_ids() == [entry.run_id]


async def test_a_run_that_succeeded_is_only_forgotten(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    entry = await _registered(redis, gh)
    await store_result(redis, JOB, success=True,
                       result={"conclusion": "success", "head_sha": HEAD_SHA})
    requests_before = len(fake_gh.state()["requests"])
    assert await _sweep(redis, gh) == {"concluded": 0, "forgotten": 1, "alive": 0}
    assert len(fake_gh.state()["requests"]) == requests_before  # the check run is untouched
    assert check_run(fake_gh, entry.check_run_id)["status"] == "in_progress"
    assert await RunRegistry(redis).run_ids() == []


@pytest.mark.parametrize("error", [
    GitHubUnavailable("PATCH /repos/o/r/check-runs/1: GitHub answered 502 after retries", 502),
    ExecutionError("git failed"),
])
async def test_a_job_that_raised_before_concluding_gets_failure(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer, error: Exception) -> None:
    """Case from the field: GitHub answered 502 to every PATCH of the check run through all
    three tries; once GitHub is back the sweeper concludes the check instead of forgetting it.

    A job forgets its run when it concludes the check run, so a run still registered after
    its job raised was never concluded.
    """
    entry = await _registered(redis, gh)
    await store_result(redis, JOB, success=False, result=error)
    assert await _sweep(redis, gh) == {"concluded": 1, "forgotten": 0, "alive": 0}
    concluded = check_run(fake_gh, entry.check_run_id)
    assert (concluded["status"], concluded["conclusion"]) == ("completed", "failure")
    assert concluded["output"]["summary"].startswith(
        f"The run could not finish: it failed with {type(error).__name__} on its last try")
    assert await RunRegistry(redis).run_ids() == []


async def test_github_failing_keeps_the_run_for_the_next_sweep(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    entry = await _registered(redis, gh)
    fake_gh.setup({"faults": [{"operation": "checks/update", "status": 502, "times": 2}]})
    assert await _sweep(redis, gh) == {"concluded": 0, "forgotten": 0, "alive": 0}
    assert await RunRegistry(redis).run_ids() == [entry.run_id]
    assert (await _sweep(redis, gh))["concluded"] == 1
    assert check_run(fake_gh, entry.check_run_id)["conclusion"] == "timed_out"


async def test_an_index_member_without_its_entry_is_dropped(redis: Redis,
                                                            gh: GitHubClient) -> None:
    await redis.zadd("llmgate:runs", {"gone-job|1": 1.0})
    assert await _sweep(redis, gh) == {"concluded": 0, "forgotten": 1, "alive": 0}
    assert await redis.zcard("llmgate:runs") == 0
