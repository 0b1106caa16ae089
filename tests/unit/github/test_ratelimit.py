"""Rate-limit rules, the write pacer and shared pauses (real Redis; no GitHub needed)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from redis.asyncio import Redis

from worker.github.ratelimit import (
    HOURLY_WINDOW_S,
    HOURLY_WRITE_LIMIT,
    WRITE_BURST,
    GitHubLimiter,
    GitHubLimits,
    MemoryLimitStore,
    RedisLimitStore,
    backoff_s,
    rate_limit_wait_s,
    retry_after_s,
)
from worker.runtime.settings import SettingsError

NOW = 1_700_000_000.0
SECONDARY = b'{"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}'
PERMISSION = b'{"message": "Resource not accessible by integration"}'


@pytest.mark.parametrize(("status", "headers", "body", "hits", "expected"), [
    (403, {"retry-after": "7"}, SECONDARY, 0, 7.0),
    (429, {"retry-after": "0"}, b"", 0, 0.0),
    (429, {"retry-after": format_datetime(datetime.fromtimestamp(NOW + 42, UTC), usegmt=True)},
     b"", 0, 42.0),
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 30)}, b"", 0,
     31.0),  # until the reset, plus one second of margin
    (429, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 5)}, b"", 0, 1.0),
    (403, {}, SECONDARY, 0, 60.0),  # a secondary limit naming no time: at least a minute
    (403, {}, SECONDARY, 1, 120.0),  # then exponentially longer
    (429, {"retry-after": "soon"}, b"", 2, 240.0),  # a malformed header is ignored
    (403, {"x-ratelimit-remaining": "4999"}, PERMISSION, 0, None),  # a permission: no retry
    (403, {}, b"", 0, None),
    (404, {"retry-after": "5"}, b"", 0, None),
    (500, {"retry-after": "5"}, b"", 0, None),  # 5xx are the transport's retries, not limits
])
def test_rate_limit_wait_follows_githubs_rules(status: int, headers: dict[str, str],
                                               body: bytes, hits: int,
                                               expected: float | None) -> None:
    assert rate_limit_wait_s(status, headers, body, hits, now=NOW) == expected


def test_retry_after_takes_seconds_or_an_http_date() -> None:
    assert retry_after_s({"retry-after": "12"}, NOW) == 12.0
    assert retry_after_s({"retry-after": "Tue, 14 Nov 2023 22:13:30 GMT"}, NOW) == 10.0
    assert retry_after_s({"retry-after": "Tue, 14 Nov 2023 22:13:00 GMT"}, NOW) == 0.0  # past
    assert retry_after_s({"retry-after": "-3"}, NOW) is None
    assert retry_after_s({}, NOW) is None


def test_backoff_is_full_jitter_below_the_ceiling() -> None:
    rng = random.Random(7)
    draws = [backoff_s(4.0, rng) for _ in range(1000)]
    assert all(0.0 <= d <= 4.0 for d in draws)
    assert min(draws) < 0.1 and max(draws) > 3.9  # spread over the whole range
    assert backoff_s(0.0, rng) == 0.0
    assert [backoff_s(4.0, random.Random(7)) for _ in range(2)] == [draws[0], draws[0]]


def test_limits_from_the_environment() -> None:
    assert GitHubLimits.from_env({}) == GitHubLimits(60.0, 1.0)
    assert GitHubLimits.from_env({"LLMGATE_GITHUB_MAX_WAIT_S": " 5 ",
                                  "LLMGATE_GITHUB_WRITE_INTERVAL_S": "0"}) == GitHubLimits(5, 0)
    for name in ("LLMGATE_GITHUB_MAX_WAIT_S", "LLMGATE_GITHUB_WRITE_INTERVAL_S"):
        for bad in ("-1", "soon", "nan", "90000"):
            with pytest.raises(SettingsError, match=f"^{name} must be a number of seconds"):
                GitHubLimits.from_env({name: bad})


async def test_memory_pacer_lets_a_burst_through_then_one_write_a_second() -> None:
    clock = [100.0]
    store = MemoryLimitStore(lambda: clock[0])
    delays = [(await store.reserve("installation:1", True, 1000, WRITE_BURST))[1]
              for _ in range(WRITE_BURST + 3)]
    assert delays == [0] * WRITE_BURST + [1000, 2000, 3000]
    assert await store.reserve("installation:1", False, 1000, WRITE_BURST) == (0, 0)  # a GET
    assert await store.reserve("installation:2", True, 1000, WRITE_BURST) == (0, 0)
    clock[0] += 60  # an idle minute refills the bucket
    assert await store.reserve("installation:1", True, 1000, WRITE_BURST) == (0, 0)
    assert await store.reserve("installation:1", True, 0, WRITE_BURST) == (0, 0)  # pacing off


def _most_in(times_ms: list[int], window_ms: int) -> int:
    most, start = 0, 0
    for end, t in enumerate(times_ms):
        while times_ms[start] <= t - window_ms:
            start += 1
        most = max(most, end - start + 1)
    return most


HOURLY = (HOURLY_WINDOW_S * 1000, HOURLY_WRITE_LIMIT)


async def _paced(store: MemoryLimitStore | RedisLimitStore, clock: list[float], n: int,
                 ) -> list[int]:
    """Send ``n`` writes, each as soon as the pacers let it, on the simulated ``clock``."""
    sent: list[int] = []
    for _ in range(n):
        _, delay_ms = await store.reserve("installation:9", True, 1000, WRITE_BURST, *HOURLY)
        sent.append(round(clock[0] * 1000) + delay_ms)
        clock[0] = sent[-1] / 1000  # the write goes when allowed; the next asks then
    return sent


async def test_writes_stay_under_githubs_secondary_limits_per_minute_and_per_hour() -> None:
    """Issue 14: 80 content-creating requests a minute *and* 500 an hour (GitHub docs); 1,200
    writes, each sent as soon as the pacers let it, on a simulated clock."""
    clock = [0.0]
    sent = await _paced(MemoryLimitStore(lambda: clock[0]), clock, 1200)
    assert _most_in(sent, 60_000) <= 70 < 80
    assert _most_in(sent, 3_600_000) == HOURLY_WRITE_LIMIT < 500
    assert sent[WRITE_BURST] == 1000  # the minute pacer first
    # the hour's allowance is used at the minute pacer's speed (the soak's case: 150 writes
    # in 4 minutes waited 9.5 s each after the 100th under the old even spacing) ...
    assert sent[149] == (149 - WRITE_BURST + 1) * 1000
    # ... and the 481st waits until the first leaves the hour
    assert sent[HOURLY_WRITE_LIMIT] == sent[0] + HOURLY[0]


async def test_the_redis_pacer_keeps_the_hourly_window_too(redis: Redis) -> None:
    store = RedisLimitStore(redis)
    delays = [(await store.reserve("installation:9", True, 1000, WRITE_BURST, *HOURLY))[1]
              for _ in range(WRITE_BURST + 2)]
    assert delays[:WRITE_BURST] == [0] * WRITE_BURST
    assert 900 < delays[WRITE_BURST] <= 1000 and 1900 < delays[WRITE_BURST + 1] <= 2000
    assert await redis.zcard("llmgate:github:writes-hour:installation:9") == WRITE_BURST + 2
    # the window: 3 writes an hour, and no minute pacing to speak of
    first = [(await store.reserve("installation:8", True, 1, 1000, 3_600_000, 3))[1]
             for _ in range(4)]
    assert first[:3] == [0, 0, 0] and 3_599_900 < first[3] <= 3_600_000
    pttl = await redis.pttl("llmgate:github:writes-hour:installation:8")
    assert 7_199_000 < pttl <= 7_200_000  # the window forgets itself an hour after its last


async def test_redis_pacer_matches_the_memory_one(redis: Redis) -> None:
    store = RedisLimitStore(redis)
    delays = [(await store.reserve("installation:1", True, 1000, WRITE_BURST))[1]
              for _ in range(WRITE_BURST + 2)]
    assert delays[:WRITE_BURST] == [0] * WRITE_BURST
    assert 900 < delays[WRITE_BURST] <= 1000 and 1900 < delays[WRITE_BURST + 1] <= 2000
    assert await store.reserve("installation:1", False, 1000, WRITE_BURST) == (0, 0)
    pttl = await redis.pttl("llmgate:github:writes:installation:1")
    assert 11_900 < pttl <= 12_001  # the pacer forgets itself once it is idle


async def test_a_pause_is_shared_only_extended_and_takes_no_write_slot(redis_url: str,
                                                                       redis: Redis) -> None:
    other_process = Redis.from_url(redis_url)
    try:
        mine, theirs = RedisLimitStore(redis), RedisLimitStore(other_process)
        assert await mine.pause("installation:1", 5000) == 5000
        assert 4900 < await theirs.pause("installation:1", 1000) <= 5000  # never shortened
        pause_ms, delay_ms = await theirs.reserve("installation:1", True, 1000, WRITE_BURST)
        assert 4900 < pause_ms <= 5000 and delay_ms == 0
        assert await redis.exists("llmgate:github:writes:installation:1") == 0
        assert await theirs.reserve("installation:2", True, 1000, WRITE_BURST) == (0, 0)
    finally:
        await other_process.aclose()


class FakeClock:
    """A monotonic clock that only moves when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 3))
        self.now += seconds


async def test_limiter_sleeps_a_short_pause_and_refuses_a_long_one() -> None:
    clock = FakeClock()
    limiter = GitHubLimiter(MemoryLimitStore(clock), GitHubLimits(max_wait_s=10),
                            sleep=clock.sleep)
    assert await limiter.pause("installation:1", 2.5) == 2.5
    assert await limiter.acquire("installation:1", mutating=True) is None
    assert clock.sleeps == [2.501]  # the pause (+1 ms: Redis reports whole ms, rounded down)
    await limiter.pause("installation:1", 30)
    assert await limiter.acquire("installation:1", mutating=False) == 30.0
    assert clock.sleeps == [2.501]  # nothing slept: the caller raises for a later retry
    assert await limiter.acquire("installation:2", mutating=False) is None


async def test_limiter_sleeps_the_write_slot() -> None:
    clock = FakeClock()
    limiter = GitHubLimiter(MemoryLimitStore(clock), GitHubLimits(write_interval_s=0.5),
                            sleep=clock.sleep)
    for _ in range(WRITE_BURST + 2):
        assert await limiter.acquire("installation:1", mutating=True) is None
    assert clock.sleeps == [0.5, 0.5]  # after the burst, one write every 0.5 s
