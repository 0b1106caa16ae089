"""Pace model calls to what the provider allows: one quota per endpoint and key, learned from
the provider's own answers, shared by every call of a process and, through Redis, by workers.

A provider's quota is a token bucket of requests and one of tokens (OpenAI, Azure OpenAI,
Anthropic and most gateways: "Rate limits" in each one's docs). llmgate mirrors each bucket
(`Bucket`: a rate per second, a capacity and a level) and sends a call only when both mirrors
hold enough for it; a call that would overdraw one waits its turn (`Quota.turn`). The mirror
is learned in two ways:

- **From headers** (`read_limits`): ``x-ratelimit-limit-requests``, ``-remaining-requests`` and
  ``-reset-requests`` (the time until the bucket is full again, a Go duration such as ``6m0s``
  or ``20ms``), and the same for ``-tokens``, as OpenAI sends them on every answer ("Rate
  limits", OpenAI API docs). A bucket refilled at a constant rate that lacks ``limit -
  remaining`` units refills them in ``reset``, so its rate is ``(limit - remaining) / reset``;
  its capacity is ``limit``; the mirror's level is never above ``remaining``.
- **From 429s alone** (a provider that sends only ``Retry-After`` / ``retry-after-ms``): a
  refused call means the provider's bucket is empty, so what it let through lately is its
  rate. On each refusal the rate becomes `BACKOFF_SHARE` (0.9) of the calls answered in the
  last `WINDOW_S` seconds (counted over at least one second, so the first burst is not taken
  for a rate); after `QUIET_S` without a refusal it grows `PROBE_PER_S` (3%) a second to find
  a higher quota again. This is additive-increase/multiplicative-decrease in spirit (Chiu and
  Jain, 1989, the congestion control of TCP), with the decrease set by measurement instead of
  halving, which would leave a quota half unused.

Every refusal also stops every call of the quota until its ``Retry-After`` has passed (without
one: `FIRST_WAIT_S`, doubled per refusal in a row up to `MAX_WAIT_S`). A refusal that names
tokens (OpenAI's body ``"type": "tokens"``, or a message about tokens per minute) teaches the
token bucket, whose calls are charged the prompt's tokens plus the most completion tokens the
call may produce, as the provider charges them when the request arrives.

Sharing: the quota of one endpoint (``api_base`` or the provider's default, and model) and one
API key (`quota_key`, a digest: the key never leaves the process) is one object per process
(`quota_for`), so base, head and judges of a gate share it. With Redis (the worker) its state
lives in Redis (``llmgate:quota:<digest>``, JSON, changed in WATCH/MULTI transactions on the
Redis server's clock), so every worker and shard of every gate pacing the same endpoint and key
shares one mirror and stays within one quota. A quota nothing has limited costs nothing: a
process keeps its answered-call counts locally, looks for a shared state at most once every
`POLL_S`, and joins it (adding its counts) once it or another worker learned a limit. A state
that hears nothing of a limit for `FORGET_S` is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

#: Answered calls are counted over the last this many seconds to learn a rate from 429s.
WINDOW_S = 2.0
#: Share of the recent answered rate paced at after a first refusal (fraction 0-1).
BACKOFF_SHARE = 0.9
#: Share of the rate measured between two refusals paced at (fraction 0-1).
MARK_SHARE = 0.95
#: Least share of its pace a rate learned from 429s keeps after one more refusal (fraction).
MAX_CUT = 0.8
#: Refusals this close to each other are too close to measure a rate between, seconds.
MIN_MARK_S = 0.5
#: Refusals further back than this are not measured from, seconds.
MARK_S = 30.0
#: Seconds without a refusal before a rate learned from 429s is probed upwards.
QUIET_S = 2.0
#: Growth of a rate learned from 429s per quiet second (fraction).
PROBE_PER_S = 0.03
#: Wait after a refusal without ``Retry-After``, seconds, doubled per refusal in a row.
FIRST_WAIT_S = 0.25
#: Shortest wait after a refusal, seconds (a ``Retry-After: 0`` must not loop at once).
MIN_WAIT_S = 0.02
#: Longest wait set by refusals without ``Retry-After``, seconds.
MAX_WAIT_S = 30.0
#: A state that heard nothing of a limit this long is forgotten, seconds.
FORGET_S = 300.0
#: How often a process not yet pacing a quota looks for a state other workers wrote, seconds.
POLL_S = 0.2
#: Width of one slot of the answered-calls window, seconds.
SLOT_S = 0.1
#: Redis key prefix of shared quota states.
KEY_PREFIX = "llmgate:quota:"
#: Response headers kept for pacing (lower case); all others are dropped at the client.
PACE_HEADERS = ("retry-after", "retry-after-ms", "x-ratelimit-limit-requests",
                "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
                "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
                "x-ratelimit-reset-tokens")
T = TypeVar("T")
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_TOKENS_WORDS = re.compile(r"\btokens?\b|\btpm\b|\btokens per min", re.IGNORECASE)


def parse_duration(text: str | None) -> float | None:
    """Parse a reset duration into seconds: a Go duration (``6m0s``, ``1.5s``, ``20ms``,
    OpenAI's format) or a plain number of seconds. None when absent or malformed."""
    if text is None or not text.strip():
        return None
    raw = text.strip()
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    parts = _DURATION.findall(raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        return None
    return sum(float(n) * units[u] for n, u in parts)


@dataclass(frozen=True)
class Limits:
    """One limit as an answer's headers state it: capacity, what is left, seconds to full."""

    limit: float
    remaining: float
    reset_s: float

    @property
    def rate(self) -> float | None:
        """Refill per second, or None when the headers do not tell it (fewer than 2 units
        missing, or no reset time).

        Providers send whole units left (OpenAI: integers), so a bucket with ``remaining``
        left holds between ``remaining`` and ``remaining + 1``: its rate lies between
        ``(limit - remaining - 1) / reset_s`` and ``(limit - remaining) / reset_s``. The lower
        bound is taken: pacing a little under the quota costs little, over it costs 429s.
        """
        if self.reset_s <= 0 or self.limit - self.remaining < 2:
            return None
        return (self.limit - self.remaining - 1) / self.reset_s


def read_limits(headers: Mapping[str, str], unit: str) -> Limits | None:
    """Read ``x-ratelimit-{limit,remaining,reset}-<unit>`` (``requests`` or ``tokens``), or
    None when any of the three is missing or malformed (headers keyed in lower case)."""
    try:
        limit = float(headers[f"x-ratelimit-limit-{unit}"])
        remaining = float(headers[f"x-ratelimit-remaining-{unit}"])
    except (KeyError, ValueError):
        return None
    reset = parse_duration(headers.get(f"x-ratelimit-reset-{unit}"))
    if reset is None or not (math.isfinite(limit) and math.isfinite(remaining)) or limit <= 0:
        return None
    return Limits(limit, max(0.0, remaining), reset)


def pace_headers(headers: Any) -> dict[str, str]:
    """Keep the headers that pace calls (`PACE_HEADERS`) of a response's headers, lower-cased;
    litellm's ``llm_provider-`` prefixed copies count as the provider's own."""
    kept: dict[str, str] = {}
    if not headers:
        return kept
    try:
        items = list(headers.items())
    except AttributeError:
        return kept
    for name, value in items:
        low = str(name).lower()
        low = low[len("llm_provider-"):] if low.startswith("llm_provider-") else low
        if low in PACE_HEADERS and value is not None:
            kept[low] = str(value)
    return kept


def retry_after_of(headers: Mapping[str, str]) -> float | None:
    """Seconds ``retry-after-ms`` or ``retry-after`` (seconds; not an HTTP date here, which
    worker/evals/llm/retry.py reads) ask for, or None."""
    millis = parse_duration(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    return parse_duration(headers.get("retry-after"))


def refused_unit(message: str) -> str:
    """Which limit a 429's message names: ``tokens`` when it speaks of tokens (OpenAI's body
    type ``tokens``, "tokens per min (TPM)"), else ``requests``."""
    return "tokens" if _TOKENS_WORDS.search(message) else "requests"


@dataclass
class Bucket:
    """The mirror of one provider bucket (rates per second; levels in requests or tokens).

    ``rate`` None: unknown, nothing is paced. ``learned``: ``headers`` or ``429s``.
    """

    rate: float | None = None
    cap: float = 1.0
    level: float = 0.0
    at: float = 0.0
    learned: str = ""
    raised_at: float = 0.0

    def refill(self, now: float) -> None:
        """Add what the rate refilled since ``at`` (never past the capacity)."""
        if self.rate is not None and now > self.at:
            self.level = min(self.cap, self.level + self.rate * (now - self.at))
            self.at = now

    def take(self, now: float, amount: float) -> float:
        """Reserve ``amount`` and return the seconds to wait before sending (0: at once)."""
        if self.rate is None or self.rate <= 0:
            return 0.0
        self.refill(now)
        self.level -= amount
        return max(0.0, self.at - now) + max(0.0, -self.level) / self.rate


@dataclass
class QuotaState:
    """One quota as every process pacing it sees it (JSON in Redis; times in seconds of the
    clock of its store)."""

    requests: Bucket = field(default_factory=Bucket)
    tokens: Bucket = field(default_factory=Bucket)
    blocked_until: float = 0.0
    refusals: int = 0
    refused_in_row: int = 0
    last_refusal: float = -1e18
    heard_at: float = 0.0
    started: float = 0.0
    answered: dict[str, list[float]] = field(default_factory=dict)
    epoch: int = 0
    totals: list[float] = field(default_factory=lambda: [0.0, 0.0])
    marks: list[list[float]] = field(default_factory=list)

    def to_json(self) -> str:
        """Serialise (for Redis)."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes | None) -> QuotaState | None:
        """Parse `to_json`'s text; None for none or another format."""
        if text is None:
            return None
        try:
            data = json.loads(text)
            return cls(Bucket(**data["requests"]), Bucket(**data["tokens"]),
                       float(data["blocked_until"]), int(data["refusals"]),
                       int(data["refused_in_row"]), float(data["last_refusal"]),
                       float(data["heard_at"]), float(data["started"]),
                       {str(k): [float(v[0]), float(v[1])] for k, v in data["answered"].items()},
                       int(data["epoch"]), [float(x) for x in data["totals"]],
                       [[float(x) for x in mark] for mark in data["marks"]])
        except (KeyError, TypeError, ValueError, IndexError):
            return None


def count_answer(state: QuotaState, now: float, tokens: float) -> None:
    """Count one answered call (and its tokens) in the window slot of ``now``."""
    slot = str(int(now // SLOT_S))
    counted = state.answered.setdefault(slot, [0.0, 0.0])
    counted[0] += 1
    counted[1] += tokens
    state.totals[0] += 1
    state.totals[1] += tokens
    oldest = int((now - WINDOW_S) // SLOT_S)
    for old in [s for s in state.answered if int(s) < oldest]:
        del state.answered[old]


def answered_rate(state: QuotaState, now: float) -> tuple[float, float]:
    """Calls and tokens answered per second over the last `WINDOW_S`, from the first answer
    in it (counted over at least one second)."""
    oldest = int((now - WINDOW_S) // SLOT_S)
    inside = [int(s) for s, v in state.answered.items() if int(s) >= oldest and v[0]]
    calls = sum(v[0] for s, v in state.answered.items() if int(s) >= oldest)
    tokens = sum(v[1] for s, v in state.answered.items() if int(s) >= oldest)
    span = max(1.0, now - min(inside, default=oldest) * SLOT_S)
    return calls / span, tokens / span


def rate_since_refusal(state: QuotaState, now: float, index: int) -> float | None:
    """Calls (``index`` 0) or tokens (1) answered per second since the last refusal at least
    `MIN_MARK_S` ago (and at most `MARK_S`), or None without one.

    A refusal means the provider's bucket was empty; so does this one: in between it let
    through exactly what it refilled, its rate times the time between (within a unit). Calls
    still in flight are not counted yet, so this is a slight underestimate.
    """
    for mark in reversed(state.marks):
        age = now - mark[0]
        if MIN_MARK_S <= age <= MARK_S:
            done = state.totals[index] - mark[1 + index]
            return done / age if done > 0 else None
    return None


def take_turn(state: QuotaState, now: float, tokens: float) -> float:
    """Reserve one call of ``tokens`` tokens and return the seconds to wait before sending it.

    A rate learned from 429s that has been quiet for `QUIET_S` grows `PROBE_PER_S` a second
    first. Both buckets are charged at once (the call goes at the later of the two turns).
    """
    for bucket in (state.requests, state.tokens):
        if bucket.learned == "429s" and bucket.rate is not None \
                and now - state.last_refusal > QUIET_S:
            since = max(0.0, now - max(bucket.raised_at, state.last_refusal + QUIET_S))
            bucket.rate *= (1 + PROBE_PER_S) ** since
            bucket.raised_at = now
    wait = max(0.0, state.blocked_until - now)
    wait = max(wait, state.requests.take(now, 1.0))
    if tokens > 0:
        wait = max(wait, state.tokens.take(now, tokens))
    return wait


def learn(state: QuotaState, now: float, headers: Mapping[str, str], refused: str,
          tokens: float, retry_after_s: float | None = None) -> None:
    """Learn from one answer: its limit headers, and whether the provider refused the call.

    Args:
        state: changed in place.
        now: the store's clock, seconds.
        headers: the answer's `pace_headers`.
        refused: ``""`` for an answer, ``"requests"`` or ``"tokens"`` for a 429 naming that
            limit.
        tokens: the tokens the call was charged (`Quota.turn`'s estimate, else its usage).
        retry_after_s: the wait a 429 asked for, if the caller read it (else the headers').
    """
    for unit, bucket in (("requests", state.requests), ("tokens", state.tokens)):
        told = read_limits(headers, unit)
        if told is None:
            continue
        state.heard_at = now
        rate = told.rate
        if rate is not None:
            bucket.refill(now)
            first = bucket.rate is None or bucket.learned != "headers"
            state.epoch += first
            if not first and bucket.rate is not None:  # within this answer's bounds
                rate = max(rate, min(bucket.rate, (told.limit - told.remaining) / told.reset_s))
            bucket.rate, bucket.cap, bucket.learned = rate, told.limit, "headers"
            bucket.level = told.remaining if first else min(bucket.level, told.remaining)
            bucket.at = max(bucket.at, now)
        elif bucket.learned == "headers":
            bucket.refill(now)
            bucket.level = min(bucket.level, told.remaining)
    if not refused:
        count_answer(state, now, tokens)
        state.refused_in_row = 0
        return
    _refusal(state, now, headers, refused, retry_after_s)


def _refusal(state: QuotaState, now: float, headers: Mapping[str, str], unit: str,
             retry_after_s: float | None) -> None:
    bucket = state.tokens if unit == "tokens" else state.requests
    state.heard_at = now
    state.epoch += 1
    state.refusals += 1
    state.refused_in_row += 1
    state.last_refusal = now
    wait = retry_after_s if retry_after_s is not None else retry_after_of(headers)
    if wait is not None and wait < MIN_WAIT_S:
        wait = None  # "Retry-After: 0" on every refusal must not loop: back off instead
    if wait is None and bucket.learned == "headers" and bucket.rate:
        bucket.refill(now)  # the headers of this answer told its level: wait for one call
        wait = max(0.0, 1.0 - bucket.level) / bucket.rate if unit == "requests" else 0.0
    if wait is None:
        wait = min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (state.refused_in_row - 1))
    state.blocked_until = max(state.blocked_until, now + max(MIN_WAIT_S, wait))
    if bucket.learned != "headers":
        index = 0 if unit == "requests" else 1
        measured = rate_since_refusal(state, now, index)
        if measured is None:
            measured = answered_rate(state, now)[index] * BACKOFF_SHARE
            precise = parse_duration(headers.get("retry-after-ms"))
            if unit == "requests" and precise is not None and 0 < precise < 1000:
                # a bucket refilled at R with under one call left is ready within 1/R
                measured = min(measured, 1000 / precise)
        if measured > 0:
            learned = MARK_SHARE * measured
            if bucket.learned == "429s" and bucket.rate is not None:
                # between refusals the bucket may have refilled unused (a pause, another
                # process's burst): the measure is a lower bound, so one refusal takes at most
                # a fifth off the pace
                learned = max(learned, MAX_CUT * bucket.rate)
            bucket.rate = learned
            bucket.learned = "429s"
            bucket.cap = 1.0 if unit == "requests" else max(1.0, bucket.rate * SLOT_S)
            bucket.raised_at = now
    state.marks = [m for m in state.marks if now - m[0] <= MARK_S][-15:] + [[now, *state.totals]]
    bucket.refill(now)
    bucket.level = min(bucket.level, 1.0)  # one call may go when the pause ends
    bucket.at = max(bucket.at, state.blocked_until)


def quota_key(api_base: str | None, model: str, api_key: str | None) -> str:
    """The digest naming one quota: endpoint (``api_base``, else the provider's default), model
    and API key (never stored or sent: only this digest)."""
    text = "\n".join((api_base or "", model, api_key or ""))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class Pace:
    """How a quota paces now, for reports: its rates (None: unknown) and where they came from."""

    requests_per_s: float | None
    tokens_per_s: float | None
    learned: str
    refusals: int


class Quota:
    """The pacing of one endpoint and key in this process (see the module docstring).

    Args:
        key: `quota_key`'s digest.
        redis: the shared store, or None (this process only).
        clock: seconds, for the in-process store (Redis uses its server's clock).
    """

    def __init__(self, key: str, redis: Redis | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.key = key
        self.redis = redis
        self.clock = clock
        self.local = QuotaState(started=clock())
        self.shared = False  # whether calls read and write the state in Redis
        self._offset = 0.0  # the Redis server's clock minus ``clock``, seconds
        self._joining: asyncio.Event | None = None  # set while `_join` runs
        self._merged = False  # whether this process's counts were added to the shared state
        self._polled_at = -1e18
        self.told: set[str] = set()  # what `announce` said already

    async def turn(self, sleep: Callable[[float], Awaitable[None]],
                   tokens: Callable[[], float] | None = None,
                   max_wait_s: float = math.inf) -> float:
        """Wait until this quota lets one more call go, and reserve it.

        Args:
            sleep: awaited with the wait, seconds.
            tokens: the call's token charge (prompt plus most completion tokens), asked only
                while a token limit is known.
            max_wait_s: a longer wait is not slept (a quota spent for an hour must not stall
                the run): the wait is returned at once for the caller to give up.

        Returns:
            The seconds waited (or, above ``max_wait_s``, that would have been waited).
        """
        charge = [0.0]

        def reserve(state: QuotaState, now: float) -> float:
            if state.tokens.rate is not None and tokens is not None and not charge[0]:
                charge[0] = float(tokens())
            return take_turn(state, now, charge[0])

        wait = await self._update(reserve)
        if 0 < wait <= max_wait_s:
            await sleep(wait)
        return wait

    async def heard(self, headers: Mapping[str, str], refused: str = "",
                    tokens: float = 0.0, retry_after_s: float | None = None) -> None:
        """Learn from one answer (`learn`): ``refused`` is ``requests`` or ``tokens`` for a
        429, "" for an answer; ``retry_after_s`` is the wait the 429 asked for as the client
        read it (an HTTP date too), else the headers tell."""
        if not self.shared and self.redis is not None and (refused or _tells_limits(headers)):
            await self._join()
        await self._update(lambda state, now: learn(state, now, headers, refused, tokens,
                                                    retry_after_s))

    def refused_in_row(self) -> int:
        """Refusals since the last answer (as this process last saw the quota)."""
        return self.local.refused_in_row

    def epoch(self) -> int:
        """A number that changes whenever the quota learned a limit or was refused (as this
        process last saw it): a call whose turn came before a change takes another."""
        return self.local.epoch

    def pace(self) -> Pace:
        """What this process knows of the quota now (its last view of a shared state)."""
        state = self.local
        return Pace(state.requests.rate, state.tokens.rate,
                    state.requests.learned or state.tokens.learned, state.refusals)

    async def _update(self, change: Callable[[QuotaState, float], T]) -> T:
        if self.redis is not None and not self.shared:
            await self._poll()
        if not self.shared or self.redis is None:
            now = self._now()
            if self.local.heard_at and now - self.local.heard_at > FORGET_S:
                self.local = QuotaState(started=now)
            return change(self.local, now)
        try:
            return await self._transact(self.redis, change)
        except (RedisError, OSError):  # Redis away: pace in this process meanwhile
            self.shared = False
            return change(self.local, self._now())

    async def _transact(self, redis: Redis, change: Callable[[QuotaState, float], T]) -> T:
        result: list[T] = []

        def step(state: QuotaState | None, now: float) -> QuotaState | None:
            if state is None or now - state.heard_at > FORGET_S:
                return None  # forgotten meanwhile: pace here until a limit is heard again
            result[:] = [change(state, now)]
            return state

        try:
            state = await self._atomically(redis, step)
        except _Contended:  # other processes won 50 times in a row: pace here this once
            return change(self.local, self._now())
        if state is None or not result:
            self.shared = False
            return change(self.local, self._now())
        self.local = state
        return result[0]

    async def _atomically(self, redis: Redis, step: Callable[[QuotaState | None, float],
                                                             QuotaState | None]
                          ) -> QuotaState | None:
        """Apply ``step`` to the stored state in one WATCH/MULTI transaction, on the Redis
        server's clock, and store what it returns (None: nothing); a conflict with another
        process runs it again.

        Raises:
            _Contended: 50 conflicts in a row.
            RedisError, OSError: Redis could not be reached.
        """
        name = KEY_PREFIX + self.key
        for _ in range(50):
            async with redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(name)
                    raw = await pipe.get(name)
                    seconds, micros = await pipe.time()
                    now = float(seconds) + float(micros) / 1e6
                    self._offset = now - self.clock()
                    state = step(QuotaState.from_json(raw), now)
                    if state is None:
                        return None
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(name, state.to_json(), ex=int(FORGET_S))
                    await pipe.execute()
                    return state
                except WatchError:
                    continue
        raise _Contended

    def _now(self) -> float:
        """This process's clock, on the Redis server's time once a state was shared."""
        return self.clock() + self._offset

    async def _poll(self) -> None:
        now = self.clock()
        if now - self._polled_at < POLL_S or self.redis is None:
            return
        self._polled_at = now
        with contextlib.suppress(RedisError, OSError):
            if await self.redis.exists(KEY_PREFIX + self.key):
                await self._join()

    async def _join(self) -> None:
        """Share this quota through Redis, adding this process's answered calls to it once
        (calls that learn something at once join once: the first merges, the rest wait)."""
        if self.redis is None or self._joining is not None:
            if self._joining is not None:
                await self._joining.wait()
            return
        self._joining = asyncio.Event()
        local, offset = self.local, self._offset

        def step(state: QuotaState | None, now: float) -> QuotaState:
            state = state or QuotaState(started=now, heard_at=now)
            if not self._merged:  # a conflict runs this again on the new stored state
                _merge_answers(state, local, now - self.clock() - offset)
            return state

        try:
            state = await self._atomically(self.redis, step)
        except (RedisError, OSError, _Contended):
            state = None
        finally:
            joining, self._joining = self._joining, None
        if state is not None:
            self.local, self.shared, self._merged = state, True, True
        joining.set()


class _Contended(Exception):
    """A shared state changed under every one of 50 tries of a transaction."""


def _tells_limits(headers: Mapping[str, str]) -> bool:
    return any(read_limits(headers, unit) is not None and
               read_limits(headers, unit).rate is not None  # type: ignore[union-attr]
               for unit in ("requests", "tokens"))


def _merge_answers(into: QuotaState, local: QuotaState, offset_s: float) -> None:
    """Add ``local``'s window (times of this process's clock, ``offset_s`` behind the store's)."""
    for slot, (calls, tokens) in local.answered.items():
        moved = str(int((int(slot) * SLOT_S + offset_s) // SLOT_S))
        counted = into.answered.setdefault(moved, [0.0, 0.0])
        counted[0] += calls
        counted[1] += tokens
    into.started = min(into.started, local.started + offset_s)
    if local.totals[0]:
        into.totals = [a + b for a, b in zip(into.totals, local.totals, strict=True)]
        into.marks = []  # counts from before the join would be taken for counts since a mark


_LOCAL: dict[str, Quota] = {}
_SHARED: weakref.WeakKeyDictionary[Redis, dict[str, Quota]] = weakref.WeakKeyDictionary()


def quota_for(key: str, redis: Redis | None,
              clock: Callable[[], float] = time.monotonic) -> Quota:
    """Return this process's `Quota` of ``key``: one per key and Redis client (None: one per
    key for the process); ``clock`` (monotonic seconds) is the first caller's."""
    quotas = _LOCAL if redis is None else _SHARED.setdefault(redis, {})
    quota = quotas.get(key)
    if quota is None:
        quota = quotas[key] = Quota(key, redis, clock)
    return quota


def forget_all() -> None:
    """Forget every quota of this process (tests; Redis states stay)."""
    _LOCAL.clear()
    _SHARED.clear()


def describe_pace(pace: Pace) -> str:
    """One line for progress output: ``paced at 20 requests/s (learned from 429s)``, or ""
    when nothing is paced."""
    parts = []
    if pace.requests_per_s is not None:
        parts.append(f"{pace.requests_per_s:.3g} requests/s")
    if pace.tokens_per_s is not None:
        parts.append(f"{pace.tokens_per_s * 60:,.0f} tokens/min")
    if not parts:
        return ""
    source = "its rate-limit headers" if pace.learned == "headers" else "its 429 answers"
    return f"paced at {' and '.join(parts)} by the provider (learned from {source})"

