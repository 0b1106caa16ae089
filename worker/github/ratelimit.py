"""Pace and pause GitHub API requests per installation, shared by every worker process.

Sources: GitHub docs "Rate limits for the REST API" (section "Exceeding the rate limit": honour
``retry-after``; with ``x-ratelimit-remaining: 0`` wait until ``x-ratelimit-reset``; otherwise
wait at least one minute, then exponentially longer) and "Best practices for using the REST API"
("Avoid concurrent requests": make requests serially; "Pause between mutative requests": when
making a large number of POST, PATCH, PUT or DELETE requests, wait at least one second between
each). The secondary limit on content creation is 80 requests a minute.

Two shared facts per *bucket* (``installation:<id>``, or ``app`` for App-JWT requests) live in
Redis, so one worker's rate limit pauses all of them (no request storm):

- ``pause``: a key whose remaining TTL is how long nobody may call GitHub for that bucket;
- ``writes``: the theoretical arrival time of a GCRA pacer (a token bucket of `WRITE_BURST`
  requests refilled one per ``write_interval_s``): a few writes go at once (a gate run makes
  about three), a large number go one per second. Over any minute at most
  ``WRITE_BURST + 60 / write_interval_s`` = 70 writes start, under GitHub's 80.
- ``writes-hour``: GitHub's hourly secondary limit ("no more than 500 content-generating
  requests per hour") as a sliding window: a sorted set of the times writes were let go, so a
  write goes as soon as fewer than `HOURLY_WRITE_LIMIT` (480) were let go in the hour before
  it, else when the oldest of those leaves the hour. Over any hour at most 480 writes start,
  and a burst uses the whole hour's allowance at the minute pacer's speed (an even spacing,
  as a second GCRA of 100 at once then one per 9.5 s, made every write of a busy installation
  wait 9.5 s once 100 had gone, even with 380 of the hour's 500 left). A write waits for the
  later of the two and is charged to both at the time it goes, so each bound holds for the
  writes actually sent.

Both use the Redis server's clock (``TIME``, ``PTTL``), so workers' clocks may disagree.
Inside one process, mutating requests of a bucket are also serial (an ``asyncio.Lock``).
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Protocol

from redis.asyncio import Redis

from worker.runtime import SettingsError

#: Longest wait slept before a request by default, seconds; a longer one raises for a defer.
DEFAULT_MAX_WAIT_S = 60.0
#: Seconds between mutating requests of one installation once its burst is spent (GitHub: 1 s).
DEFAULT_WRITE_INTERVAL_S = 1.0
#: Mutating requests an idle installation may make at once before the pacing applies.
WRITE_BURST = 10
#: The hourly window (module docstring): writes let go in any ``HOURLY_WINDOW_S`` seconds.
#: Source: GitHub docs "Rate limits for the REST API", "About secondary rate limits" (500 per
#: hour); 20 are left for requests GitHub may count that the pacer does not see.
HOURLY_WRITE_LIMIT = 480
HOURLY_WINDOW_S = 3600
#: Wait after a secondary rate limit that names no time (GitHub: "at least one minute").
SECONDARY_WAIT_S = 60.0
#: Added to an ``x-ratelimit-reset`` wait: the reset is in whole seconds and clocks drift.
RESET_MARGIN_S = 1.0
#: Methods GitHub counts as mutative ("content-generating") requests.
MUTATING_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
KEY_PREFIX = "llmgate:github:"


@dataclass(frozen=True)
class GitHubLimits:
    """How patient the client is, from the environment.

    Attributes:
        max_wait_s: ``LLMGATE_GITHUB_MAX_WAIT_S``; longest rate-limit pause slept before a
            request, seconds (default 60); a longer one raises ``GitHubRateLimited``.
        write_interval_s: ``LLMGATE_GITHUB_WRITE_INTERVAL_S``; seconds between mutating requests
            of one installation after a burst of `WRITE_BURST` (default 1; 0 turns pacing off,
            the hourly pacer's too).
    """

    max_wait_s: float = DEFAULT_MAX_WAIT_S
    write_interval_s: float = DEFAULT_WRITE_INTERVAL_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GitHubLimits:
        """Read the limits; unset or empty variables keep the defaults.

        Raises:
            SettingsError: a value is not a number of seconds >= 0 (one line naming it).
        """
        return cls(_seconds(environ, "LLMGATE_GITHUB_MAX_WAIT_S", DEFAULT_MAX_WAIT_S),
                   _seconds(environ, "LLMGATE_GITHUB_WRITE_INTERVAL_S", DEFAULT_WRITE_INTERVAL_S))


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise SettingsError(f"{name} must be a number of seconds from 0 to 86400")
    return value


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Return the wait a ``retry-after`` header asks for, seconds >= 0, or None without one.

    The header holds seconds or an HTTP date (RFC 9110, section 10.2.3); a malformed one is
    ignored. ``now`` is Unix seconds (default: the current time).
    """
    raw = (headers.get("retry-after") or "").strip()
    if raw.isascii() and raw.isdigit():
        return float(raw)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def rate_limit_wait_s(status: int, headers: Mapping[str, str], body: bytes, hits: int = 0,
                      now: float | None = None) -> float | None:
    """Return how long to stop after a rate-limited answer, seconds, or None if it is not one.

    GitHub's rules (docs "Rate limits for the REST API"): a 403 or 429 with ``retry-after``
    waits that long; with ``x-ratelimit-remaining: 0`` until ``x-ratelimit-reset`` (Unix
    seconds, plus `RESET_MARGIN_S`); a 429, or a 403 whose message speaks of a rate limit,
    waits 60 s doubled for each earlier ``hits`` of the same request. Any other 403 is a
    permission refusal: None, never retried.
    """
    if status not in (403, 429):
        return None
    hinted = retry_after_s(headers, now)
    if hinted is not None:
        return hinted
    reset = headers.get("x-ratelimit-reset", "")
    if headers.get("x-ratelimit-remaining") == "0" and reset.isascii() and reset.isdigit():
        return max(0.0, int(reset) - (time.time() if now is None else now)) + RESET_MARGIN_S
    if status == 429 or b"rate limit" in body.lower():
        return SECONDARY_WAIT_S * (1 << min(hits, 6))
    return None


def backoff_s(ceiling_s: float, rng: random.Random | None = None) -> float:
    """Return a "full jitter" backoff: uniform in [0, ``ceiling_s``] seconds.

    Source: M. Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog (2015): full
    jitter spreads retries of many clients best. The ceilings grow exponentially
    (see ``worker.github.client.DEFAULT_RETRY_DELAYS_S``).
    """
    return float((rng or _RNG).uniform(0.0, max(0.0, ceiling_s)))


_RNG = random.Random()  # noqa: S311 (jitter, not a secret)


class LimitStore(Protocol):
    """Where pauses and the write pacer live (Redis for workers, memory for one process)."""

    async def reserve(self, bucket: str, mutating: bool, interval_ms: int, burst: int,
                      hour_window_ms: int = 0, hour_limit: int = 1) -> tuple[int, int]:
        """Return ``(pause_ms, delay_ms)``; reserve a write slot only when not paused.

        ``interval_ms``/``burst`` shape the minute pacer (``interval_ms`` 0: no pacing at
        all); at most ``hour_limit`` writes go in any ``hour_window_ms`` (0: no window).
        """

    async def pause(self, bucket: str, pause_ms: int) -> int:
        """Extend the pause to at least ``pause_ms``; return the pause now in force, ms."""


_RESERVE = """
local pause = redis.call('PTTL', KEYS[1])
if pause > 0 then return {pause, 0} end
if ARGV[1] == '0' or ARGV[2] == '0' then return {0, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local every, burst = tonumber(ARGV[2]), tonumber(ARGV[3])
local allowed = math.max(now, math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), now)
                                - every * (burst - 1))
local window, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
if window > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if last[2] then allowed = math.max(allowed, tonumber(last[2])) end
  local inside = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. (allowed - window), '+inf',
                            'WITHSCORES')
  local n = #inside / 2
  if n >= limit then allowed = tonumber(inside[2 * (n - limit) + 2]) + window end
  local seq = redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], allowed - now + window)
  redis.call('ZADD', KEYS[3], allowed, allowed .. ':' .. seq)
  redis.call('PEXPIRE', KEYS[3], allowed - now + window)
end
local tat = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), allowed) + every
redis.call('SET', KEYS[2], tat, 'PX', tat - now + 1)
return {0, allowed - now}
"""
_PAUSE = """
local current = redis.call('PTTL', KEYS[1])
local wanted = tonumber(ARGV[1])
if current >= wanted then return current end
redis.call('SET', KEYS[1], '1', 'PX', wanted)
return wanted
"""


class RedisLimitStore:
    """Pauses and write pacing in Redis: two Lua scripts, one round trip per request."""

    def __init__(self, redis: Redis) -> None:
        """Use ``redis`` (the worker's shared client)."""
        self._reserve = redis.register_script(_RESERVE)
        self._pause = redis.register_script(_PAUSE)

    async def reserve(self, bucket: str, mutating: bool, interval_ms: int, burst: int,
                      hour_window_ms: int = 0, hour_limit: int = 1) -> tuple[int, int]:
        """See `LimitStore.reserve`."""
        keys = [f"{KEY_PREFIX}pause:{bucket}", f"{KEY_PREFIX}writes:{bucket}",
                f"{KEY_PREFIX}writes-hour:{bucket}", f"{KEY_PREFIX}writes-hour-seq:{bucket}"]
        pause_ms, delay_ms = await self._reserve(keys, [int(mutating), interval_ms, burst,
                                                        hour_window_ms, hour_limit])
        return int(pause_ms), int(delay_ms)

    async def pause(self, bucket: str, pause_ms: int) -> int:
        """See `LimitStore.pause`."""
        return int(await self._pause([f"{KEY_PREFIX}pause:{bucket}"], [max(1, pause_ms)]))


class MemoryLimitStore:
    """The same rules in this process only (for a client made without Redis)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Keep pauses and pacers in dictionaries; ``clock`` returns seconds."""
        self._clock = clock
        self._paused_until_ms: dict[str, int] = {}
        self._tat_ms: dict[str, int] = {}
        self._hour: dict[str, collections.deque[int]] = {}  # times writes were let go, ms

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def reserve(self, bucket: str, mutating: bool, interval_ms: int, burst: int,
                      hour_window_ms: int = 0, hour_limit: int = 1) -> tuple[int, int]:
        """See `LimitStore.reserve` (the same rules as the Redis script)."""
        now = self._now_ms()
        pause = self._paused_until_ms.get(bucket, 0) - now
        if pause > 0:
            return pause, 0
        if not mutating or interval_ms == 0:
            return 0, 0
        allowed = max(now, max(self._tat_ms.get(bucket, 0), now) - interval_ms * (burst - 1))
        if hour_window_ms:
            sent = self._hour.setdefault(bucket, collections.deque())
            while sent and sent[0] <= now - hour_window_ms:
                sent.popleft()
            allowed = max(allowed, sent[-1]) if sent else allowed
            inside = [at for at in sent if at > allowed - hour_window_ms]
            if len(inside) >= hour_limit:
                allowed = inside[len(inside) - hour_limit] + hour_window_ms
            sent.append(allowed)
        self._tat_ms[bucket] = max(self._tat_ms.get(bucket, 0), allowed) + interval_ms
        return 0, allowed - now

    async def pause(self, bucket: str, pause_ms: int) -> int:
        """See `LimitStore.pause`."""
        now = self._now_ms()
        until = max(self._paused_until_ms.get(bucket, 0), now + max(1, pause_ms))
        self._paused_until_ms[bucket] = until
        return until - now


class GitHubLimiter:
    """Wait out pauses and pace writes before each request of a bucket."""

    def __init__(self, store: LimitStore | None = None, limits: GitHubLimits | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Use ``store`` (default: in memory) with ``limits`` (default: `GitHubLimits()`)."""
        self.store: LimitStore = store or MemoryLimitStore()
        self.limits = limits or GitHubLimits()
        self._sleep = sleep
        self._locks: dict[str, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"GitHubLimiter({type(self.store).__name__}, {self.limits})"

    @asynccontextmanager
    async def serial(self, bucket: str, mutating: bool) -> AsyncIterator[None]:
        """Hold the bucket's write lock around a mutating request (GETs pass straight on)."""
        if not mutating:
            yield
            return
        async with self._locks.setdefault(bucket, asyncio.Lock()):
            yield

    async def acquire(self, bucket: str, mutating: bool) -> float | None:
        """Wait until a request of ``bucket`` may be sent; mutating ones take a write slot.

        Returns:
            None when the request may go now; else the pause still in force, in seconds,
            because sleeping it would exceed ``limits.max_wait_s`` (nothing was sent).
        """
        waited_s = 0.0
        interval_ms = round(self.limits.write_interval_s * 1000)
        while True:
            pause_ms, delay_ms = await self.store.reserve(
                bucket, mutating, interval_ms, WRITE_BURST,
                HOURLY_WINDOW_S * 1000 if interval_ms else 0, HOURLY_WRITE_LIMIT)
            if pause_ms <= 0:
                if delay_ms > 0:
                    await self._sleep(delay_ms / 1000)
                return None
            pause_s = pause_ms / 1000
            if waited_s + pause_s > self.limits.max_wait_s:
                return pause_s
            await self._sleep(pause_s + 0.001)  # PTTL rounds down to whole ms
            waited_s += pause_s

    async def pause(self, bucket: str, wait_s: float) -> float:
        """Stop every request of ``bucket`` for ``wait_s`` seconds (or longer, if already).

        Returns:
            The pause now in force, seconds.
        """
        return await self.store.pause(bucket, int(wait_s * 1000 + 0.999)) / 1000

