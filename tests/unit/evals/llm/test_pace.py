"""Pacing to the provider's quota (worker/evals/llm/pace.py, issue 29): the arithmetic on its
own, then real calls against the fake provider's token bucket, then two processes' worth of
quotas sharing one state through a real Redis."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV, FakeSleep
from worker.evals.context import EvalContext
from worker.evals.llm import pace
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.pace import Limits, Quota, QuotaState
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm_types import Endpoint
from worker.evals.types import Settings

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path


@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1.5s", 1.5), ("1h2m3.5s", 3723.5),
    ("0.25", 0.25), ("7", 7.0), ("", None), ("soon", None), ("1s soon", None), ("-1", None)])
def test_reset_durations_parse_as_openai_writes_them(text: str, seconds: float | None) -> None:
    got = pace.parse_duration(text)
    assert got == pytest.approx(seconds) if seconds is not None else got is None


def test_a_rate_from_headers_is_the_lower_bound_of_whole_units_left() -> None:
    """20 a second refilled: 18 missing (17.x left, sent as 17... as 2 left) in 0.9 s."""
    told = pace.read_limits({"x-ratelimit-limit-requests": "20",
                             "x-ratelimit-remaining-requests": "2",
                             "x-ratelimit-reset-requests": "900ms"}, "requests")
    assert told == Limits(20.0, 2.0, 0.9)
    assert told.rate == pytest.approx(17 / 0.9)
    full = Limits(20.0, 19.0, 0.05)  # fewer than 2 missing: says nothing of the rate
    assert full.rate is None
    assert pace.read_limits({"x-ratelimit-limit-tokens": "x"}, "tokens") is None


def test_only_the_pacing_headers_are_kept_and_litellms_prefix_is_read() -> None:
    kept = pace.pace_headers({"llm_provider-x-ratelimit-remaining-requests": "3",
                              "Retry-After-Ms": "120", "set-cookie": "secret",
                              "x-request-id": "abc"})
    assert kept == {"x-ratelimit-remaining-requests": "3", "retry-after-ms": "120"}
    assert pace.retry_after_of(kept) == pytest.approx(0.12)
    assert pace.retry_after_of({"retry-after": "2"}) == 2.0


@pytest.mark.parametrize(("message", "unit"), [
    ("Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29800", "tokens"),
    ("Rate limit reached for requests per second (RPS): Limit 20", "requests"),
    ("Too Many Requests", "requests")])
def test_a_refusal_names_its_limit(message: str, unit: str) -> None:
    assert pace.refused_unit(message) == unit


def test_headers_set_the_pace_at_the_quota_and_a_burst_goes_at_once() -> None:
    state = QuotaState(started=0.0)
    headers = {"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "4",
               "x-ratelimit-reset-requests": "600ms"}  # 10 a second; 4 left
    pace.learn(state, 100.0, headers, "", 0.0)
    assert state.requests.rate == pytest.approx(5 / 0.6)  # lower bound of 6 missing in 0.6 s
    waits = [pace.take_turn(state, 100.0, 0.0) for _ in range(6)]
    assert waits[:4] == [0.0] * 4  # what is left goes at once
    assert waits[4] == pytest.approx(0.12) and waits[5] == pytest.approx(0.24)


def test_429s_alone_teach_the_rate_between_two_refusals() -> None:
    """Between two refusals the provider's bucket went from empty to empty: it let through
    its rate times the time between. 19 answers in 1 s: paced at 0.95 x 19 a second."""
    state = QuotaState(started=0.0)
    for i in range(30):  # a burst, then the first refusal
        pace.learn(state, i / 30, {}, "", 0.0)
    pace.learn(state, 1.0, {"retry-after-ms": "40"}, "requests", 0.0)
    assert state.blocked_until == pytest.approx(1.04)
    first = state.requests.rate
    # no earlier refusal: 0.9 of the window (27 a second, the first burst counted in), capped
    # at 25 a second: a bucket that is ready within 40 ms again refills at most 1 / 0.04 a second
    assert first == pytest.approx(0.95 * 25)
    for i in range(19):
        pace.learn(state, 1.05 + i / 20, {}, "", 0.0)
    pace.learn(state, 2.0, {"retry-after-ms": "30"}, "requests", 0.0)
    # 0.95 x 19 = 18.05 measured, but one refusal takes at most a fifth off: 0.8 x 23.75
    assert state.requests.rate == pytest.approx(19.0)
    for i in range(18):
        pace.learn(state, 2.05 + i / 20, {}, "", 0.0)
    pace.learn(state, 3.0, {"retry-after-ms": "30"}, "requests", 0.0)
    assert state.requests.rate == pytest.approx(0.95 * 18)  # measured, within a fifth
    assert state.requests.learned == "429s" and state.refusals == 3
    assert pace.take_turn(state, 3.0, 0.0) == pytest.approx(0.03)  # one goes after the pause
    assert pace.take_turn(state, 3.0, 0.0) == pytest.approx(0.03 + 1 / (0.95 * 18))


def test_a_quiet_learned_rate_is_probed_upwards() -> None:
    state = QuotaState(started=0.0)
    pace.learn(state, 0.5, {}, "", 0.0)
    pace.learn(state, 1.0, {"retry-after": "1"}, "requests", 0.0)
    rate = state.requests.rate
    assert rate is not None
    pace.take_turn(state, 1.0 + pace.QUIET_S + 10, 0.0)  # 10 quiet seconds after QUIET_S
    assert state.requests.rate == pytest.approx(rate * (1 + pace.PROBE_PER_S) ** 10)


def test_a_refusal_without_retry_after_doubles_the_pause() -> None:
    state = QuotaState(started=0.0)
    for k in range(3):
        pace.learn(state, 10.0, {}, "requests", 0.0)
        assert state.blocked_until == pytest.approx(10.0 + pace.FIRST_WAIT_S * 2 ** k)
    pace.learn(state, 10.5, {}, "", 0.0)
    assert state.refused_in_row == 0


def test_the_state_survives_its_json_and_another_format_is_none() -> None:
    state = QuotaState(started=1.0)
    pace.learn(state, 2.0, {"retry-after": "1"}, "tokens", 50.0)
    assert QuotaState.from_json(state.to_json()) == state
    assert QuotaState.from_json(b'{"v": 2}') is None and QuotaState.from_json(None) is None


def test_the_quota_of_an_endpoint_hashes_its_key_and_never_holds_it() -> None:
    one = pace.quota_key("http://127.0.0.1:1/v1", "openai/m", "sk-secret")
    assert "sk-secret" not in one and len(one) == 24
    assert one != pace.quota_key("http://127.0.0.1:1/v1", "openai/m", "sk-other")
    assert one == pace.quota_key("http://127.0.0.1:1/v1", "openai/m", "sk-secret")


# --- real calls against the fake provider's token bucket ------------------------------------

def caller(concurrency: int, sleep: FakeSleep | None = None) -> ModelCaller:
    ctx = EvalContext.of(say=lambda _: None) if sleep is None else \
        EvalContext.of(sleep=sleep, clock=sleep.clock, say=lambda _: None)
    return ModelCaller(Settings(concurrency=concurrency), ResponseCache(None, "t", "off"),
                       Budget(None, None), ctx)


async def ask(model_caller: ModelCaller, url: str, n: int, tag: str = "q") -> list[bool]:
    endpoint = Endpoint("openai/test-model", {}, url, KEY_ENV)
    outcomes = await asyncio.gather(*(
        model_caller.chat(endpoint, [{"role": "user", "content": f"{tag} {i}"}], use_cache=False)
        for i in range(n)))
    return [o.answer is not None for o in outcomes]


@pytest.mark.parametrize("announce", ["retry_after_ms", "retry_after", "headers"])
async def test_a_quota_below_the_concurrency_loses_no_example(llm: FakeLLMServer,
                                                              announce: str) -> None:
    """The field case of issue 29: concurrency 10 against a quota of fewer calls than that in
    flight. Before it, 3 attempts a call lost examples (exit 4, undecided); now every call is
    answered and fewer than 5% of the requests meet a 429 (the goal of the issue): only the
    first wave that finds the provider's bucket empty, before anything was learned."""
    llm.setup({"latency_ms": 10, "rate_limit": {"requests_per_s": 80, "request_burst": 10,
                                                "announce": announce}})
    answered = await ask(caller(10), llm.url, 200)
    assert all(answered)
    statuses = [c["status"] for c in llm.calls("chat")]
    assert statuses.count(200) == 200
    assert statuses.count(429) < 0.05 * len(statuses), statuses


