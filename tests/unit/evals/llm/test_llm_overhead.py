"""litellm's own pricing and success logging are skipped; llmgate's prices stay right."""

from __future__ import annotations

from decimal import Decimal

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV
from worker.evals.llm import client as llm_mod
from worker.evals.llm import direct
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm_types import Endpoint, TokenUsage
from worker.evals.types import Settings

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def test_the_bookkeeping_methods_are_replaced() -> None:
    llm_mod.litellm_module()
    from litellm.litellm_core_utils.litellm_logging import Logging

    assert Logging.response_cost_calculator is llm_mod._no_response_cost
    assert Logging.async_success_handler is llm_mod._no_success_log
    assert llm_mod.skip_unused_bookkeeping() == ["response_cost_calculator",
                                                 "async_success_handler"]


async def test_litellm_no_longer_prices_answers_but_llmgate_does(llm: FakeLLMServer) -> None:
    llm.setup({"rules": [{"match": "hello", "reply": "hi there", "usage": {
        "prompt_tokens": 1200, "completion_tokens": 300, "cached_tokens": 200}}]})
    litellm = llm_mod.litellm_module()
    response = await litellm.acompletion(
        model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hello"}],
        api_base=llm.url, api_key="sk-test", num_retries=0, max_retries=0)
    assert response._hidden_params["response_cost"] is None  # litellm did not price it

    caller = ModelCaller(Settings(), ResponseCache(None, "t"), Budget(None, None),
                         llm_support.context())
    endpoint = Endpoint("openai/gpt-4o-mini", {}, llm.url, KEY_ENV)
    outcome = await caller.chat(endpoint, [{"role": "user", "content": "hello"}])
    assert outcome.answer is not None and outcome.answer.usage == TokenUsage(1200, 300, 200)
    entry = direct.price_table_entry("openai/gpt-4o-mini")
    assert entry is not None
    price_in, price_out, price_cached = (Decimal(repr(float(entry[k]))) for k in (
        "input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost"))
    expected = 1000 * price_in + 200 * price_cached + 300 * price_out
    assert outcome.answer.cost_usd == float(expected)
    assert outcome.spend.cost_usd == float(expected)
