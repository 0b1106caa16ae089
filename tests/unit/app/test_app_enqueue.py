"""The one-round-trip mark-and-enqueue script against a real redis-server and a real arq Worker.

The script writes arq's keys itself, so these tests pin arq's layout: a burst-mode arq
``Worker`` must run what the script queued, with the right function, argument and job id, and
arq's own uniqueness rule (job key or result key present) must hold. An arq release that changes
its key names or job format fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from arq.connections import ArqRedis
from arq.constants import default_queue_name, expires_extra_ms, job_key_prefix, result_key_prefix
from arq.worker import Worker, func
from redis.asyncio import ConnectionPool

from app.enqueue import (
    BODY_KEY_PREFIX,
    SCRIPT_SHA,
    Outcome,
    body_digest,
    mark_and_enqueue,
)
from app.redis_pipe import RedisPipe
from app.routes.decision import PlannedJob
from worker.contract import (
    DELIVERY_KEY_PREFIX,
    DELIVERY_TTL_S,
    JOB_GATE_PULL_REQUEST,
    GatePayload,
    RepoRef,
    gate_job_id,
)

REPO = RepoRef(owner="octo", name="bot", clone_url="https://github.com/octo/bot.git")
HEAD_SHA = "a" * 40
# arq's Worker.close calls redis-py's deprecated close(); nothing of ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")


def planned(delivery_id: str, head_sha: str = HEAD_SHA) -> PlannedJob:
    """Return the gate job a ``synchronize`` delivery of PR #7 at ``head_sha`` plans."""
    payload = GatePayload(delivery_id=delivery_id, installation_id=42, repo=REPO, pr_number=7,
                          head_sha=head_sha, base_sha="b" * 40, base_ref="main")
    return PlannedJob(JOB_GATE_PULL_REQUEST, payload, gate_job_id(REPO, 7, head_sha))


def digest(delivery_id: str) -> str:
    """Return the body digest of a distinct delivery body made from ``delivery_id``."""
    return body_digest(f'{{"delivery": "{delivery_id}"}}'.encode())


@pytest.fixture()
async def queue(redis_url: str) -> AsyncIterator[ArqRedis]:
    """An arq client on the test database."""
    client = ArqRedis(ConnectionPool.from_url(redis_url))
    yield client
    await client.aclose(close_connection_pool=True)


@pytest.fixture()
async def pipe(redis_url: str) -> AsyncIterator[RedisPipe]:
    """The receiver's pipelined connection, on its own pool (arq's Worker closes the other)."""
    pool = ConnectionPool.from_url(redis_url)
    yield RedisPipe(pool, reply_timeout_s=5.0)
    await pool.aclose()


async def run_worker(queue: ArqRedis) -> list[tuple[str, Any]]:
    """Run a burst-mode arq Worker until the queue is empty; return (job id, argument) calls."""
    calls: list[tuple[str, Any]] = []

    async def gate(ctx: dict[str, Any], payload: Any) -> str:
        calls.append((ctx["job_id"], payload))
        return "done"

    worker = Worker([func(gate, name=JOB_GATE_PULL_REQUEST)], redis_pool=queue, burst=True,
                    poll_delay=0, handle_signals=False, keep_result=3600, max_tries=1)
    try:
        await worker.main()
        assert (worker.jobs_complete, worker.jobs_failed) == (len(calls), 0)
    finally:
        await worker.close()
    return calls


