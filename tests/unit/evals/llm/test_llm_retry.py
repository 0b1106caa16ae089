"""Retry policy (pure) and the cases from the field over real HTTP: 429s, Retry-After, 5xx."""

from __future__ import annotations

import email.utils
import random
import time

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV, FakeSleep
from worker.evals.context import EvalContext
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm.retry import (
    backoff_s,
    parse_retry_after,
    wait_before_retry,
    with_retries,
)
from worker.evals.llm_types import Endpoint, Pricing, ProviderError, RetrySettings
from worker.evals.types import Settings

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path

NOW = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(("value", "seconds"), [
    ("7", 7.0), (" 7 ", 7.0), ("0", 0.0), ("1.5", 1.5),
    ("Wed, 21 Oct 2015 07:28:07 GMT", 7.0),   # RFC 9110's IMF-fixdate, 7 s after NOW
    ("Wednesday, 21-Oct-15 07:28:30 GMT", 30.0),  # obsolete RFC 850 form
    ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),   # in the past: retry now
    (None, None), ("", None), ("soon", None), ("-3", None), ("nan", None),
])
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


def test_backoff_is_full_jitter_under_the_exponential_ceiling() -> None:
    settings = RetrySettings(max_retries=5, backoff_base_s=0.5, max_backoff_s=3.0)
    rng = random.Random(1)
    for retry, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (10, 3.0)]:
        draws = [backoff_s(retry, settings, rng) for _ in range(200)]
        assert min(draws) >= 0 and max(draws) <= ceiling
        assert max(draws) > ceiling * 0.8  # the whole range is used, not a fixed wait


def test_retry_after_above_the_cap_fails_fast() -> None:
    err = ProviderError("rate_limited", "slow down", status=429, retryable=True,
                        retry_after_s=3600)
    assert wait_before_retry(err, 0, RetrySettings(max_backoff_s=60), random.Random(0)) is None
    not_retryable = ProviderError("provider", "model not found", status=404)
    assert wait_before_retry(not_retryable, 0, RetrySettings(), random.Random(0)) is None


async def test_with_retries_gives_up_after_max_retries_with_the_last_message() -> None:
    sleep, calls = FakeSleep(), []

    async def attempt() -> str:
        calls.append(1)
        raise ProviderError("provider", "boom", status=503, retryable=True)

    with pytest.raises(ProviderError, match=r"boom \(after 3 attempts\)"):
        await with_retries(attempt, RetrySettings(max_retries=2), sleep=sleep,
                           rng=random.Random(0))
    assert len(calls) == 3 and len(sleep.waits) == 2


def caller(sleep: FakeSleep, **settings: object) -> ModelCaller:
    config = Settings(**settings)  # type: ignore[arg-type]
    ctx = EvalContext.of(sleep=sleep, clock=sleep.clock, rng=random.Random(3))
    return ModelCaller(config, ResponseCache(None, "t", "off"), Budget(None, None), ctx)


def endpoint(llm: FakeLLMServer) -> Endpoint:
    return Endpoint("openai/test-model", {}, llm.url, KEY_ENV, Pricing(2.0, 8.0, 0.5))


async def test_429_twice_with_retry_after_7_then_200(llm: FakeLLMServer) -> None:
    """Field case: waits at least 7 s each time, scores normally, costs only the success."""
    llm.setup({"faults": [{"status": 429, "headers": {"Retry-After": "7"}, "times": 2}],
               "rules": [{"match": "hello", "reply": "hi there",
                          "usage": {"prompt_tokens": 1000, "completion_tokens": 200,
                                    "cached_tokens": 800}}]})
    sleep = FakeSleep()
    outcome = await caller(sleep).chat(endpoint(llm), MESSAGES)
    assert outcome.answer is not None and outcome.answer.text == "hi there"
    assert len(sleep.waits) == 2 and all(w >= 7 for w in sleep.waits)
    assert [c["status"] for c in llm.calls()] == [429, 429, 200]
    assert outcome.spend.provider_calls == 3
    assert outcome.spend.cost_usd == 0.0024  # one successful call, not three


async def test_retry_after_as_an_http_date_is_honoured(llm: FakeLLMServer) -> None:
    when = email.utils.formatdate(time.time() + 9, usegmt=True)
    llm.setup({"faults": [{"status": 429, "headers": {"Retry-After": when}}]})
    sleep = FakeSleep()
    outcome = await caller(sleep).chat(endpoint(llm), MESSAGES)
    assert outcome.answer is not None
    assert len(sleep.waits) == 1 and 7 <= sleep.waits[0] <= 9


async def test_retry_after_3600_with_a_60_s_cap_fails_fast(llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"status": 429, "headers": {"Retry-After": "3600"}, "times": None}]})
    sleep = FakeSleep()
    settings = {"retry": RetrySettings(max_retries=2, max_backoff_s=60)}
    outcome = await caller(sleep, **settings).chat(endpoint(llm), MESSAGES)
    assert outcome.answer is None and outcome.error_kind == "rate_limited"
    assert "asked to wait 3600 s, more than max_backoff 60 s" in (outcome.error or "")
    assert sleep.waits == [] and len(llm.calls()) == 1


