"""The direct client and litellm answer alike: errors, answers, usage, cost, requests, cache.

Each test sends the same calls to the same fake OpenAI-compatible server (over real HTTP)
through both paths, switched with ``LLMGATE_DIRECT_CLIENT``, and compares what llmgate made of
them. Which configs take the direct path is checked first.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV, FakeSleep, context, model_config, write_repo
from worker.evals.context import EvalContext
from worker.evals.llm import client as llm_client
from worker.evals.llm import direct
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm_types import CallOutcome, Endpoint, Pricing, ProviderError, TokenUsage
from worker.evals.types import Settings
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]


@pytest.mark.parametrize(("model", "api_base", "params", "env", "wire"), [
    ("openai/test-model", "http://127.0.0.1:8000/v1", {}, "", "test-model"),
    ("openai/meta-llama/Llama-3.1-8B", "http://vllm:8000/v1", {"temperature": 0, "seed": 1,
                                                               "max_tokens": 5}, "1",
     "meta-llama/Llama-3.1-8B"),
    ("openai/test-model", None, {}, "", None),  # api.openai.com: a hosted provider
    ("openai/gpt-4o-mini", "http://127.0.0.1:8000/v1", {}, "", None),  # a model litellm knows
    ("openai/o3-custom", "http://127.0.0.1:8000/v1", {}, "", None),  # a family it rewrites
    ("openai/my-gpt-5", "http://127.0.0.1:8000/v1", {}, "", None),
    ("hosted_vllm/test-model", "http://127.0.0.1:8000/v1", {}, "", None),  # litellm reshapes
    ("ollama_chat/llama3", "http://127.0.0.1:11434", {}, "", None),  # Ollama's own protocol
    ("openai/test-model", "http://127.0.0.1:8000/v1", {"top_k": 5}, "", None),  # not OpenAI's
    ("openai/test-model", "http://127.0.0.1:8000/v1", {"user": "u"}, "", None),  # litellm drops
    ("openai/test-model", "http://127.0.0.1:8000/v1", {"dimensions": 8}, "", None),  # refuses
    ("openai/test-model", "http://127.0.0.1:8000/v1", {}, "0", None),  # switched off
    ("openai/test-model", "http://127.0.0.1:8000/v1", {}, "off", None),
])
def test_which_configs_take_the_direct_path(model: str, api_base: str | None,
                                            params: dict[str, Any], env: str,
                                            wire: str | None) -> None:
    endpoint = Endpoint(model, params, api_base, KEY_ENV)
    assert direct.wire_model(endpoint, {direct.DIRECT_ENV: env}) == wire


def _on(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(direct.DIRECT_ENV, "1" if path == "direct" else "0")


@pytest.fixture(autouse=True)
def direct_sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The value of ``LLMGATE_DIRECT_CLIENT`` at each request the direct client sent; a test
    fails if one was sent under ``0``, and a comparing test asserts that some were sent (both
    sides of a comparison must be what they claim)."""
    switches: list[str] = []
    post = direct.post

    async def counted(*args: Any, **kwargs: Any) -> direct.Answer:
        switches.append(os.environ.get(direct.DIRECT_ENV, ""))
        return await post(*args, **kwargs)

    monkeypatch.setattr(direct, "post", counted)
    yield switches
    assert "0" not in switches, "a call took the direct path under LLMGATE_DIRECT_CLIENT=0"


async def _error(endpoint: Endpoint, timeout_s: float = 5.0) -> tuple[Any, ...]:
    with pytest.raises(ProviderError) as caught:
        await llm_client.chat(endpoint, [{"role": "user", "content": "hi"}], timeout_s)
    err = caught.value
    assert "sk-fake-test-key" not in err.message
    return err.kind, err.status, err.retryable, err.retry_after_s, err.field, err.headers


TOO_LARGE = {"error": {"message": "Request too large for test-model on tokens per min (TPM): "
                                  "Limit 10, Requested 500.", "type": "tokens"}}