async def test_the_pace_is_said_once_with_where_it_was_learned(llm: FakeLLMServer) -> None:
    llm.setup({"rate_limit": {"requests_per_s": 50, "request_burst": 3,
                              "announce": "headers"}})
    said: list[str] = []
    model_caller = caller(4)
    model_caller.ctx.observers = replace(model_caller.ctx.observers, say=said.append)
    assert all(await ask(model_caller, llm.url, 12))
    assert 1 <= len(said) <= 2 and said[0].startswith("openai/test-model: paced at ")
    assert said[0].endswith("requests/s by the provider (learned from its rate-limit headers)")


async def test_a_quota_spent_for_an_hour_fails_fast_instead_of_stalling(
        llm: FakeLLMServer) -> None:
    """One call hears "retry after 3600 s" (over max_backoff 60 s): it fails at once, and so
    does the next call of the same quota instead of sleeping an hour."""
    llm.setup({"faults": [{"status": 429, "headers": {"Retry-After": "3600"}}],
               "default_reply": "fine"})
    sleep = FakeSleep()
    first, second = await ask(caller(1, sleep), llm.url, 2)
    assert (first, second) == (False, False) and sleep.waits == []
    assert len(llm.calls("chat")) == 1


# --- one quota through Redis -----------------------------------------------------------------

