"""The worker's Redis: checked at start-up, and outlived when it blips.

At start-up (`check_queue_redis`, before arq connects) the queue's Redis (``REDIS_URL``) must
not evict keys or run in cluster mode (`worker.contract.queue_redis_refusal`); a Redis without
persistence is a warning. Until the first answer the worker waits, with backoff: a Redis that
starts after the worker is not a configuration error.

Afterwards every client of the worker (arq's pool and the jobs' own) retries a lost connection
forever with capped exponential backoff (`PatientRetry`): a restart of Redis pauses the worker's
poll loop and its jobs' Redis calls instead of ending the process, and the outage and the
recovery are each logged once. A refused password is not retried: it is a configuration error.
Once the worker is told to stop (SIGTERM or SIGINT: `note_stopping`, worker/runtime/stopping.py)
a connection lost for `STOP_PATIENCE_S` or longer is retried no more: the call raises the error,
so a worker stopping while Redis is away exits within seconds instead of waiting for Redis until
it is killed, while a blip of Redis during the grace is still retried.

A Redis that answers but refuses writes (``OOM`` when full under ``noeviction``, ``READONLY``,
``MISCONF``: `worker.contract.write_refusal`) is not retried here: the caller gets the error.
The worker notes the state (`note_write_refused`, logged once with what to do) until its next
write is accepted (`note_write_accepted`, logged once), and its heartbeat file and
``llmgate healthcheck`` report it meanwhile (`refused_writes`). `redis_fault` tells the poll
loop's guard (worker/runtime/poll_guard.py) which errors are such faults of Redis.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    RedisError,
    WatchError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.contract import probe_queue_redis, write_refusal
from worker.runtime.settings import SettingsError

log = logging.getLogger("llmgate.redis")

T = TypeVar("T")

#: Longest pause between two attempts to reach Redis again, seconds.
RETRY_CAP_S = 2.0
#: First pause after a failed attempt, seconds (doubled per failure up to `RETRY_CAP_S`).
RETRY_BASE_S = 0.05
#: How long a stopping worker still waits for a lost Redis, seconds: a blip of Redis during the
#: grace is retried as before, an outage is not waited out (`note_stopping`).
STOP_PATIENCE_S = 3.0
#: Errors that mean "Redis is not reachable now" (``LOADING`` after a restart is one).
RETRIED_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError,
                                               asyncio.TimeoutError)
#: ... except these: a wrong password or a missing permission does not heal by waiting.
CONFIG_ERRORS: tuple[type[RedisError], ...] = (AuthenticationError, AuthorizationError)
#: Bound on one start-up probe of Redis, seconds.
PROBE_TIMEOUT_S = 5.0


class _Outage:
    """When the current outage began (monotonic seconds), shared by every client."""

    since: float | None = None

    @classmethod
    def failed(cls, error: BaseException) -> None:
        if cls.since is None:
            cls.since = time.monotonic()
            log.warning("lost the connection to Redis (%s: %s); retrying every %.0f s at "
                        "most, jobs wait meanwhile", type(error).__name__, error, RETRY_CAP_S)

    @classmethod
    def answered(cls) -> None:
        if cls.since is not None:
            log.warning("Redis answers again after %.1f s", time.monotonic() - cls.since)
            cls.since = None


class _WriteRefusal:
    """Since when (monotonic seconds) and why Redis refuses this process's writes."""

    since: float | None = None
    reason = ""

    @classmethod
    def refused(cls, error: BaseException) -> bool:
        reason = write_refusal(error)
        if reason is None:
            return False
        if cls.since is None:
            cls.since, cls.reason = time.monotonic(), reason
            log.error("Redis refuses writes (%s: %s); the worker stays up and takes no new "
                      "job until a write is accepted again (free memory or raise maxmemory "
                      "of the queue's Redis)", reason, reply_text(error))
        return True

    @classmethod
    def accepted(cls) -> None:
        if cls.since is not None:
            log.warning("Redis accepts writes again after %.1f s (%s)",
                        time.monotonic() - cls.since, cls.reason)
            cls.since, cls.reason = None, ""


def reply_text(error: BaseException) -> str:
    """Redis's reply in ``error``, without the command redis-py prefixes for a pipeline (its
    arguments may be a job's pickled payload)."""
    reply = str(error).rpartition("caused error: ")[2].strip("()\"', ")
    return f"{type(error).__name__}: {reply[:200]}"


def note_write_refused(error: BaseException) -> bool:
    """Note ``error`` when it is Redis refusing a write (logged once per episode); return
    whether it was (`worker.contract.write_refusal`)."""
    return _WriteRefusal.refused(error)


def note_write_accepted() -> None:
    """Note that Redis accepted a write: a refusal noted before is over (logged once)."""
    _WriteRefusal.accepted()


def refused_writes() -> tuple[str, float] | None:
    """(why, seconds) since Redis refuses this process's writes, or None while it takes them."""
    since = _WriteRefusal.since
    return None if since is None else (_WriteRefusal.reason, time.monotonic() - since)


class _Stopping:
    """Which stop signal this process got (``SIGTERM``, ``SIGINT``), or None while it serves."""

    signal: str | None = None