@pytest.mark.parametrize(("fault", "expected"), [
    ({"status": 429, "headers": {"retry-after": "7"}},
     ("rate_limited", 429, True, 7.0, "", {"retry-after": "7"})),
    ({"status": 429, "headers": {"retry-after-ms": "1500", "x-ratelimit-remaining-requests": "0"}},
     ("rate_limited", 429, True, 1.5, "",
      {"retry-after-ms": "1500", "x-ratelimit-remaining-requests": "0"})),
    ({"status": 429, "body": TOO_LARGE}, ("provider", 429, False, None, "request", {})),
    ({"status": 500}, ("provider", 500, True, None, "", {})),
    ({"status": 503, "headers": {"retry-after": "2"}},
     ("provider", 503, True, 2.0, "", {"retry-after": "2"})),
    ({"status": 502, "body": "upstream down"}, ("provider", 502, True, None, "", {})),
    ({"status": 400}, ("provider", 400, False, None, "request", {})),
    ({"status": 401}, ("provider", 401, False, None, "api_key_env", {})),
    ({"status": 403}, ("provider", 403, False, None, "api_key_env", {})),
    ({"status": 404}, ("provider", 404, False, None, "model", {})),
    ({"status": 408}, ("timeout", 408, True, None, "", {})),
    ({"status": 409}, ("provider", 409, True, None, "", {})),
    ({"status": 413}, ("provider", 413, False, None, "request", {})),
    ({"status": 422}, ("provider", 422, False, None, "request", {})),
    ({"malformed": True}, ("provider", 500, True, None, "", {})),
])
async def test_a_fault_is_the_same_error_on_both_paths(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, fault: dict[str, Any],
        expected: tuple[Any, ...], direct_sent: list[str]) -> None:
    endpoint = Endpoint("openai/test-model", {}, llm.url, KEY_ENV)
    found = {}
    for path in llm_support.PATHS:
        _on(path, monkeypatch)
        llm.reset()
        llm.setup({"faults": [fault]})
        found[path] = await _error(endpoint)
        assert [c["status"] for c in llm.calls()] == [fault.get("status", 200)]
    assert found == {"direct": expected, "litellm": expected}
    assert direct_sent == ["1"]


async def test_a_timeout_and_a_refused_connection_are_the_same_errors_on_both_paths(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, direct_sent: list[str]) -> None:
    stalled = Endpoint("openai/test-model", {}, llm.url, KEY_ENV)
    closed = Endpoint("openai/test-model", {}, "http://127.0.0.1:9/v1", KEY_ENV)
    for path in llm_support.PATHS:
        _on(path, monkeypatch)
        llm.reset()
        llm.setup({"faults": [{"stall": True, "stall_s": 2}]})
        assert await _error(stalled, timeout_s=0.3) == ("timeout", 408, True, None, "", {}), path
        assert await _error(closed) == ("provider", 500, True, None, "", {}), path
    assert direct_sent == ["1", "1"]


RULES: list[dict[str, Any]] = [
    {"match": "priced", "reply": "a b c", "usage": {"prompt_tokens": 1000, "completion_tokens":
                                                    200, "cached_tokens": 800}},
    {"match": "written", "reply": "w", "usage": {"prompt_tokens": 100, "completion_tokens": 5,
                                                 "cache_write_tokens": 40}},
    {"match": "gateway", "reply": "g", "usage": {"prompt_tokens": 100, "completion_tokens": 5,
                                                 "cache_creation_input_tokens": 30}},
    {"match": "silent", "reply": "no usage here", "usage": None},
    {"match": "nothing", "reply": None},
    {"match": "cut", "reply": "", "finish_reason": "length"},
    {"match": "filtered", "reply": "partial", "finish_reason": "content_filter"},
    {"match": "tool", "tool_calls": [{"name": "lookup", "arguments": {"id": 7}}]},
    {"match": "broken", "reply": "a\ud800b"},
]
PARAMS = {"temperature": 0, "top_p": 0.5, "max_tokens": 64, "seed": 3, "stop": ["\n\n"],
          "presence_penalty": 0.1, "frequency_penalty": 0.2, "n": 1,
          "logit_bias": {"50256": -100}, "response_format": {"type": "json_object"},
          "max_completion_tokens": 64, "logprobs": False, "parallel_tool_calls": False,
          "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {
              "type": "object", "properties": {"id": {"type": "integer"}}}}}],
          "tool_choice": "auto", "top_logprobs": None}


def _caller() -> ModelCaller:
    sleep = FakeSleep()
    ctx = EvalContext.of(sleep=sleep, clock=sleep.clock, rng=random.Random(3))
    return ModelCaller(Settings(), ResponseCache(None, "t", "off"), Budget(None, None), ctx)


