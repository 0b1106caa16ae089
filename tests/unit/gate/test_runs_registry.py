"""The run registry, job states, job limits and the lease, against a real redis-server and arq.

The lease test runs a real arq ``Worker`` in this process: while a job runs, arq's
``arq:in-progress:<job id>`` key must live no longer than the lease (not arq's longest timeout
of any function plus 10 s), and must keep being renewed while the job outlives the lease.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from arq.connections import ArqRedis
from arq.constants import default_queue_name, in_progress_key_prefix
from arq.worker import Worker, func
from redis.asyncio import ConnectionPool, Redis

from worker.gate.registry import RUNS_INDEX, RunRegistry, job_state, new_entry, run_id
from worker.gate.sweeper import sweep_schedule
from worker.runtime.lease import CTX_KEY, JobLimits, current_job, hold_lease
from worker.runtime.lifecycle import observed
from worker.runtime.settings import SettingsError

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")


def _entry(job_id: str = "gate:acme/tiny#1@" + "a" * 40, pr: int = 1, attempt: int = 1):
    return new_entry(job_id, 555, 7, "acme", "tiny", pr, "a" * 40, attempt)


async def test_registry_put_get_remove_round_trip(redis: Redis) -> None:
    registry = RunRegistry(redis, ttl_s=100)
    entry = _entry()
    await registry.put(entry)
    assert await registry.get(entry.job_id, 1) == entry
    assert entry.run_id == f"{entry.job_id}|1" == run_id(entry.job_id, 1)
    assert await registry.get(entry.job_id, 2) is None  # another PR of the same job
    assert 95 <= await redis.ttl(f"llmgate:run:{entry.run_id}") <= 100
    assert await registry.run_ids() == [entry.run_id]
    assert await registry.run_ids(updated_before=entry.updated_at - 1) == []
    await registry.remove(entry.run_id)
    assert await registry.get(entry.job_id, 1) is None
    assert await registry.run_ids() == []
    assert await redis.exists(RUNS_INDEX) == 0


async def test_registry_put_replaces_and_reindexes(redis: Redis) -> None:
    registry = RunRegistry(redis)
    first = _entry()
    second = _entry(attempt=2)
    await registry.put(first)
    await registry.put(second)
    got = await registry.get(first.job_id, 1)
    assert got is not None and got.attempt == 2 and got.check_run_id == 555
    assert await registry.run_ids() == [first.run_id]


async def test_a_damaged_entry_reads_as_missing(redis: Redis) -> None:
    await redis.hset("llmgate:run:job|1", mapping={"job_id": "job", "check_run_id": "1"})
    assert await RunRegistry(redis).get("job", 1) is None


async def test_job_state_follows_arq_keys(redis: Redis) -> None:
    assert await job_state(redis, "j") == "gone"
    await redis.zadd(default_queue_name, {"j": 1})
    assert await job_state(redis, "j") == "queued"
    await redis.set(in_progress_key_prefix + "j", b"1")
    assert await job_state(redis, "j") == "in_progress"
    await redis.zrem(default_queue_name, "j")
    assert await job_state(redis, "j") == "in_progress"


@pytest.mark.parametrize(("env", "expected"), [
    ({}, JobLimits(3600, 60, 3, 60)),
    ({"LLMGATE_JOB_TIMEOUT_S": "60", "LLMGATE_JOB_LEASE_S": "3", "LLMGATE_JOB_MAX_TRIES": "3",
      "LLMGATE_SWEEP_INTERVAL_S": "5"}, JobLimits(60, 3, 3, 5)),
    ({"LLMGATE_SWEEP_INTERVAL_S": "300", "LLMGATE_JOB_MAX_TRIES": " 1 "},
     JobLimits(3600, 60, 1, 300)),
])
def test_job_limits_from_env(env: dict[str, str], expected: JobLimits) -> None:
    assert JobLimits.from_env(env) == expected


@pytest.mark.parametrize(("env", "message"), [
    ({"LLMGATE_JOB_LEASE_S": "2"}, "LLMGATE_JOB_LEASE_S must be a whole number >= 3, got '2'"),
    ({"LLMGATE_JOB_TIMEOUT_S": "1.5"},
     "LLMGATE_JOB_TIMEOUT_S must be a whole number >= 30, got '1.5'"),
    ({"LLMGATE_JOB_MAX_TRIES": "0"}, "LLMGATE_JOB_MAX_TRIES must be a whole number >= 1, got '0'"),
    ({"LLMGATE_JOB_TIMEOUT_S": "60", "LLMGATE_JOB_LEASE_S": "60"},
     "LLMGATE_JOB_LEASE_S (60) must be below LLMGATE_JOB_TIMEOUT_S (60)"),
    ({"LLMGATE_SWEEP_INTERVAL_S": "7"}, "LLMGATE_SWEEP_INTERVAL_S must divide 60 (e.g. 5, 15, "
     "30) or be whole minutes dividing an hour (60, 300, 600), got 7"),
    ({"LLMGATE_SWEEP_INTERVAL_S": "90"}, "got 90"),
])
def test_job_limits_refuse_bad_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        JobLimits.from_env(env)
    assert message in str(caught.value)


def test_sweep_schedule_fires_every_interval() -> None:
    assert sweep_schedule(15) == {"second": {0, 15, 30, 45}}
    assert sweep_schedule(60) == {"minute": set(range(60)), "second": 0}
    assert sweep_schedule(1200) == {"minute": {0, 20, 40}, "second": 0}


async def test_hold_lease_shortens_renews_and_takes_back(redis: Redis) -> None:
    key = in_progress_key_prefix + "job-1"
    await redis.psetex(key, 3_610_000, b"1")  # what arq sets: the longest timeout + 10 s
    task = asyncio.create_task(hold_lease(redis, "job-1", 0.6))
    try:
        await asyncio.sleep(0.1)
        assert 0 < await redis.pttl(key) <= 600
        await redis.delete(key)  # vanished (a stalled loop): taken back with SET NX
        await asyncio.sleep(0.35)
        assert 0 < await redis.pttl(key) <= 600
        await redis.set(key, b"other")  # another worker holds it: not overwritten
        await redis.persist(key)
        await asyncio.sleep(0.25)
        assert await redis.get(key) == b"other"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_running_job_holds_a_short_lease_and_sees_its_try(redis_url: str) -> None:
    seen: list[Any] = []

    async def slow(ctx: dict[str, Any], payload: Any) -> str:
        for _ in range(3):  # outlives the 1 s lease: renewals keep the key
            await asyncio.sleep(0.5)
            seen.append(await ctx["redis"].pttl(in_progress_key_prefix + ctx["job_id"]))
        job = current_job()
        assert job is not None
        seen.append((job.job_id, job.attempt, job.installation_id, job.last_try))
        return "done"

    queue = ArqRedis(ConnectionPool.from_url(redis_url))
    await queue.enqueue_job("slow", {"installation_id": 9}, _job_id="lease-job")
    limits = JobLimits(job_timeout_s=3600, lease_s=3, max_tries=2)
    worker = Worker([func(observed(slow), name="slow")], redis_pool=queue, burst=True,
                    poll_delay=0.05, handle_signals=False, job_timeout=3600,
                    ctx={CTX_KEY: limits})
    try:
        await worker.async_run()
    finally:
        await worker.close()
    *ttls, ident = seen
    assert all(0 < ttl <= 3000 for ttl in ttls), ttls  # arq alone: 3,610,000 ms
    assert ident == ("lease-job", 1, 9, False)
    assert worker.jobs_complete == 1
    assert await queue.exists(in_progress_key_prefix + "lease-job") == 0


def test_a_check_run_redis_refused_to_register_says_it_was_refused_not_unanswered() -> None:
    """Issue 32's fresh user: a full Redis answered but refused the registry write, and the
    check run it cancelled said "llmgate's Redis did not answer"."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import OutOfMemoryError

    from worker.gate.check_run import redis_failed

    assert redis_failed(OutOfMemoryError("OOM command not allowed")) == (
        "llmgate's Redis refused to store this run (out of memory); the run is tried again "
        "once it takes writes.")
    assert redis_failed(RedisConnectionError("refused")) == (
        "llmgate's Redis did not answer; the run is tried again.")
