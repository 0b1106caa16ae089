"""The quota of the fake provider (tests/fakes/fake_llm.py): token buckets of requests and
tokens, OpenAI's 429 answer and its ``retry-after`` / ``x-ratelimit-*`` headers.

Formats: OpenAI API docs, "Rate limits" (``x-ratelimit-limit-requests``, ``-remaining-``,
``-reset-`` as Go durations, the same for tokens; the 429 body ``{"error": {"message", "type":
"requests" | "tokens", "param", "code": "rate_limit_exceeded"}}``); Azure OpenAI's
``retry-after-ms``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response

#: How a rate limit's 429 names when to retry (``rate_limit.announce``; the first is the default).
ANNOUNCES = ("retry_after_ms", "retry_after", "headers")
#: The keys of a ``rate_limit`` setup.
RATE_LIMIT_KEYS = ("requests_per_s", "request_burst", "tokens_per_min", "token_burst", "announce")


def _positive(raw: dict[str, Any], key: str, default: float | None = None) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"rate_limit.{key} must be a number above 0, not {value!r}")
    return float(value)


def rate_limit_config(raw: Any) -> dict[str, Any] | None:
    """Return the ``rate_limit`` setup with its defaults filled in, None for no limit.

    Raises:
        ValueError: naming the field that is missing, unknown or out of range.
    """
    if raw is None:
        return None
    if not isinstance(raw, dict) or "requests_per_s" not in raw:
        raise ValueError('rate_limit must be null or {"requests_per_s": R, ...}')
    if unknown := sorted(set(raw) - set(RATE_LIMIT_KEYS)):
        raise ValueError(f"rate_limit has unknown keys {unknown}; known: {list(RATE_LIMIT_KEYS)}")
    rps = _positive(raw, "requests_per_s")
    burst = _positive(raw, "request_burst", max(rps, 1.0))
    if burst < 1:
        raise ValueError(f"rate_limit.request_burst must be at least 1 (a request), not {burst}")
    tpm = None if raw.get("tokens_per_min") is None else _positive(raw, "tokens_per_min")
    announce = raw.get("announce", ANNOUNCES[0])
    if announce not in ANNOUNCES:
        raise ValueError(f"rate_limit.announce must be one of {list(ANNOUNCES)}, not {announce!r}")
    return {"requests_per_s": rps, "request_burst": burst, "tokens_per_min": tpm,
            "token_burst": None if tpm is None else _positive(raw, "token_burst", tpm / 60),
            "announce": announce}


def go_duration(seconds: float) -> str:
    """Format ``seconds``, rounded up to a millisecond, as Go prints a ``time.Duration``
    (``0s``, ``250ms``, ``1.5s``, ``6m0s``, ``1h2m3.04s``), the form of OpenAI's
    ``x-ratelimit-reset-*`` headers (platform.openai.com/docs/guides/rate-limits)."""
    ms = math.ceil(max(0.0, seconds) * 1000)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, frac = divmod(rest, 1000)
    secs = f"{whole}" + (f".{frac:03d}".rstrip("0") if frac else "")
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + secs + "s"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


@dataclass
class Bucket:
    """A continuous token bucket: ``level`` refills at ``rate_per_s`` up to ``capacity``."""

    capacity: float
    rate_per_s: float
    level: float = field(init=False)
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.level = self.capacity

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + self.rate_per_s * max(0.0, now - self.at))
        self.at = now

    def wait_s(self, cost: float) -> float:
        """Seconds until the bucket holds ``cost``: 0 when it does, inf when it never will."""
        if cost > self.capacity:
            return math.inf
        return max(0.0, (cost - self.level) / self.rate_per_s)

    def headers(self, kind: str) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-{limit,remaining,reset}-<kind>`` for the current level."""
        return {f"x-ratelimit-limit-{kind}": str(math.floor(self.capacity)),
                f"x-ratelimit-remaining-{kind}": str(max(0, math.floor(self.level))),
                f"x-ratelimit-reset-{kind}": go_duration(
                    (self.capacity - self.level) / self.rate_per_s)}


@dataclass(frozen=True)
class Admission:
    """A rate limit's decision: the 429 to answer at once (None: admitted), and the
    ``x-ratelimit-*`` headers every answer carries (empty unless ``announce`` is ``headers``)."""

    refusal: Response | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def stamp(self, response: Response) -> Response:
        for key, value in self.headers.items():
            response.headers.setdefault(key, value)
        return response


def refusal(limit: dict[str, Any], kind: str, bucket: Bucket, cost: float, wait_s: float,
             headers: dict[str, str]) -> Response:
    """The 429 OpenAI sends when ``kind``'s bucket lacks ``cost``, with the ``announce`` headers."""
    name, rate = (("requests per second (RPS)", limit["requests_per_s"]) if kind == "requests"
                  else ("tokens per min (TPM)", limit["tokens_per_min"]))
    if math.isinf(wait_s):
        message = (f"Request too large for {name}: Limit {_number(rate)}, Requested "
                   f"{_number(cost)}; at most {_number(bucket.capacity)} fit at once. The input or"
                   " output tokens must be reduced in order to run successfully.")
    else:
        message = (f"Rate limit reached for {name}: Limit {_number(rate)}, Used "
                   f"{round(bucket.capacity - bucket.level)}, Requested {_number(cost)}. Please "
                   f"try again in {go_duration(wait_s)}.")
        headers = dict(headers)
        if limit["announce"] == "retry_after_ms":
            headers["retry-after-ms"] = str(math.ceil(wait_s * 1000))
        if limit["announce"] in ("retry_after_ms", "retry_after"):
            headers["retry-after"] = str(max(1, math.ceil(wait_s)))
    return JSONResponse({"error": {"message": message, "type": kind, "param": None,
                                   "code": "rate_limit_exceeded"}}, 429, headers=headers)
