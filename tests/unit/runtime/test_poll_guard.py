"""Redis dropping the connection inside any step of arq's poll iteration must not end the worker
(issue 32, item 1: worker/runtime/poll_guard.py).

A real ``redis-server`` drops the real connection: right before the named command of the step
goes out, an admin client has Redis kill the connection it is about to go out on (``CLIENT KILL
ADDR``), so that command meets a closed connection. With the worker's patient pool (production)
a drop outside a watch is retried by the pool, and one inside a watch (a claim, a cron enqueue)
escapes as ``WatchError``; with a pool that retries nothing, every drop escapes to the loop.
Either way a guarded worker keeps polling, runs the queued jobs and gives every job slot back;
an unguarded one ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import in_progress_key_prefix
from arq.cron import cron
from arq.jobs import Job
from arq.worker import Worker
from redis.asyncio.connection import Connection

from worker.runtime.poll_guard import guard_poll_loop
from worker.runtime.redis_checks import retry_options

RAN: list[int] = []
MAX_JOBS = 2


async def noted(ctx: dict[str, Any], n: int) -> int:
    """The job: note that it ran."""
    RAN.append(n)
    return n


async def ticked(ctx: dict[str, Any]) -> None:
    """A cron job (enqueued by ``run_cron`` at the first poll)."""


class GuardedWorker(Worker):
    """arq's worker, its poll loop guarded (a subclass, so arq's own class is left be)."""


class PlainWorker(Worker):
    """arq's worker as it is, even once a worker's settings guarded arq's class."""


for _name in ("_poll_iteration", "start_jobs", "_cancel_aborted_jobs", "run_job",
              "record_health", "run_cron"):
    _method = getattr(Worker, _name)
    setattr(PlainWorker, _name, getattr(_method, "__wrapped__", _method))
guard_poll_loop(GuardedWorker)

#: Each Redis step of the iteration, and the command inside it before which Redis drops the
#: connections (EXISTS: after the step's WATCH).
STEPS = {"_poll_iteration": "ZRANGEBYSCORE", "start_jobs": "EXISTS",
         "_cancel_aborted_jobs": "ZREMRANGEBYSCORE", "run_job": "INCRBY",
         "record_health": "PSETEX", "run_cron": "EXISTS"}


@dataclass
class Dropper:
    """Drops a connection right before ``command`` is sent on it within an armed step."""

    admin: redis.Redis
    command: bytes = b""
    armed: bool = False
    fired: list[str] = field(default_factory=list)

    def hit(self, connection: Connection, packed: Any) -> None:
        """Drop ``connection`` when ``packed`` (a command or a pipeline) holds the command."""
        data = packed if isinstance(packed, bytes | str) else b"".join(packed)
        data = data.encode() if isinstance(data, str) else data
        if self.armed and not self.fired and b"\r\n" + self.command + b"\r\n" in data.upper():
            host, port = connection._writer.get_extra_info("sockname")[:2]  # type: ignore[union-attr]
            self.admin.client_kill_filter(_id=None, addr=f"{host}:{port}")
            self.fired.append(self.command.decode())

    def arm(self, worker: Worker, step: str) -> None:
        """Arm the drop on the worker's first call of ``step``."""
        original: Callable[..., Any] = getattr(worker, step)
        self.command = STEPS[step].encode()

        async def armed(*args: Any, **kwargs: Any) -> Any:
            self.armed = not self.fired
            try:
                return await original(*args, **kwargs)
            finally:
                self.armed = False

        setattr(worker, step, armed)


@pytest.fixture()
def dropper(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dropper]:
    admin = redis.Redis.from_url(redis_url)
    dropping = Dropper(admin)
    send = Connection.send_packed_command

    async def send_packed_command(self: Connection, command: Any, check_health: bool = True,
                                  ) -> None:
        dropping.hit(self, command)
        await send(self, command, check_health)

    monkeypatch.setattr(Connection, "send_packed_command", send_packed_command)
    yield dropping
    admin.close()


