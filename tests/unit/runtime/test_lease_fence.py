"""The fenced job lease (issue 32, item 3: worker/runtime/fence.py) against a real redis-server.

Two tries of one job may run at once once a lease lapsed. Each try keeps a token of its own in
``arq:in-progress:<job id>``; its renewals never overwrite another try's token; a key that
vanished is taken back only when no other try ran; every GitHub write checks the token right
before it is sent (not only at the renewal) and every provider call asks the lease; a try that
lost its lease ends quietly and arq leaves the job to the try that holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, result_key_prefix, retry_key_prefix
from arq.worker import Worker, func
from redis.asyncio import ConnectionPool, Redis

from tests.conftest import free_port
from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import HEAD_SHA, OWNER, REPO
from worker.evals.llm import client as llm_client
from worker.evals.llm_types import Endpoint
from worker.github.client import GitHubClient
from worker.runtime import fence
from worker.runtime.fence import Lease, LeaseLost, current_lease, fence_finished_jobs, guard_write
from worker.runtime.lease import CTX_KEY, JobLimits, hold_lease, job_scope
from worker.runtime.lifecycle import observed

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")

JOB = "gate:acme/tiny#1@" + "a" * 40
KEY = in_progress_key_prefix + JOB
ARQ_CLAIM_MS = 3_610_000  # what arq's start_jobs sets: the longest timeout + 10 s


async def _stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _until(check: Callable[[], bool], timeout_s: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_try_writes_its_token_and_never_overwrites_another_tries(redis: Redis) -> None:
    await redis.psetex(KEY, ARQ_CLAIM_MS, b"1")
    task = asyncio.create_task(hold_lease(redis, JOB, 0.6, attempt=1))
    try:
        await asyncio.sleep(0.1)
        value = await redis.get(KEY)
        assert value is not None and value.startswith(b"1:") and len(value) == 18  # its token
        assert 0 < await redis.pttl(KEY) <= 600
        await redis.set(KEY, b"2:0123456789abcdef")  # try 2 took the job over (no expiry)
        await asyncio.sleep(0.5)  # two renewals' time: the first sees it and stops
        assert await redis.get(KEY) == b"2:0123456789abcdef"
        assert await redis.pttl(KEY) == -1  # not even extended
        assert task.done()  # a lost lease is never renewed again
    finally:
        await _stop(task)


@pytest.mark.parametrize(("left", "taken_back"), [
    ({}, True),  # a Redis wipe took everything: the running try takes its key back
    ({retry_key_prefix + JOB: b"1"}, True),  # the key expired and no other try started
    ({retry_key_prefix + JOB: b"2"}, False),  # try 2 ran meanwhile (and was re-queued)
    ({result_key_prefix + JOB: b"done"}, False),  # another try finished the job
])
async def test_a_vanished_key_is_taken_back_only_when_no_other_try_ran(
        redis: Redis, left: dict[str, bytes], taken_back: bool) -> None:
    lease = Lease(redis, JOB, 1, 3)
    await redis.psetex(KEY, ARQ_CLAIM_MS, b"1")
    assert await lease.ask() is True
    await redis.delete(KEY)  # this try was paused beyond its lease
    for key, value in left.items():
        await redis.set(key, value)
    assert await lease.ask() is taken_back
    assert (await redis.get(KEY) == lease.token.encode()) is taken_back
    with contextlib.nullcontext() if taken_back else pytest.raises(LeaseLost):
        await guard_write_of(lease)


async def guard_write_of(lease: Lease) -> None:
    """``guard_write`` as a GitHub write inside ``lease``'s try would call it."""
    with fence.fenced(lease):
        await guard_write("PATCH /repos/acme/tiny/check-runs/1")


@pytest.fixture()
async def arq_pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = ArqRedis(ConnectionPool.from_url(redis_url))
    yield pool
    await pool.aclose()


def _ctx(redis: Redis, attempt: int = 1, lease_s: int = 3) -> dict[str, Any]:
    return {CTX_KEY: JobLimits(job_timeout_s=3600, lease_s=lease_s, max_tries=3),
            "redis": redis, "job_id": JOB, "job_try": attempt}


