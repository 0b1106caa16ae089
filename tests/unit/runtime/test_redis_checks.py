"""The queue's Redis at start-up (refused when it can evict or is a cluster, warned about when
it has no persistence), clients that outlive its restarts, and the wipe epoch; real
``redis-server`` processes throughout."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.exceptions import AuthenticationError

from app.main import check_queue_redis as web_check
from app.settings import SettingsError as WebSettingsError
from tests.conftest import free_port
from tests.e2e.chaos_processes import RedisOptions, RedisProcess
from worker.contract import queue_redis_refusal, queue_redis_warnings
from worker.runtime.epoch import EPOCH_KEY, FIRST, KEPT, LOST, EpochWatch
from worker.runtime.redis_checks import check_queue_redis, patient_redis
from worker.runtime.settings import SettingsError

NO_PERSISTENCE = ("the queue's Redis (REDIS_URL) has AOF off and no RDB snapshots: a restart "
                  "empties the queue; set appendonly yes")


@pytest.fixture()
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    """A ``redis-server`` of its own, with the test's `RedisOptions` (param) and started."""
    started = RedisProcess(tmp_path, "redis", getattr(request, "param", RedisOptions()))
    started.start()
    yield started
    started.stop()


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random",
                                    "volatile-lru", "volatile-lfu", "volatile-random",
                                    "volatile-ttl"])
def test_every_evicting_policy_is_refused_naming_the_setting(policy: str) -> None:
    refusal = queue_redis_refusal({"maxmemory_policy": policy, "redis_mode": "standalone"})
    assert refusal is not None and f"maxmemory-policy of the queue's Redis (REDIS_URL) is " \
        f"{policy}, which can evict queued gates" in refusal


def test_noeviction_passes_and_a_cluster_or_an_unread_policy_is_refused() -> None:
    assert queue_redis_refusal({"maxmemory_policy": "noeviction"}) is None
    cluster = queue_redis_refusal({"maxmemory_policy": "noeviction", "cluster_enabled": "1"})
    assert cluster is not None and "cluster mode (cluster-enabled yes)" in cluster
    unread = queue_redis_refusal({})
    assert unread is not None and unread.startswith("maxmemory-policy of the queue's Redis "
                                                    "(REDIS_URL) cannot be read")


def test_persistence_off_is_a_warning_and_aof_or_rdb_is_none() -> None:
    assert queue_redis_warnings({"aof_enabled": "0", "save": ""}) == [NO_PERSISTENCE]
    assert queue_redis_warnings({"aof_enabled": "1"}) == []
    assert queue_redis_warnings({"aof_enabled": "0", "save": "3600 1"}) == []
    assert "RDB snapshots unknown: CONFIG is refused" in queue_redis_warnings(
        {"aof_enabled": "0"})[0]


@pytest.mark.parametrize("server", [RedisOptions(policy="volatile-lru"),
                                    RedisOptions(policy="allkeys-lru", config_disabled=True)],
                         indirect=True, ids=["config", "info-only"])
def test_both_processes_refuse_an_evicting_redis(server: RedisProcess) -> None:
    """Read by CONFIG GET, or by INFO when CONFIG is renamed away (managed Redis)."""
    for check in (check_queue_redis, web_check):
        with pytest.raises((SettingsError, WebSettingsError),
                           match="maxmemory-policy of the queue's Redis [(]REDIS_URL[)] is "
                                 "(volatile|allkeys)-lru"):
            check(server.url)


@pytest.mark.parametrize("server", [RedisOptions(), RedisOptions(appendonly=True)],
                         indirect=True, ids=["no-persistence", "aof"])
def test_a_noeviction_redis_passes_with_a_warning_only_without_persistence(
        server: RedisProcess) -> None:
    expected = [] if server.options.appendonly else [NO_PERSISTENCE]
    assert check_queue_redis(server.url) == expected
    assert web_check(server.url) == expected


def test_the_worker_waits_for_redis_and_the_web_process_does_not() -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(SettingsError, match="REDIS_URL does not answer within 0 s"):
        check_queue_redis(down, wait_s=0.2)
    assert "does not answer: its maxmemory-policy is not checked" in web_check(down)[0]


