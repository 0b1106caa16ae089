"""`worker.runtime.locks.held` on a real Redis: renewed while held, ordered, never raising on
release."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from worker.runtime import locks

NAME = "llmgate:lock:test"


async def test_a_lock_is_kept_past_its_expiry_while_the_body_works(redis: Redis) -> None:
    async with locks.held(redis, NAME, 0.3):
        await asyncio.sleep(1.0)  # more than three expiries
        assert not await redis.lock(NAME, timeout=5).acquire(blocking=False)
    assert await redis.exists(NAME) == 0  # released


async def test_a_second_holder_enters_only_after_the_first_leaves(redis: Redis) -> None:
    order: list[str] = []

    async def hold(tag: str, seconds: float) -> None:
        async with locks.held(redis, NAME, 0.3):
            order.append(f"{tag} in")
            await asyncio.sleep(seconds)
            order.append(f"{tag} out")

    first = asyncio.create_task(hold("first", 0.8))
    await asyncio.sleep(0.1)
    await asyncio.gather(first, hold("second", 0))
    assert order == ["first in", "first out", "second in", "second out"]


async def test_a_lapsed_lock_never_replaces_the_bodys_own_outcome(
        redis: Redis, caplog: pytest.LogCaptureFixture) -> None:
    """Field case (tester): a 31 s rate-limit pause under a 30 s lock ended the run with
    ``LockNotOwnedError`` from the release instead of its own result."""
    with pytest.raises(ValueError, match="the body's own error"):
        async with locks.held(redis, NAME, 5):
            await redis.delete(NAME)  # the lock lapsed (Redis lost it, or the loop stalled)
            raise ValueError("the body's own error")
    async with locks.held(redis, NAME, 5):
        await redis.set(NAME, b"another holder's token")
    assert await redis.get(NAME) == b"another holder's token"  # not released: not ours
    assert f"lock {NAME} was not released (LockNotOwnedError)" in caplog.text


async def test_a_cancel_arriving_as_the_body_returns_is_not_swallowed(redis: Redis) -> None:
    """Field case (tester): waiting for the renewal task with ``suppress(CancelledError)``
    also swallowed a cancel of the holder's own task that came as the body returned (an arq
    job timeout, a worker shutdown): the task went on as if never cancelled."""
    entered = asyncio.Event()

    async def holder() -> str:
        async with locks.held(redis, NAME, 5):
            entered.set()
            await asyncio.sleep(0.2)
            asyncio.current_task().cancel()  # type: ignore[union-attr]  # as the body returns
        return "went on"

    task = asyncio.create_task(holder())
    await entered.wait()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await redis.exists(NAME) == 0  # released all the same