async def test_a_github_write_checks_the_token_at_the_write(
        redis: Redis, client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    await redis.psetex(KEY, ARQ_CLAIM_MS, b"1")
    async with job_scope(_ctx(redis), {"installation_id": fx.INSTALLATION_ID}):
        run_id = await client.create_check_run(OWNER, REPO, HEAD_SHA)  # the try holds it
        await redis.set(KEY, b"2:0123456789abcdef")  # taken over between two renewals
        lease = current_lease()
        assert lease is not None and lease.lost is None  # the renewal has not seen it yet
        with pytest.raises(LeaseLost, match="try 2 of the job holds it now"):
            await client.update_check_run(OWNER, REPO, run_id, {
                "status": "completed", "conclusion": "failure"})
        runs = [r async for r in client.list_check_runs(OWNER, REPO, HEAD_SHA)]  # reads go on
    state = fake_gh.state()
    assert [r["operation"] for r in state["requests"]
            if r["method"] in ("POST", "PATCH") and "check-runs" in r["path"]] == \
        ["checks/create"]  # the PATCH was never sent
    assert [r.status for r in runs] == ["in_progress"] == \
        [r["status"] for r in state["check_runs"]]
    assert await redis.get(KEY) == b"2:0123456789abcdef"


async def test_a_provider_call_of_a_try_that_lost_its_lease_is_not_sent(
        redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []

    async def send_chat(kwargs: dict[str, Any], messages: Any) -> Any:
        sent.append(messages)
        return llm_client.ChatReply("ok", None, 1.0)

    monkeypatch.setattr(llm_client, "send_chat", send_chat)
    endpoint = Endpoint(model="openai/gpt-4o-mini")
    await redis.psetex(KEY, ARQ_CLAIM_MS, b"1")
    async with job_scope(_ctx(redis), {}):
        await llm_client.chat(endpoint, [{"role": "user", "content": "hi"}], 5)
        await redis.set(KEY, b"2:0123456789abcdef")
        lease = current_lease()
        assert lease is not None
        await _until(lambda: lease.lost is not None)  # the renewal (every 1 s) saw it
        with pytest.raises(LeaseLost):
            await llm_client.chat(endpoint, [{"role": "user", "content": "again"}], 5)
    assert len(sent) == 1


async def test_a_paused_try_asks_redis_before_its_next_provider_call(redis: Redis) -> None:
    now = [100.0]
    lease = Lease(redis, JOB, 1, 3, clock=lambda: now[0])
    await redis.psetex(KEY, ARQ_CLAIM_MS, b"1")
    assert await lease.ask() is True
    await lease.before_call("chat m")  # fresh: no question asked
    await redis.set(KEY, b"2:0123456789abcdef")
    await lease.before_call("chat m")  # still within half the lease of the last renewal
    now[0] += 10  # the process was paused (SIGSTOP) for 10 s: its renewal never ran
    with pytest.raises(LeaseLost, match="try 2"):
        await lease.before_call("chat m")


async def test_redis_away_lets_a_write_go_only_within_the_lease_confirmed_last(
        redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]

    def now() -> float:
        return clock[0]

    monkeypatch.setattr(fence, "RECHECK_S", 0.0)
    monkeypatch.setattr(fence, "CHECK_TIMEOUT_S", 0.5)
    lease = Lease(redis, JOB, 1, 3, clock=now)
    await redis.psetex(KEY, ARQ_CLAIM_MS, b"1")
    assert await lease.ask() is True  # confirmed at 0: no other try can start before 3 s
    away = Redis.from_url(f"redis://127.0.0.1:{free_port()}")  # nothing listens there
    lease._script = away.register_script(fence.RENEW_SCRIPT)
    try:
        clock[0] = 1.5
        await lease.confirm("PATCH check run")  # Redis away, lease in force: it goes on
        assert lease.lost is None

        async def later() -> None:
            while True:
                clock[0] += 0.5
                await asyncio.sleep(0)

        clock[0] = 2.5  # less than MARGIN_S of the lease left: no write without Redis
        mover = asyncio.create_task(later())
        try:
            with pytest.raises(LeaseLost, match="not confirmed, Redis did not answer"):
                await lease.confirm("PATCH check run")  # past 2 s: asks, then gives up
        finally:
            await _stop(mover)
    finally:
        await away.aclose()


async def test_a_try_that_lost_its_lease_ends_quietly_and_the_holder_finishes(
        arq_pool: ArqRedis) -> None:
    ran: list[tuple[int, str]] = []

    async def gate(ctx: dict[str, Any], payload: Any) -> str:
        if ctx["job_try"] == 1:  # another worker takes the job over meanwhile (its key, 0.5 s)
            await ctx["redis"].set(KEY, b"2:0123456789abcdef", px=500)
        try:
            await guard_write("PATCH /repos/acme/tiny/check-runs/1")
        except LeaseLost:
            ran.append((ctx["job_try"], "stopped"))
            raise
        ran.append((ctx["job_try"], "wrote"))
        return "concluded"

    class FencedWorker(Worker):
        """arq's worker with the fence of finish_job (a subclass: arq's class is left be)."""

    fence_finished_jobs(FencedWorker)
    await arq_pool.enqueue_job("gate", {}, _job_id=JOB)
    worker = FencedWorker([func(observed(gate), name="gate")], redis_pool=arq_pool,
                          burst=True, poll_delay=0.05, handle_signals=False, job_timeout=60,
                          max_tries=3, ctx={CTX_KEY: JobLimits(60, 3, 3)})
    try:
        await asyncio.wait_for(worker.async_run(), 30)
    finally:
        await worker.close()
    # Try 1 wrote nothing; arq left the job queued under the other lease, and once that
    # lapsed unrenewed (the other try "died") try 2 ran it: no try was counted as failed.
    assert ran == [(1, "stopped"), (2, "wrote")]
    assert (worker.jobs_complete, worker.jobs_failed, worker.jobs_retried) == (2, 0, 0)
    job = await arq_pool.all_job_results()
    assert [(r.job_try, r.result) for r in job] == [(2, "concluded")]
