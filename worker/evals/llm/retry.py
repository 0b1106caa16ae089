"""Retry provider calls: exponential backoff with full jitter, honouring ``Retry-After``.

Policy (``settings.retry``): 429, 5xx, timeouts and dropped connections are retried up to
``max_retries`` times; other 4xx answers (bad request, unknown model, bad key) are not. A call
paced by the provider's quota (worker/evals/llm/pace.py, `Patience`) retries its 429s by time
instead: each attempt waits its turn of the quota, until the patience runs out.
Between attempts the call waits the provider's ``Retry-After`` when it sent one (seconds or an
HTTP date, RFC 9110 section 10.2.3), else a full-jitter backoff: a uniform draw from
0 to min(``max_backoff_s``, ``backoff_base_s`` * 2**retry) ("Exponential Backoff And Jitter",
AWS Architecture Blog, 2015). A ``Retry-After`` longer than ``max_backoff_s`` is not waited
out: the call fails at once with the provider's message (waiting an hour would stall the whole
job; the example is reported as rate limited instead). The clock, the sleep and the random
source are parameters, so tests check the waits without waiting.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from worker.evals.llm_types import ProviderError, RetrySettings

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Parse a ``Retry-After`` header into seconds from now.

    Args:
        value: the header value: delay-seconds (``"7"``) or an HTTP date
            (``"Wed, 21 Oct 2015 07:28:00 GMT"``), per RFC 9110 section 10.2.3.
        now_s: the current Unix time, seconds (for dates).

    Returns:
        Seconds to wait (0 for a date in the past), or None when absent or unparseable.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110: HTTP dates are GMT
            return None
        return max(0.0, when.timestamp() - now_s)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def backoff_s(retry: int, settings: RetrySettings, rng: random.Random) -> float:
    """Return the full-jitter wait before retry number ``retry`` (0-based), seconds.

    A uniform draw from 0 to min(max_backoff_s, backoff_base_s * 2**retry).
    """
    ceiling = min(settings.max_backoff_s, settings.backoff_base_s * (2.0 ** min(retry, 30)))
    return rng.uniform(0.0, ceiling)


def wait_before_retry(err: ProviderError, retry: int, settings: RetrySettings,
                      rng: random.Random) -> float | None:
    """Return how long to wait before retrying after ``err``, or None to give up now.

    Gives up when the error is not retryable, or when the provider's ``Retry-After`` exceeds
    ``settings.max_backoff_s``. Otherwise waits at least the ``Retry-After``.
    """
    if not err.retryable:
        return None
    if err.retry_after_s is not None:
        if err.retry_after_s > settings.max_backoff_s:
            return None
        return max(err.retry_after_s, backoff_s(retry, settings, rng))
    return backoff_s(retry, settings, rng)


@dataclass(frozen=True)
class Patience:
    """How long a paced call keeps retrying rate-limited attempts (worker/evals/llm/pace.py).

    A 429 then counts against no retry count: the attempt itself waits its turn of the
    provider's quota, and the call is tried again until ``limit_s`` seconds after its first
    attempt (the run's ``max_duration`` stops it sooner through ``before_attempt``).

    Attributes:
        clock: monotonic seconds.
        limit_s: seconds from the first attempt after which a 429 is final.
        quota: names the quota for the final error's message (e.g. "paced at 20 requests/s
            by the provider ..."), called only then.
    """

    clock: Callable[[], float]
    limit_s: float
    quota: Callable[[], str] = str


async def with_retries(attempt: Callable[[], Awaitable[T]], settings: RetrySettings, *,
                       sleep: Sleep, rng: random.Random,
                       before_attempt: Callable[[], None] | None = None,
                       patience: Patience | None = None) -> T:
    """Run ``attempt`` until it succeeds, retrying `ProviderError` by the policy above.

    Args:
        attempt: makes one call; raises `ProviderError` on failure.
        settings: retry count and backoff limits.
        sleep: awaited with the wait in seconds (``asyncio.sleep`` in production).
        rng: the jitter's random source.
        before_attempt: called before every attempt; may raise to stop (a budget check).
        patience: for a paced call, retry 429s by time instead of by count (`Patience`).

    Returns:
        The first successful result.

    Raises:
        ProviderError: the last error, when it is not retryable, retries are used up (or,
            for a paced 429, the patience), or the provider asked to wait longer than
            ``max_backoff_s`` (the message then says so).
    """
    retry = 0
    started = patience.clock() if patience is not None else 0.0
    while True:
        if before_attempt is not None:
            before_attempt()
        try:
            return await attempt()
        except ProviderError as err:
            if patience is not None and err.kind == "rate_limited" and err.retryable and not (
                    err.retry_after_s is not None and err.retry_after_s > settings.max_backoff_s):
                waited = patience.clock() - started
                if waited < patience.limit_s:
                    continue  # the next attempt waits its turn of the quota
                raise _final(err, retry, settings, (
                    f" (still refused after {waited:.0f} s of retries; "
                    f"{patience.quota() or 'the provider quota'})")) from None
            wait = wait_before_retry(err, retry, settings, rng)
            if wait is None or retry >= settings.max_retries:
                raise _final(err, retry, settings) from None
        await sleep(wait)
        retry += 1


def _final(err: ProviderError, retries: int, settings: RetrySettings,
           note: str = "") -> ProviderError:
    if note:
        pass
    elif err.retryable and err.retry_after_s is not None \
            and err.retry_after_s > settings.max_backoff_s:
        note = (f" (the provider asked to wait {err.retry_after_s:g} s, more than "
                f"max_backoff {settings.max_backoff_s:g} s: not retried)")
    elif err.retryable and retries:
        note = f" (after {retries + 1} attempts)"
    return ProviderError(err.kind, err.message + note, status=err.status,
                         retryable=err.retryable, retry_after_s=err.retry_after_s,
                         field=err.field, headers=err.headers)
