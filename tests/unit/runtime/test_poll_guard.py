"""A connection Redis drops while arq claims a job (between WATCH and EXEC) must not end the
worker (the soak's exit 1: worker/runtime/poll_guard.py). A real ``redis-server`` drops the
real connection: the claim's own connection asks Redis to kill it right after its WATCH."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.cron import cron
from arq.worker import Worker
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from worker.runtime.poll_guard import guard_job_claims
from worker.runtime.redis_checks import retry_options

RAN: list[int] = []


async def noted(ctx: dict[str, Any], n: int) -> int:
    """The job: note that it ran."""
    RAN.append(n)
    return n


class GuardedWorker(Worker):
    """arq's worker, its ``start_jobs`` guarded (a subclass, so arq's own class is left be)."""


class PlainWorker(Worker):
    """arq's worker as it is (unguarded even once a worker's settings guarded arq's class)."""

    start_jobs = getattr(Worker.start_jobs, "__wrapped__", Worker.start_jobs)
    run_cron = getattr(Worker.run_cron, "__wrapped__", Worker.run_cron)


@pytest.fixture()
async def pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    settings = RedisSettings.from_dsn(redis_url)
    for name, value in retry_options().items():  # the worker's patient pool
        setattr(settings, name, value)
    arq = await create_pool(settings)
    await arq.flushdb()
    yield arq
    await arq.aclose()


def _drop_after_watch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the next WATCH's connection be killed by Redis right after it answers."""
    original, dropped = Pipeline.watch, []

    async def watch(self: Pipeline, *names: Any) -> Any:
        answer = await original(self, *names)
        if not dropped:
            dropped.append(1)  # Redis closes the connection after this reply
            await self.immediate_execute_command("CLIENT", "KILL", "TYPE", "normal",
                                                 "SKIPME", "no")
        return answer

    monkeypatch.setattr(Pipeline, "watch", watch)
    return dropped


async def _claim(worker: Worker, arq: ArqRedis, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Queue a job, then claim it with its connection dropped after WATCH."""
    job = await arq.enqueue_job("noted", 7, _job_id="claim-me")
    assert job is not None
    dropped = _drop_after_watch(monkeypatch)
    await worker.start_jobs([b"claim-me"])
    return dropped


async def test_a_dropped_connection_while_claiming_leaves_the_job_for_the_next_poll(
        pool: ArqRedis, monkeypatch: pytest.MonkeyPatch) -> None:
    guard_job_claims(GuardedWorker)
    worker = GuardedWorker(functions=[noted], redis_pool=pool, burst=True, poll_delay=0.05,
                           max_jobs=2, handle_signals=False)
    RAN.clear()
    free = worker.sem._value
    dropped = await _claim(worker, pool, monkeypatch)  # no exception, no slot taken
    assert dropped == [1] and RAN == []
    assert (worker.job_counter, worker.sem._value) == (0, free)
    assert await pool.zscore("arq:queue", "claim-me") is not None  # still queued
    await worker.main()  # burst: claims what is queued on a new connection, runs it, stops
    assert RAN == [7] and worker.jobs_complete == 1
    await worker.close()


async def test_without_the_guard_the_worker_ends(pool: ArqRedis,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    worker = PlainWorker(functions=[noted], redis_pool=pool, burst=True, handle_signals=False)
    with pytest.raises(WatchError):
        await _claim(worker, pool, monkeypatch)
    await worker.close()


async def ticked(ctx: dict[str, Any]) -> None:
    """A cron job: note that it ran."""
    RAN.append(0)


def _cron_worker(worker_class: type[Worker], pool: ArqRedis) -> Worker:
    return worker_class(functions=[noted], cron_jobs=[cron(ticked, run_at_startup=True)],
                        redis_pool=pool, burst=True, handle_signals=False)


async def test_a_dropped_connection_while_enqueueing_a_cron_job_does_not_end_the_worker(
        pool: ArqRedis, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 (chaos e2e, a Redis restart): arq's cron enqueue is a watched transaction
    too, and its WatchError ended the worker (exit 1)."""
    guard_job_claims(GuardedWorker)
    worker = _cron_worker(GuardedWorker, pool)
    dropped = _drop_after_watch(monkeypatch)
    await worker.run_cron(datetime.now(tz=UTC), 0.5)  # no exception: that tick is skipped
    assert dropped == [1]
    await worker.close()
    plain = _cron_worker(PlainWorker, pool)
    monkeypatch.undo()
    _drop_after_watch(monkeypatch)
    with pytest.raises(WatchError):
        await plain.run_cron(datetime.now(tz=UTC), 0.5)
    await plain.close()
