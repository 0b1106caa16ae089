"""Cost of calls (cached prompt tokens), litellm's price table, estimates and budgets."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, model_config, write_repo
from worker.evals.llm.cost import (
    Budget,
    BudgetExceeded,
    TokenPrices,
    call_cost_usd,
    prices_for,
    prices_from_pricing,
)
from worker.evals.llm_types import Endpoint, Pricing, TokenUsage
from worker.pipeline.trees import gate_trees
from worker.report import render as report

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path

FIELD_PRICING = "pricing: {input: 2, cached_input: 0.5, output: 8}"
FIELD_USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "cached_tokens": 800}


def test_cached_prompt_tokens_are_billed_at_the_cached_rate() -> None:
    """Field case: 1000 prompt tokens (800 cached), 200 out at $2/$0.50/$8 per M: $0.0024."""
    prices = prices_from_pricing(Pricing(2.0, 8.0, 0.5))
    assert call_cost_usd(TokenUsage(1000, 200, 800), prices) == 0.0024
    assert call_cost_usd(TokenUsage(1000, 200, 0), prices) == 0.0036
    no_cache_price = prices_from_pricing(Pricing(2.0, 8.0))
    assert call_cost_usd(TokenUsage(1000, 200, 800), no_cache_price) == 0.0036
    # More cached tokens than prompt tokens (a malformed usage) never makes a negative cost.
    assert call_cost_usd(TokenUsage(10, 0, 50), prices) == pytest.approx(10 * 0.5e-6)


def test_prices_come_from_litellms_bundled_table() -> None:
    prices = prices_for(Endpoint("openai/gpt-4o-mini"))
    assert prices is not None
    assert prices.input > 0 and prices.output > prices.input
    assert prices.cached_input < prices.input  # the table knows OpenAI's cached-input rate
    assert prices_for(Endpoint("openai/no-such-model-anywhere")) is None
    assert prices_for(Endpoint("openai/x", pricing=Pricing(1.0, 2.0))) == TokenPrices(
        Decimal("0.000001"), Decimal("0.000002"), Decimal("0.000001"), Decimal("0.000001"))


def test_budget_stops_at_the_cost_or_the_time_limit() -> None:
    now = [100.0]
    budget = Budget(0.01, 60, clock=lambda: now[0])
    budget.charge(0.006)
    budget.check()
    budget.charge(0.004)
    with pytest.raises(BudgetExceeded, match=r"\$0\.0100 spent of max_cost_usd \$0\.0100"):
        budget.check()
    timed = Budget(None, 60, clock=lambda: now[0])
    now[0] += 61
    with pytest.raises(BudgetExceeded, match="max_duration 60 s"):
        timed.check()


async def test_the_same_cost_in_the_comment_the_check_and_the_stored_run(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": [{"match": "", "reply": "billing", "usage": FIELD_USAGE}]})
    config = model_config(llm.url, target_extra=f", {FIELD_PRICING}",
                          gate="{pass_rate: {min: 0.5}}",
                          assertions="      - type: contains\n        value: billing\n")
    repo = write_repo(tmp_path, config, [{"id": "a", "input": "refund"}])
    gate = await gate_trees(repo, None, evals=context())
    assert gate.head is not None
    assert gate.head.spend.cost_usd == 0.0024
    assert gate.head.suites["s"].examples[0].cost_usd == 0.0024
    assert gate.head.suites["s"].metrics["cost_total"] == 0.0024
    stored = json.loads(report.render_json(gate))
    assert stored["usage"]["head"]["spend"]["cost_usd"] == 0.0024
    assert stored["usage"]["head"]["spend"]["tokens"] == {"input": 1000, "output": 200,
                                                          "cached_input": 800, "cache_write": 0}
    for text in (report.check_summary(gate), report.comment_body(gate, head_sha="",
                                                                  base_sha=None)):
        assert "\\$0.0024 spent" in text  # markdown-escaped "$0.0024"
        assert "0.0040" not in text


async def test_a_run_estimated_above_the_budget_does_not_start(llm: FakeLLMServer,
                                                               tmp_path: Path) -> None:
    config = model_config(llm.url, settings="max_cost_usd: 0.001",
                          target_extra=", params: {max_tokens: 500}, " + FIELD_PRICING,
                          gate="{pass_rate: {min: 0.5}}")
    rows = [{"id": str(i), "input": "word " * 50} for i in range(5)]
    said: list[str] = []
    gate = await gate_trees(write_repo(tmp_path, config, rows), None,
                            evals=context(say=said.append))
    assert llm.calls() == []
    assert gate.conclusion == "action_required"  # over budget blocks (issue 12), never neutral
    assert gate.headline.startswith("over budget: not started: the estimate $")
    assert gate.head is not None and gate.head.estimate is not None
    assert gate.head.estimate.calls == 5 and gate.head.estimate.tokens_out == 2500
    assert gate.head.estimate.cost_usd is not None and gate.head.estimate.cost_usd > 0.02
    assert "not started" in report.check_title(gate) and "exceeds max_cost_usd" in gate.headline
    assert said and said[0].startswith("estimate in the working tree: 5 provider calls")


async def test_the_budget_stops_new_calls_and_names_how_far_it_got(llm: FakeLLMServer,
                                                                   tmp_path: Path) -> None:
    llm.setup({"rules": [{"match": "", "reply": "ok", "usage": FIELD_USAGE}]})
    config = model_config(llm.url, settings="max_cost_usd: 0.005, concurrency: 1",
                          target_extra=", params: {max_tokens: 1}, " + FIELD_PRICING,
                          gate="{pass_rate: {min: 0.5}}")
    rows = [{"id": str(i), "input": "hi"} for i in range(6)]
    gate = await gate_trees(write_repo(tmp_path, config, rows), None, evals=context())
    assert len(llm.calls()) == 3  # $0.0024 each: the third reaches $0.0072 >= $0.005
    examples = gate.head.suites["s"].examples  # type: ignore[union-attr]
    assert [e.error_kind for e in examples] == [None, None, None, "budget", "budget", "budget"]
    assert all(e.unscored for e in examples[3:])
    assert gate.conclusion == "action_required"  # over budget blocks (issue 12), never neutral
    assert gate.headline.startswith("over budget: budget exceeded")
    assert "budget exceeded" in gate.headline and "3 of 6 examples ran" in gate.headline
    assert "budget exceeded" in report.check_title(gate)