async def test_a_real_arq_worker_runs_the_queued_job_with_its_argument_and_id(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    job = planned("d-1")
    assert await mark_and_enqueue(pipe, "d-1", digest("d-1"), job) is Outcome.MARKED
    assert await run_worker(queue) == [(job.job_id, job.payload)]


async def test_the_job_matches_what_arq_enqueue_job_writes(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    job = planned("d-1")
    await mark_and_enqueue(pipe, "d-1", digest("d-1"), job)
    ours = await queue.queued_jobs()
    ours_ttl_ms = await queue.pttl(job_key_prefix + job.job_id)
    await queue.flushdb()
    await queue.enqueue_job(job.function, job.payload, _job_id=job.job_id)
    theirs = await queue.queued_jobs()
    assert [(j.function, j.args, j.kwargs, j.job_try, j.job_id) for j in ours] == [
        (j.function, j.args, j.kwargs, j.job_try, j.job_id) for j in theirs]
    assert ours[0].score == int(ours[0].enqueue_time.timestamp() * 1000)
    assert expires_extra_ms - 60_000 < ours_ttl_ms <= expires_extra_ms


async def test_a_second_delivery_for_the_same_job_id_is_not_queued_twice(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    outcomes = [await mark_and_enqueue(pipe, f"d-{i}", digest(f"d-{i}"), planned(f"d-{i}"))
                for i in range(3)]
    assert outcomes == [Outcome.MARKED, Outcome.ALREADY_QUEUED, Outcome.ALREADY_QUEUED]
    assert await queue.zcard(default_queue_name) == 1
    assert [payload["delivery_id"] for _, payload in await run_worker(queue)] == ["d-0"]
    for i in range(3):
        assert await queue.exists(DELIVERY_KEY_PREFIX + f"d-{i}") == 1


async def test_a_job_id_with_a_kept_result_is_not_queued_again(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    job = planned("d-1")
    await mark_and_enqueue(pipe, "d-1", digest("d-1"), job)
    await run_worker(queue)
    assert await queue.exists(result_key_prefix + job.job_id) == 1
    outcome = await mark_and_enqueue(pipe, "d-2", digest("d-2"), planned("d-2"))
    assert outcome is Outcome.ALREADY_QUEUED
    assert await queue.zcard(default_queue_name) == 0


async def test_the_same_delivery_twice_is_a_duplicate_and_writes_nothing(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    assert await mark_and_enqueue(pipe, "d-1", digest("d-1"), planned("d-1")) is Outcome.MARKED
    before = sorted(await queue.keys("*"))
    other_head = planned("d-1", head_sha="c" * 40)
    # a redelivery by GitHub keeps its id; even with another body it is a duplicate
    assert await mark_and_enqueue(pipe, "d-1", digest("other"), other_head) is Outcome.DUPLICATE
    assert sorted(await queue.keys("*")) == before
    for key in (DELIVERY_KEY_PREFIX + "d-1", BODY_KEY_PREFIX + digest("d-1")):
        assert DELIVERY_TTL_S - 60 < await queue.ttl(key) <= DELIVERY_TTL_S


async def test_the_same_body_under_a_new_delivery_id_is_a_duplicate_and_writes_nothing(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    """A captured signed body replayed with a fresh X-GitHub-Delivery is refused."""
    assert await mark_and_enqueue(pipe, "d-1", digest("d-1"), planned("d-1")) is Outcome.MARKED
    await run_worker(queue)  # the first run is over: only the body mark can stop a second one
    await queue.delete(result_key_prefix + planned("d-1").job_id)
    before = sorted(await queue.keys("*"))
    outcome = await mark_and_enqueue(pipe, "replay-1", digest("d-1"), planned("replay-1"))
    assert outcome is Outcome.DUPLICATE
    assert sorted(await queue.keys("*")) == before
    assert await queue.zcard(default_queue_name) == 0
    assert await queue.exists(DELIVERY_KEY_PREFIX + "replay-1") == 0


async def test_a_delivery_without_a_job_is_only_marked(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    assert await mark_and_enqueue(pipe, "ping-1", digest("ping-1"), None) is Outcome.MARKED
    assert await mark_and_enqueue(pipe, "ping-1", digest("ping-1"), None) is Outcome.DUPLICATE
    assert sorted(await queue.keys("*")) == sorted(
        [(BODY_KEY_PREFIX + digest("ping-1")).encode(), (DELIVERY_KEY_PREFIX + "ping-1").encode()])


async def test_the_script_is_loaded_again_after_redis_forgets_it(
        queue: ArqRedis, pipe: RedisPipe) -> None:
    await mark_and_enqueue(pipe, "d-1", digest("d-1"), None)
    await queue.script_flush()
    assert await queue.script_exists(SCRIPT_SHA) == [False]
    assert await mark_and_enqueue(pipe, "d-2", digest("d-2"), planned("d-2")) is Outcome.MARKED
    assert await queue.script_exists(SCRIPT_SHA) == [True]