async def _pool(redis_url: str, patient: bool) -> ArqRedis:
    settings = RedisSettings.from_dsn(redis_url)
    if patient:  # the worker's own pool (worker/main.py)
        for name, value in retry_options().items():
            setattr(settings, name, value)
    arq = await create_pool(settings)
    await arq.flushdb()
    return arq


@pytest.fixture(params=["patient", "plain"])
async def pool(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[ArqRedis]:
    arq = await _pool(redis_url, request.param == "patient")
    yield arq
    await arq.aclose()


def _worker(worker_class: type[Worker], pool: ArqRedis) -> Worker:
    return worker_class(functions=[noted], cron_jobs=[cron(ticked, run_at_startup=True)],
                        redis_pool=pool, poll_delay=0.05, max_jobs=MAX_JOBS,
                        handle_signals=False, health_check_interval=0, allow_abort_jobs=True)


async def _until(done: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not done():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("step", list(STEPS))
async def test_a_connection_dropped_inside_any_step_does_not_end_the_poll_loop(
        step: str, pool: ArqRedis, dropper: Dropper) -> None:
    RAN.clear()
    for n in (7, 8):
        assert await pool.enqueue_job("noted", n, _job_id=f"job-{n}") is not None
    worker = _worker(GuardedWorker, pool)
    dropper.arm(worker, step)
    free = worker.sem._value
    loop = asyncio.create_task(worker.main())
    try:
        # run_job: the job whose start met the drop waits for its claim to expire (as after a
        # killed worker); the other one runs. Every other step: both run.
        wanted = 1 if step == "run_job" else 2
        await _until(lambda: len({7, 8} & set(RAN)) >= wanted and not worker.tasks
                     or loop.done())
        assert dropper.fired == [STEPS[step]]
        assert not loop.done(), loop.exception()  # still polling
        await asyncio.sleep(0.3)  # several more polls
        assert not loop.done()
        assert (worker.job_counter, worker.sem._value) == (0, free)  # every slot back
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        await worker.close()


@pytest.mark.parametrize("step", list(STEPS))
async def test_without_the_guard_a_dropped_connection_ends_the_worker(
        step: str, redis_url: str, dropper: Dropper) -> None:
    """The same drops reach the loop of arq's own worker (with a pool that retries nothing)."""
    arq = await _pool(redis_url, patient=False)
    for n in (7, 8):
        await arq.enqueue_job("noted", n, _job_id=f"job-{n}")
    worker = _worker(PlainWorker, arq)
    dropper.arm(worker, step)
    try:
        with pytest.raises(redis.RedisError):
            async with asyncio.timeout(10):
                await worker.main()
        assert dropper.fired == [STEPS[step]]
    finally:  # the jobs the dead loop left running
        for task in worker.tasks.values():
            task.cancel()
        await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
        worker.tasks.clear()
        await worker.close()


TRIES: list[int] = []


async def slow(ctx: dict[str, Any], n: int) -> int:
    """A job that runs long enough for its claim to lapse meanwhile."""
    TRIES.append(ctx["job_try"])
    await asyncio.sleep(0.8)
    return n


async def test_a_job_whose_claim_lapsed_is_not_claimed_again_by_the_worker_running_it(
        redis_url: str) -> None:
    """Issue 32's fresh user: a Redis restart longer than the lease let the worker claim try 2
    of the job it was running; arq keeps tasks by job id, so try 1's end removed try 2's entry
    and try 2 ended in a KeyError traceback, its result a failure."""
    TRIES.clear()
    arq = await _pool(redis_url, patient=True)
    worker = GuardedWorker(functions=[slow], redis_pool=arq, poll_delay=0.05, max_jobs=2,
                           handle_signals=False, health_check_interval=0)
    await arq.enqueue_job("slow", 1, _job_id="lapsed")
    loop = asyncio.create_task(worker.main())
    try:
        await _until(lambda: bool(TRIES))
        await arq.delete(in_progress_key_prefix + "lapsed")  # the claim lapsed with Redis away
        await _until(lambda: not worker.tasks or loop.done())
        assert not loop.done(), loop.exception()
        info = await Job("lapsed", arq).result_info()
        assert TRIES == [1]
        assert info is not None and (info.success, info.result) == (True, 1)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        await worker.close()
        await arq.aclose()