async def test_a_client_outlives_a_redis_restart(server: RedisProcess) -> None:
    """A command sent while Redis is down waits for it and succeeds once it is back, on a
    connection that was lost and on one that must first connect."""
    client, fresh = patient_redis(server.url), patient_redis(server.url)
    try:
        await client.set("k", "v")
        server.stop()
        pending = asyncio.create_task(client.set("k", "after"))
        connecting = asyncio.create_task(fresh.incr("n"))
        await asyncio.sleep(0.5)
        assert not pending.done() and not connecting.done()  # still retrying, not failed
        await asyncio.to_thread(server.start)
        assert await asyncio.wait_for(pending, 10) is True
        assert await asyncio.wait_for(connecting, 10) == 1
        assert await client.get("k") == b"after"
    finally:
        await client.aclose()
        await fresh.aclose()


async def test_a_refused_password_is_not_retried(redis_server: str) -> None:
    admin = redis.Redis.from_url(redis_server)
    admin.acl_setuser("gated", enabled=True, passwords=["+right"], keys=["*"],
                      commands=["+@all"], reset=True)
    wrong = redis_server.replace("redis://", "redis://gated:wrong@")
    client = patient_redis(wrong)
    try:
        with pytest.raises(AuthenticationError):
            await asyncio.wait_for(client.ping(), 5)
        with pytest.raises(SettingsError, match="REDIS_URL is refused by Redis"):
            check_queue_redis(wrong)
    finally:
        await client.aclose()
        admin.acl_deluser("gated")
        admin.close()


async def test_the_epoch_tells_one_caller_of_each_wipe(redis) -> None:  # type: ignore[no-untyped-def]
    watches = [EpochWatch() for _ in range(5)]
    assert await watches[0].check(redis) == FIRST  # a new Redis: no epoch yet, none seen
    assert [await w.check(redis) for w in watches] == [KEPT] * 5
    await redis.flushdb()  # the data is gone, as after a restart without persistence
    told = await asyncio.gather(*(w.check(redis) for w in watches))
    assert sorted(told) == [KEPT, KEPT, KEPT, KEPT, LOST]
    assert await redis.exists(EPOCH_KEY) == 1 and await redis.ttl(EPOCH_KEY) == -1


async def test_a_stopping_worker_asks_redis_before_it_takes_a_stale_outage_for_real(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Field case (fresh-clone review): the outage mark is cleared only by a call that
    succeeds; a call that saw Redis go away and was then cancelled left it set after Redis came
    back, and a worker told to stop 3 s later cancelled its running jobs at once, with Redis
    answering. The grace now PINGs Redis first and keeps waiting for its jobs."""
    from worker.runtime import redis_checks, stopping

    monkeypatch.setattr(redis_checks._Stopping, "signal", None)
    monkeypatch.setattr(redis_checks._Outage, "since", None)
    monkeypatch.setattr(redis_checks, "STOP_PATIENCE_S", 0.2)
    away = patient_redis(f"redis://127.0.0.1:{free_port()}/0")
    call = asyncio.create_task(away.ping())  # Redis "away": the outage is marked
    await asyncio.sleep(0.3)
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    await away.aclose()
    assert redis_checks.outage_s() is not None
    redis_checks.note_stopping("SIGTERM")
    await asyncio.sleep(0.3)
    assert redis_checks.stopped_waiting()  # the stale mark alone says "stop waiting"

    pool = patient_redis(redis_url)  # the worker's Redis, which answers
    job = asyncio.create_task(asyncio.sleep(30))
    worker = type("Worker", (), {"tasks": {"job": job}, "pool": pool})()
    try:
        with pytest.raises(TimeoutError):  # the grace keeps waiting for the running job
            async with asyncio.timeout(1.0):
                await stopping._sleep_until_tasks_complete(worker)  # type: ignore[arg-type]
        assert redis_checks.outage_s() is None and not redis_checks.stopped_waiting()
    finally:
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)
        await pool.aclose()