async def test_two_workers_pace_one_quota_through_redis(redis_url: str) -> None:
    """Two processes' quotas (separate Redis clients) share what either learned: a refusal
    heard by one makes the other wait, on the Redis server's clock."""
    one, two = Redis.from_url(redis_url), Redis.from_url(redis_url)
    try:
        first, second = Quota("k" * 24, one), Quota("k" * 24, two)
        for _ in range(20):
            await first.heard({}, "")
        await first.heard({"retry-after": "2"}, "requests")
        assert await one.exists(pace.KEY_PREFIX + "k" * 24)
        waits: list[float] = []

        async def record(seconds: float) -> None:
            waits.append(seconds)

        await second.turn(record)  # never told of the refusal itself
        assert second.shared and len(waits) == 1 and 1.5 < waits[0] <= 2.0
        assert first.pace().requests_per_s == pytest.approx(second.pace().requests_per_s)
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_quota_nobody_limited_costs_no_redis_write(redis_url: str) -> None:
    client = Redis.from_url(redis_url)
    try:
        quota = Quota("n" * 24, client)
        start = time.monotonic()
        for _ in range(50):
            assert await quota.turn(asyncio.sleep) == 0.0
            await quota.heard({}, "")
        assert not quota.shared and await client.keys(pace.KEY_PREFIX + "*") == []
        assert time.monotonic() - start < 5
    finally:
        await client.aclose()


async def test_a_request_larger_than_the_token_quota_is_not_retried(llm: FakeLLMServer) -> None:
    """OpenAI's "Request too large for ... tokens per min" is a 429 no wait can fix: the call
    fails at once, blamed on the request (the prompt or max_tokens), not paced for 900 s."""
    llm.setup({"token_counts": True, "rate_limit": {"requests_per_s": 100,
                                                    "tokens_per_min": 600, "token_burst": 10}})
    sleep = FakeSleep()
    outcome = await caller(1, sleep).chat(
        Endpoint("openai/test-model", {"max_tokens": 50}, llm.url, KEY_ENV),
        [{"role": "user", "content": "hello"}], use_cache=False)
    assert (outcome.error_kind, outcome.error_field) == ("provider", "request")
    assert "Request too large for tokens per min (TPM)" in (outcome.error or "")
    assert len(llm.calls("chat")) == 1 and sleep.waits == []


def test_retry_after_zero_on_every_refusal_backs_off_instead_of_flooding() -> None:
    """Tester's case: 429 with ``retry-after: 0`` on every call sent 1,057 requests in 30 s
    from 10 examples; a zero wait now counts as none (0.25 s, doubled per refusal in a row)."""
    state = QuotaState(started=0.0)
    for k in range(4):
        pace.learn(state, 10.0, {"retry-after": "0"}, "requests", 0.0)
        assert state.blocked_until == pytest.approx(10.0 + pace.FIRST_WAIT_S * 2 ** k)
