"""A Redis that refuses writes (full, ``OOM`` under ``noeviction``) is one state of the worker,
logged once, shown by its heartbeat file and ``llmgate healthcheck``, holding its job claims,
and ended by the next accepted write (issue 32, item 2). A real ``redis-server`` is made full
with ``CONFIG SET maxmemory 1``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import in_progress_key_prefix
from arq.worker import Worker
from redis.exceptions import OutOfMemoryError

from worker.cli.healthcheck import check
from worker.runtime.lifecycle import flush_quietly, heartbeat_note
from worker.runtime.poll_guard import guard_poll_loop
from worker.runtime.redis_checks import (
    note_write_accepted,
    note_write_refused,
    patient_redis,
    refused_writes,
)

RAN: list[int] = []


async def noted(ctx: dict[str, Any], n: int) -> int:
    """The job: note that it ran."""
    RAN.append(n)
    return n


class HeldWorker(Worker):
    """arq's worker with the poll loop guarded."""


guard_poll_loop(HeldWorker)


@pytest.fixture()
def full(redis_url: str) -> Iterator[redis.Redis]:
    """An admin client of the test Redis; the state and ``maxmemory`` are reset after."""
    admin = redis.Redis.from_url(redis_url)
    yield admin
    admin.config_set("maxmemory", "0")
    admin.close()
    note_write_accepted()


@pytest.fixture()
async def pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    arq = await create_pool(RedisSettings.from_dsn(redis_url))
    yield arq
    await arq.aclose()


async def test_a_full_redis_is_noted_once_shown_and_ended_by_the_next_write(
        redis_url: str, full: redis.Redis, caplog: pytest.LogCaptureFixture,
        tmp_path: Path) -> None:
    client = patient_redis(redis_url)
    beat = tmp_path / "heartbeat"
    full.config_set("maxmemory", "1")
    for _ in range(3):  # each command of the worker's clients: one line for the episode
        with pytest.raises(OutOfMemoryError):
            await client.set("k", "v")
    assert not await flush_quietly(client)  # its heartbeat is refused too, quietly
    why, _ = refused_writes() or ("", 0.0)
    beat.write_text(heartbeat_note())
    healthy, said = check({"LLMGATE_HEARTBEAT_FILE": str(beat)})
    assert why == "out of memory" and "redis-refuses-writes=out of memory" in beat.read_text()
    assert not healthy and said.startswith("worker is up, but Redis refuses its writes "
                                           "(out of memory) for 0 s"), said
    full.config_set("maxmemory", "0")  # memory freed
    assert await client.get("k") is None and refused_writes() is not None  # a read: still on
    assert await flush_quietly(client)  # the heartbeat is accepted: the state ends
    beat.write_text(heartbeat_note())
    assert refused_writes() is None and check({"LLMGATE_HEARTBEAT_FILE": str(beat)})[0]
    lines = [r for r in caplog.records if r.name == "llmgate.redis"]
    assert [r.levelno for r in lines] == [logging.ERROR, logging.WARNING], caplog.text
    assert "Redis refuses writes (out of memory: OutOfMemoryError: " in lines[0].getMessage()
    assert "could not publish metrics" not in caplog.text
    await client.aclose()


async def test_no_job_is_claimed_while_redis_refuses_writes(pool: ArqRedis,
                                                            full: redis.Redis) -> None:
    """A claim that got through a Redis near its limit would start a job whose first write
    fails and spend one of its tries: jobs wait in the queue instead."""
    RAN.clear()
    await pool.enqueue_job("noted", 1, _job_id="held")
    worker = HeldWorker(functions=[noted], redis_pool=pool, burst=True, handle_signals=False)
    assert note_write_refused(OutOfMemoryError("command not allowed"))
    await worker.start_jobs([b"held"])
    assert worker.job_counter == 0 and not worker.tasks
    assert not await pool.exists(in_progress_key_prefix + "held")  # not claimed: still queued
    note_write_accepted()
    await worker.main()  # claims it now, runs it, stops (burst)
    assert RAN == [1]
    await worker.close()
