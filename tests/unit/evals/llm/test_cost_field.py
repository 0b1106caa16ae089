"""Cost is never assumed to be $0 (field cases): unpriced models under a budget, answers
without usage, cache-write tokens. Calls go over real HTTP to the fake provider through litellm.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget, call_cost_usd, prices_for
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm_types import Endpoint, Pricing, TokenUsage
from worker.evals.types import Settings
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path

ROWS = [{"id": str(i), "input": f"ticket number {i}"} for i in range(6)]
CONTAINS = "      - {type: contains, value: ok}\n"
#: The line of the target in `model_config`'s configs.
TARGET_LINE = 6


async def test_an_unpriced_model_under_a_budget_refuses_to_start_on_the_target_line(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """Field case: openai/test-model has no price; under max_cost_usd its calls counted $0."""
    config = model_config(llm.url, settings="max_cost_usd: 1", gate="{pass_rate: {min: 0.5}}",
                          assertions=CONTAINS)
    assert parse_config(config).suites[0].target.line == TARGET_LINE
    gate = await gate_trees(write_repo(tmp_path, config, ROWS), None, evals=context())
    assert llm.calls() == []
    assert gate.conclusion == "failure" and gate.config_error is not None
    error = gate.config_error
    assert (error.path, error.line) == (".llmgate.yml", TARGET_LINE)
    assert error.message == (
        "the target: openai/test-model has no known price (not in litellm's price table), so "
        "its spending under max_cost_usd $1 cannot be bounded: give it `pricing: {input: ..., "
        "output: ...}` (USD per million tokens)")


async def test_an_unpriced_default_judge_is_refused_on_the_assertion_line(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    judge = endpoint_yaml(llm.url, "openai/judge-model")
    config = model_config(llm.url, settings=f"max_cost_usd: 1, judge: {judge}",
                          target_extra=", pricing: {input: 1, output: 2}",
                          assertions="      - {type: llm_judge, rubric: Is polite.}\n")
    gate = await gate_trees(write_repo(tmp_path, config, ROWS), None, evals=context())
    assert llm.calls() == [] and gate.config_error is not None
    assert gate.config_error.line == TARGET_LINE + 2  # the llm_judge assertion
    assert gate.config_error.message.startswith(
        "settings.judge (used by `llm_judge`): openai/judge-model has no known price")
    assert "give settings.judge `pricing:" in gate.config_error.message


async def test_an_unpriced_model_is_refused_under_a_budget_though_the_cache_answers_it(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path) -> None:
    """Issue 30: a cached answer never stands in for a call the run could not make, so the
    cache cannot change the verdict (before, this run passed from the cache and was refused
    without it)."""
    llm.setup({"default_reply": "ok"})
    repo = write_repo(tmp_path, model_config(llm.url, assertions=CONTAINS), ROWS)
    evals = context(redis=redis, namespace="acme/bot")
    assert (await gate_trees(repo, None, evals=evals)).conclusion == "success"
    write_repo(tmp_path, model_config(llm.url, settings="max_cost_usd: 1",
                                      assertions=CONTAINS), ROWS)
    for mode in ("use", "off"):  # every call cached, and no cache
        gate = await gate_trees(repo, None, evals=context(redis=redis, namespace="acme/bot",
                                                          cache_mode=mode))
        assert gate.config_error is not None and gate.config_error.line == TARGET_LINE
        assert gate.config_error.message.startswith(
            "the target: openai/test-model has no known price")
    assert len(llm.calls()) == 6  # the first run's


async def test_an_answer_without_usage_is_cost_unknown_and_charged_its_worst_case(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """Field case: answers without `usage` were priced $0, so the budget never stopped a run.

    gpt-4o-mini (litellm's table: $0.15 / $0.60 per M, at most 16384 completion tokens) on the
    fake: each answer is charged its worst case, about $0.0098, so under $0.015 two are sent.
    """
    llm.setup({"rules": [{"match": "", "reply": "ok", "usage": None}]})
    model = endpoint_yaml(llm.url, "openai/gpt-4o-mini", "prompt: prompts/p.txt")
    config = ("version: 1\nsettings: {max_cost_usd: 0.015, concurrency: 1}\nsuites:\n"
              f"  - name: s\n    dataset: evals/d.jsonl\n    target: {model}\n"
              f"    assertions:\n{CONTAINS}")
    gate = await gate_trees(write_repo(tmp_path, config, ROWS), None, evals=context())
    assert gate.head is not None and gate.head.estimate is not None
    assert gate.head.estimate.cost_usd is not None and gate.head.estimate.cost_usd < 0.015
    assert len(llm.calls()) == 2
    examples = gate.head.suites["s"].examples
    assert [e.error_kind for e in examples] == [None, None] + ["budget"] * 4
    assert [e.cost_usd for e in examples[:2]] == [None, None]  # unknown, not $0
    assert examples[0].usage == {}
    spend = gate.head.spend
    assert (spend.provider_calls, spend.unpriced_calls, spend.cost_usd) == (2, 2, 0.0)
    assert "budget exceeded: $0.0197 spent of max_cost_usd $0.0150" in gate.head.stopped  # type: ignore[operator]
    assert "2 calls of unknown cost not counted" in report.check_summary(gate)


async def test_cache_write_tokens_are_billed_at_their_own_rate(llm: FakeLLMServer,
                                                               tmp_path: Path) -> None:
    """Field case: 1000 prompt tokens (300 read from the provider's cache, 500 written to it)
    and 200 out at $3 / $0.30 read / $3.75 write / $15 per M: $0.005565, not $0.00519."""
    anthropic_style = {"prompt_tokens": 1000, "completion_tokens": 200, "cached_tokens": 300,
                       "cache_creation_input_tokens": 500}
    openai_style = {**anthropic_style, "cache_write_tokens": 500}
    del openai_style["cache_creation_input_tokens"]
    llm.setup({"rules": [{"match": "ticket number 0", "reply": "ok", "usage": anthropic_style},
                         {"match": "", "reply": "ok", "usage": openai_style}]})
    pricing = "pricing: {input: 3, cached_input: 0.3, cache_write: 3.75, output: 15}"
    config = model_config(llm.url, target_extra=f", {pricing}", assertions=CONTAINS)
    gate = await gate_trees(write_repo(tmp_path, config, ROWS[:2]), None, evals=context())
    assert gate.head is not None
    assert [e.cost_usd for e in gate.head.suites["s"].examples] == [0.005565, 0.005565]
    assert gate.head.spend.tokens == TokenUsage(2000, 400, 600, 1000)
    assert gate.head.spend.cost_usd == 0.01113


def test_litellms_bundled_prices_cover_cache_writes() -> None:
    prices = prices_for(Endpoint("anthropic/claude-haiku-4-5"))
    assert prices is not None and prices.cache_write > prices.input > prices.cached_input
    assert call_cost_usd(TokenUsage(1000, 200, 300, 500), prices) == 0.001855
    openai = prices_for(Endpoint("openai/gpt-4o-mini"))  # no cache-write rate: input's
    assert openai is not None and openai.cache_write == openai.input
    # Without a cache_write price, written tokens cost as much as input, never $0.
    plain = prices_for(Endpoint("openai/x", pricing=Pricing(3.0, 15.0, 0.3)))
    assert plain is not None
    assert call_cost_usd(TokenUsage(1000, 200, 300, 500), plain) == 0.00519


@pytest.mark.parametrize(("pricing", "message"), [
    ("{input: 1, output: 2, cache_write: -1}", "`pricing.cache_write` must be a non-negative"),
    ("{input: 1, output: 2, cache_read: 1}", "{input, output, cached_input?, cache_write?}"),
])
def test_pricing_options_are_checked(pricing: str, message: str) -> None:
    config = model_config("http://127.0.0.1:1/v1", target_extra=f", pricing: {pricing}")
    with pytest.raises(ConfigError, match=message.replace("{", r"\{").replace("?", r"\?")):
        parse_config(config)


async def test_a_call_to_an_unpriced_model_is_not_sent_under_a_budget(llm: FakeLLMServer) -> None:
    """The run refuses such a model before it starts; a call the estimate thought cached (the
    entry expired since) is still not sent."""
    settings = Settings(max_cost_usd=1.0)
    caller = ModelCaller(settings, ResponseCache(None, "acme/bot"), Budget(1.0, None), context())
    outcome = await caller.chat(Endpoint("openai/test-model", {}, llm.url, llm_support.KEY_ENV),
                                [{"role": "user", "content": "hi"}])
    assert (outcome.answer, outcome.error_kind) == (None, "budget")
    assert outcome.error == ("not sent: openai/test-model has no known price and max_cost_usd is "
                             "set (give the model `pricing: {input, output}`, USD per million "
                             "tokens)")
    assert llm.calls() == []
