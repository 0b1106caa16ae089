"""The response cache in a real Redis: hits cost nothing, modes, repeats, namespaces."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, model_config, write_repo
from worker.evals.llm.cache import KEY_PREFIX, ResponseCache, cache_key
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path

ROWS = [{"id": f"e{i}", "input": f"question {i}"} for i in range(4)]
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 0}


def config(url: str, settings: str = "") -> str:
    return model_config(url, settings=settings, gate="{pass_rate: {min: 0.5}}",
                        target_extra=", pricing: {input: 2, output: 8}",
                        assertions="      - type: contains\n        value: echo\n")


def test_keys_depend_on_everything_that_decides_the_answer() -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "params": {},
            "version": "", "draw": 0}
    key = cache_key("acme/bot", "chat", base)
    assert key.startswith(KEY_PREFIX) and key == cache_key("acme/bot", "chat", dict(base))
    changed = [{**base, "model": "m2"}, {**base, "params": {"temperature": 1}},
               {**base, "version": "2"}, {**base, "draw": 1},
               {**base, "messages": [{"role": "user", "content": "hi!"}]}]
    keys = {cache_key("acme/bot", "chat", c) for c in changed}
    keys |= {cache_key("other/repo", "chat", base), cache_key("acme/bot", "judge", base)}
    assert key not in keys and len(keys) == 7


async def test_a_cached_rerun_makes_no_provider_call_and_costs_nothing(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path) -> None:
    llm.setup({"rules": [{"match": "", "reply": "echo", "usage": USAGE}]})
    repo = write_repo(tmp_path, config(llm.url), ROWS)
    first = await gate_trees(repo, None, evals=context(redis=redis, namespace="acme/bot"))
    assert len(llm.calls()) == 4
    assert first.head is not None and first.head.spend.provider_calls == 4
    second = await gate_trees(repo, None, evals=context(redis=redis, namespace="acme/bot"))
    assert len(llm.calls()) == 4  # nothing sent
    assert second.head is not None
    spend = second.head.spend
    assert (spend.provider_calls, spend.cache_hits, spend.cost_usd) == (0, 4, 0.0)
    assert second.head.estimate is not None and second.head.estimate.cached_calls == 4
    assert second.head.estimate.calls == 0
    cached = second.head.suites["s"].examples
    assert all(e.cached for e in cached)
    # The answer keeps its own cost and latency (for cost and latency metrics).
    assert [e.cost_usd for e in cached] == [e.cost_usd for e in first.head.suites["s"].examples]
    assert [e.output for e in cached] == [e.output for e in first.head.suites["s"].examples]
    assert "0 provider calls, 4 cache hits" in report.check_summary(second)


async def test_refresh_sends_again_and_no_cache_neither_reads_nor_writes(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path) -> None:
    repo = write_repo(tmp_path, config(llm.url), ROWS)
    await gate_trees(repo, None, evals=context(redis=redis, cache_mode="off"))
    assert len(llm.calls()) == 4 and await redis.keys(KEY_PREFIX + "*") == []
    await gate_trees(repo, None, evals=context(redis=redis, cache_mode="refresh"))
    assert len(llm.calls()) == 8 and len(await redis.keys(KEY_PREFIX + "*")) == 4
    await gate_trees(repo, None, evals=context(redis=redis, cache_mode="refresh"))
    assert len(llm.calls()) == 12
    await gate_trees(repo, None, evals=context(redis=redis))
    assert len(llm.calls()) == 12


async def test_the_config_switch_turns_the_cache_off(llm: FakeLLMServer, redis: Redis,
                                                     tmp_path: Path) -> None:
    repo = write_repo(tmp_path, config(llm.url, "cache: false"), ROWS)
    for _ in range(2):
        await gate_trees(repo, None, evals=context(redis=redis))
    assert len(llm.calls()) == 8


async def test_repeats_are_independent_draws_that_bypass_the_cache(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path) -> None:
    repo = write_repo(tmp_path, config(llm.url, "repeats: 3"), ROWS[:2])
    gate = await gate_trees(repo, None, evals=context(redis=redis))
    await gate_trees(repo, None, evals=context(redis=redis))
    assert len(llm.calls()) == 12 and await redis.keys(KEY_PREFIX + "*") == []
    examples = gate.head.suites["s"].examples  # type: ignore[union-attr]
    assert [(e.id, e.repeat) for e in examples] == [
        ("e0", 0), ("e0", 1), ("e0", 2), ("e1", 0), ("e1", 1), ("e1", 2)]


async def test_errors_are_not_cached_and_repositories_do_not_share(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path) -> None:
    llm.setup({"faults": [{"status": 400, "match": "question 0"}]})
    repo = write_repo(tmp_path, config(llm.url), ROWS)
    gate = await gate_trees(repo, None, evals=context(redis=redis, namespace="a/one"))
    assert gate.head.suites["s"].examples[0].errored  # type: ignore[union-attr]
    assert len(await redis.keys(KEY_PREFIX + "*")) == 3
    await gate_trees(repo, None, evals=context(redis=redis, namespace="a/one"))
    assert len(llm.calls()) == 5  # only the failed call is sent again
    await gate_trees(repo, None, evals=context(redis=redis, namespace="b/two"))
    assert len(llm.calls()) == 9


async def test_a_cached_answer_never_stands_in_for_a_call_that_cannot_be_sent(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: the key variable (and the ``api_base``, and the price under a budget) is
    checked before the cache is asked, so the cache never changes what a run can do."""
    repo = write_repo(tmp_path, config(llm.url), ROWS)
    assert (await gate_trees(repo, None, evals=context(redis=redis))).conclusion == "success"
    monkeypatch.delenv(llm_support.KEY_ENV)
    gate = await gate_trees(repo, None, evals=context(redis=redis))
    assert gate.head is not None and gate.head.spend.cache_hits == 0
    examples = gate.head.suites["s"].examples
    assert {(e.errored, e.error_field) for e in examples} == {(True, "api_key_env")}
    assert all("the worker has no FAKE_LLM_KEY" in (e.error or "") for e in examples)
    assert len(llm.calls()) == 4  # the first run's
    monkeypatch.setenv(llm_support.KEY_ENV, "sk-fake-test-key")
    again = await gate_trees(repo, None, evals=context(redis=redis))
    assert again.head is not None and again.head.spend.cache_hits == 4  # kept all along


async def test_a_broken_redis_is_a_miss_not_a_failure(llm: FakeLLMServer,
                                                      tmp_path: Path) -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    cache = ResponseCache(dead, "x")
    assert await cache.get("k") is None
    await cache.put("k", {"text": "t"})
    assert await cache.cached(["k"]) == [False]
    repo = write_repo(tmp_path, config(llm.url), ROWS[:1])
    gate = await asyncio.wait_for(gate_trees(repo, None, evals=context(redis=dead)), 60)
    assert gate.conclusion == "success"
    await dead.aclose()