def note_stopping(signal_name: str) -> None:
    """Note that the worker is stopping (on ``signal_name``, e.g. ``"SIGTERM"``): from now on
    `PatientRetry` raises a lost connection instead of waiting for Redis (module docstring).
    Logged once; it lasts as long as the process."""
    if _Stopping.signal is None:
        _Stopping.signal = signal_name
        if _Outage.since is not None:
            log.warning("stopping on %s while Redis is away: Redis is not waited for any more",
                        signal_name)


def stopping() -> str | None:
    """The stop signal this process got (`note_stopping`), or None while it serves."""
    return _Stopping.signal


def stopped_waiting() -> bool:
    """Whether this process stopped waiting for Redis: it is stopping (`note_stopping`) and
    has had no Redis for `STOP_PATIENCE_S` seconds or more."""
    lost = outage_s()
    return _Stopping.signal is not None and lost is not None and lost >= STOP_PATIENCE_S


def redis_fault(error: BaseException) -> bool:
    """Whether ``error`` is Redis away or blipping (`RETRIED_ERRORS`, a watch lost with its
    connection: ``WatchError``) or refusing writes, as opposed to a configuration error (a
    refused password) or a bug (``WRONGTYPE``, a syntax error), which must not be outlived."""
    if isinstance(error, CONFIG_ERRORS):
        return False
    return isinstance(error, (WatchError, *RETRIED_ERRORS)) or write_refusal(error) is not None


def outage_s() -> float | None:
    """Seconds since this process lost Redis, or None while Redis answers."""
    since = _Outage.since
    return None if since is None else time.monotonic() - since


class PatientRetry(Retry):
    """redis-py's `Retry` that never gives up on a lost connection (module docstring) until
    the worker is stopping (`note_stopping`).

    redis-py runs both the connect of a connection and each command through its client's
    ``retry``; this one repeats either after `RETRIED_ERRORS` (socket errors included: a
    refused connect is an ``OSError`` there) forever, pausing
    ``min(RETRY_CAP_S, RETRY_BASE_S * 2**n)`` seconds after the n-th failure (redis-py's
    `ExponentialBackoff`), and raises `CONFIG_ERRORS` and every other error at once (a refused
    write noted first: `note_write_refused`). In a stopping worker (`stopping`) a failed
    attempt raises its error too once Redis has been lost for `STOP_PATIENCE_S`
    (`stopped_waiting`).
    """

    __slots__ = ()

    def __init__(self) -> None:
        """Back off exponentially from `RETRY_BASE_S` up to `RETRY_CAP_S`, with no limit."""
        super().__init__(ExponentialBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S), -1,
                         (RedisConnectionError, RedisTimeoutError))

    async def call_with_retry(self, do: Callable[[], Awaitable[T]],
                              fail: Callable[[Any], Any]) -> T:
        """Run ``do`` until it succeeds; await ``fail(error)`` after each failed attempt.

        Raises:
            redis.exceptions.RedisError: one of `CONFIG_ERRORS`, or an error not retried.
            redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError: Redis is
                unreachable and the worker is stopping (`stopped_waiting`).
            asyncio.CancelledError: the caller was cancelled (e.g. the worker stops).
        """
        failures = 0
        while True:
            try:
                result = await do()
            except CONFIG_ERRORS:
                raise
            except RETRIED_ERRORS as err:
                failures += 1
                _Outage.failed(err)
                await fail(err)
                if stopped_waiting():
                    raise  # a stopping worker does not wait out an outage of Redis
                await asyncio.sleep(self._backoff.compute(failures))
                continue
            except RedisError as err:
                _WriteRefusal.refused(err)
                raise
            _Outage.answered()
            return result


def retry_options() -> dict[str, Any]:
    """Keyword arguments of a redis-py client or arq ``RedisSettings`` that retry forever."""
    return {"retry": PatientRetry(), "retry_on_error": list(RETRIED_ERRORS)}


def patient_redis(url: str) -> Redis:
    """An asyncio client of ``url`` that outlives Redis restarts (`PatientRetry`)."""
    client: Redis = Redis.from_url(url, **retry_options())
    return client


def check_queue_redis(url: str, *, wait_s: float | None = None) -> list[str]:
    """Check the queue's Redis at start-up; return warnings to print (persistence off).

    Waits, with backoff, until Redis answers (at most ``wait_s`` seconds; None: forever),
    printing a line about it at most every 30 seconds.

    Raises:
        SettingsError: one line naming the setting: a ``maxmemory-policy`` that can evict, a
            cluster, a refused password, or Redis still unreachable after ``wait_s``.
    """
    start, failures, told = time.monotonic(), 0, -1e9
    while True:
        try:
            refusal, warnings = probe_queue_redis(url, PROBE_TIMEOUT_S)
        except CONFIG_ERRORS as err:
            raise SettingsError(f"REDIS_URL is refused by Redis: {err}") from None
        except (RedisConnectionError, RedisTimeoutError, OSError) as err:
            failures += 1
            if wait_s is not None and time.monotonic() - start >= wait_s:
                raise SettingsError(f"REDIS_URL does not answer within {wait_s:.0f} s: "
                                    f"{err}") from None
            if time.monotonic() - told >= 15 * RETRY_CAP_S:
                told = time.monotonic()
                sys.stderr.write(f"llmgate worker: waiting for Redis (REDIS_URL): {err}\n")
            time.sleep(min(RETRY_CAP_S, RETRY_BASE_S * 2 ** failures))
            continue
        if refusal is not None:
            raise SettingsError(refusal)
        return warnings