def _seen(outcome: CallOutcome) -> tuple[Any, ...]:
    answer = outcome.answer
    fields = None if answer is None else (answer.text, answer.usage, answer.cost_usd,
                                          answer.vectors, answer.problem, answer.charge_usd,
                                          [(c.id[:5], c.name, c.arguments)  # ids: the
                                           for c in answer.tool_calls],  # server's count
                                          answer.replaced)
    return fields, outcome.error, outcome.error_kind, outcome.spend


def _requests(llm: FakeLLMServer) -> list[dict[str, Any]]:
    return [{k: v for k, v in call.items() if k not in ("seq", "t")} for call in llm.calls()]


async def test_answers_usage_cost_requests_and_cache_keys_are_the_same_on_both_paths(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, direct_sent: list[str]) -> None:
    llm.setup({"rules": RULES})
    endpoint = Endpoint("openai/test-model", PARAMS, llm.url, KEY_ENV, Pricing(2.0, 8.0, 0.5, 2.5))
    embedder = Endpoint("openai/test-embedder", {}, llm.url, KEY_ENV,
                        Pricing(0.1, 0.0))
    prompts = [str(r["match"]) for r in RULES] + ["plain echo"]
    found: dict[str, Any] = {}
    for path in llm_support.PATHS:
        _on(path, monkeypatch)
        llm.reset()
        caller = _caller()
        chats = [_seen(await caller.chat(endpoint, [*MESSAGES[:1], {"role": "user",
                                                                    "content": p}]))
                 for p in prompts]
        embeds = _seen(await caller.embed(embedder, ["refund please", "where is my parcel"]))
        keys = (caller.chat_key(endpoint, MESSAGES), caller.embed_key(embedder, ["x"]))
        found[path] = (chats, embeds, keys, _requests(llm))
    for part, (one, other) in enumerate(zip(found["direct"], found["litellm"], strict=True)):
        assert one == other, (part, [(a, b) for a, b in zip(one, other, strict=True) if a != b][:1])
    chats, embeds, _, requests = found["direct"]
    assert chats[0][0][:3] == ("a b c", TokenUsage(1000, 200, 800, 0), 0.0024)  # priced from usage
    assert chats[3][0][2] is None  # no usage: cost unknown, never $0
    assert [c[2] for c in chats[4:7]] == ["empty", "empty", "empty"]
    assert chats[7][0][6] == [("call_", "lookup", '{"id": 7}')] and chats[8][0][7] == 1
    assert embeds[0][1].input == 6 and len(embeds[0][3]) == 2  # words
    assert len(requests) == len(prompts) + 1
    assert requests[0]["params"] == {k: v for k, v in PARAMS.items() if v is not None}
    assert len(direct_sent) == len(prompts) + 1


async def test_an_answer_cached_through_litellm_is_a_hit_on_the_direct_path(
        llm: FakeLLMServer, redis: Redis, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, direct_sent: list[str]) -> None:
    """Cache keys do not depend on the path: answers stored before the direct client existed
    are still answers (and the other way round)."""
    llm.setup({"rules": [{"match": "", "reply": "echo", "usage": {"prompt_tokens": 10,
                                                                   "completion_tokens": 2}}]})
    repo = write_repo(tmp_path, model_config(
        llm.url, gate="{pass_rate: {min: 0.5}}", target_extra=", pricing: {input: 2, output: 8}",
        assertions="      - {type: contains, value: echo}\n"),
        [{"id": f"e{i}", "input": f"question {i}"} for i in range(3)])
    spends = []
    for path in ("litellm", "direct", "litellm"):
        _on(path, monkeypatch)
        gate = await gate_trees(repo, None, evals=context(redis=redis, namespace="acme/bot"))
        assert gate.head is not None
        spends.append((gate.head.spend.provider_calls, gate.head.spend.cache_hits))
    assert spends == [(3, 0), (0, 3), (0, 3)]
    assert len(llm.calls()) == 3 and direct_sent == []  # the direct path only read the cache


def test_tokens_and_prices_of_a_direct_path_model_are_read_without_litellm() -> None:
    """OpenAI's count for ``cl100k_base``: 3 + per message (3 + role + content); prices from
    litellm's price file (in a fresh interpreter: this one may have imported litellm)."""
    code = ("import sys\nfrom worker.evals.llm import client, direct\n"
            f"print(client.count_tokens('openai/test-model', {MESSAGES!r}))\n"
            "print(direct.price_table_entry('openai/gpt-4o-mini')['input_cost_per_token'] > 0)\n"
            "print('litellm' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=True)
    assert found.stdout.split() == [str(3 + (3 + 1 + 2) + (3 + 1 + 2)), "True", "False"]