async def test_429_on_every_call_is_a_rate_limit_error_not_a_failure(llm: FakeLLMServer) -> None:
    """Issue 29: a 429 is retried by time, not by ``max_retries`` (2): without Retry-After the
    quota's pause doubles from 0.25 s to 30 s, until 900 s (virtual) after the first attempt."""
    llm.setup({"faults": [{"status": 429, "times": None}]})
    sleep = FakeSleep()
    outcome = await caller(sleep).chat(endpoint(llm), MESSAGES)
    assert outcome.error_kind == "rate_limited"
    assert outcome.error is not None and outcome.error.startswith("rate limited (HTTP 429)")
    assert outcome.error.endswith("(still refused after 902 s of retries; the provider quota)")
    assert sleep.waits[:8] == [0.25, 0.5, 1, 2, 4, 8, 16, 30] and max(sleep.waits) == 30
    assert outcome.spend.provider_calls == 37 and outcome.spend.cost_usd == 0.0


async def test_500_and_malformed_json_are_retried(llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"status": 500}, {"malformed": True}], "default_reply": "fine"})
    sleep = FakeSleep()
    outcome = await caller(sleep).chat(endpoint(llm), MESSAGES)
    assert outcome.answer is not None and outcome.answer.text == "fine"
    assert [c["fault"] for c in llm.calls()] == ["status 500", "malformed", None]
    assert len(sleep.waits) == 2 and all(0 <= w <= 1.0 for w in sleep.waits)


async def test_404_is_not_retried_and_keeps_the_providers_message(llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"status": 404, "times": None, "body": {"error": {
        "message": "The model `nope` does not exist", "type": "invalid_request_error",
        "code": "model_not_found"}}}]})
    outcome = await caller(FakeSleep()).chat(endpoint(llm), MESSAGES)
    assert outcome.error_kind == "provider" and len(llm.calls()) == 1
    assert "HTTP 404" in (outcome.error or "") and "does not exist" in (outcome.error or "")


async def test_the_key_is_sent_from_the_named_variable_and_never_shown(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    outcome = await caller(FakeSleep()).chat(endpoint(llm), MESSAGES)
    assert outcome.answer is None and f"no {KEY_ENV}" in (outcome.error or "")
    assert llm.calls() == []


async def test_an_api_base_off_loopback_needs_the_operators_allow_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMGATE_ALLOWED_API_BASES", raising=False)
    far = Endpoint("openai/test-model", {}, "https://collector.example/v1", None)
    outcome = await caller(FakeSleep()).chat(far, MESSAGES)
    assert outcome.answer is None and "LLMGATE_ALLOWED_API_BASES" in (outcome.error or "")


# --- what to fix: the field a permanent error points at (worker/evals/verdict/causes.py reads it)
# ----

@pytest.mark.parametrize(("status", "key_env", "field"), [
    (401, KEY_ENV, "api_key_env"), (403, KEY_ENV, "api_key_env"), (401, None, "model"),
    (404, KEY_ENV, "model"), (400, KEY_ENV, "request"), (422, KEY_ENV, "request")])
async def test_a_refused_call_names_what_to_fix_and_a_transient_one_nothing(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, status: int, key_env: str | None,
        field: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-default")  # for the keyless endpoint
    llm.setup({"faults": [{"status": status, "times": None}]})
    place = Endpoint("openai/test-model", {}, llm.url, key_env)
    outcome = await caller(FakeSleep()).chat(place, MESSAGES)
    assert (outcome.error_kind, outcome.error_field) == ("provider", field)
    llm.setup({"faults": [{"status": 503, "times": None}]})
    assert (await caller(FakeSleep()).chat(place, MESSAGES)).error_field == ""


async def test_a_provider_whose_key_the_worker_lacks_is_refused_before_sending(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Field case (issue 12): litellm answered HTTP 500 "Missing credentials" for openai/ and
    401 for anthropic/, retried as provider trouble; now it names the variable, unsent."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for model, variable in (("anthropic/claude-3-5-haiku-20241022", "ANTHROPIC_API_KEY"),
                            ("openai/test-model", "OPENAI_API_KEY")):
        outcome = await caller(FakeSleep()).chat(Endpoint(model, {}, llm.url, None), MESSAGES)
        assert (outcome.error_kind, outcome.error_field) == ("provider", "model")
        assert outcome.error == (f"provider error: the worker has no {variable}, which {model} "
                                 "needs: set it on the worker, or name the worker's variable "
                                 "holding the key with api_key_env")
        assert outcome.spend.provider_calls == 0  # refused before any attempt: none sent
    unknown = await caller(FakeSleep()).chat(Endpoint("nosuch/model", {}, llm.url, KEY_ENV),
                                             MESSAGES)
    assert unknown.error_field == "model" and "litellm knows no provider for 'nosuch/model'" \
        in (unknown.error or "")
    assert llm.calls() == []
    missing = await caller(FakeSleep()).chat(Endpoint("openai/m", {}, llm.url, "NO_SUCH_VAR"),
                                             MESSAGES)
    assert missing.error_field == "api_key_env"
    far = await caller(FakeSleep()).chat(Endpoint("openai/m", {}, "http://192.0.2.1/v1", None),
                                         MESSAGES)
    assert far.error_field == "api_base"
