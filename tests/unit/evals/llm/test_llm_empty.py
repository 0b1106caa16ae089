"""Answers with no usable text: errored examples naming the cause, never cached (field cases).

Each reply comes from the fake OpenAI-compatible server over real HTTP through litellm; the
response cache is a real Redis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.evals.llm.cache import KEY_PREFIX
from worker.evals.llm.client import answer_problem
from worker.evals.llm.provider import _from_cache
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path

#: The field cases: the reply's fields at the fake, and the reason the example must give.
UNUSABLE = [
    ({"reply": ""}, "no usable text: an empty answer (finish_reason stop)"),
    ({"reply": "  \n "}, "no usable text: an empty answer (finish_reason stop)"),
    ({"reply": None}, "no usable text: null content (finish_reason stop)"),
    ({"reply": None, "finish_reason": "content_filter"},
     "no usable text: the provider's content filter withheld the answer "
     "(finish_reason content_filter)"),
    ({"reply": "I can help you with yo", "finish_reason": "content_filter"},
     "no usable text: the provider's content filter withheld the answer "
     "(finish_reason content_filter)"),
    ({"reply": "", "finish_reason": "length"},
     "no usable text: an empty answer, the token limit was reached before any text "
     "(finish_reason length: raise max_tokens)"),
    ({"reply": None, "finish_reason": "length"},
     "no usable text: null content, the token limit was reached before any text "
     "(finish_reason length: raise max_tokens)"),
]
ROWS = [{"id": "a", "input": "where is my refund"}, {"id": "b", "input": "cancel my plan"}]
PRICING = "pricing: {input: 1, output: 2}"


def answer_keys(keys: list[bytes]) -> list[bytes]:
    return [k for k in keys if k.startswith(KEY_PREFIX.encode())]


@pytest.mark.parametrize(("reply", "reason"), UNUSABLE)
async def test_a_target_answer_without_text_is_an_errored_example_and_not_cached(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path, reply: dict[str, Any],
        reason: str) -> None:
    llm.setup({"rules": [{"match": "refund", **reply}]})
    config = model_config(llm.url, gate="{pass_rate: {min: 0.5}}", target_extra=f", {PRICING}",
                          assertions="      - {type: contains, value: echo}\n")
    repo = write_repo(tmp_path, config, ROWS)
    # The second run sends the unusable call again (it was not cached); b's answer was.
    for run, (sent, total) in enumerate([(2, 2), (1, 3)]):
        gate = await gate_trees(repo, None, evals=context(redis=redis, namespace="acme/bot"))
        assert gate.head is not None
        first, second = gate.head.suites["s"].examples
        assert (first.errored, first.error, first.error_kind) == (True, reason, "empty")
        assert not first.unscored and not first.passed  # counted against the suite
        assert first.spend.provider_calls == 1  # sent (and billed), not answered
        assert second.passed and second.cached == (run == 1)
        assert gate.head.suites["s"].metrics["pass_rate"] == 0.5
        assert (gate.head.spend.provider_calls, len(llm.calls())) == (sent, total)
    assert len(answer_keys(await redis.keys("*"))) == 1


@pytest.mark.parametrize(("reply", "reason"), UNUSABLE)
async def test_a_judge_answer_without_text_is_a_judge_error_and_not_cached(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path, reply: dict[str, Any],
        reason: str) -> None:
    judge = endpoint_yaml(llm.url, "openai/judge-model", PRICING)
    llm.setup({"rules": [{"model": "judge-model", "match": "refund", **reply},
                         {"model": "judge-model", "match": "", "reply": "VERDICT: PASS"},
                         {"match": "", "reply": "We are on it."}]})
    config = model_config(llm.url, settings=f"judge: {judge}", gate="{pass_rate: {min: 0.5}}",
                          target_extra=f", {PRICING}",
                          assertions="      - {type: llm_judge, rubric: Is polite.}\n")
    repo = write_repo(tmp_path, config, ROWS)
    for judged in (1, 2):
        gate = await gate_trees(repo, None, evals=context(redis=redis, namespace="acme/bot"))
        assert gate.head is not None
        suite = gate.head.suites["s"]
        first, second = suite.examples
        [verdict] = first.assertions
        assert verdict.errored and not verdict.passed
        assert verdict.message == f"judge error: {reason}"
        assert first.unscored and not first.passed and second.passed
        assert suite.metrics["judge_error_rate"] == 0.5
        assert len([c for c in llm.calls() if c["model"] == "judge-model"
                    and "refund" in json.dumps(c["messages"])]) == judged
    # Two target answers and one judge answer are cached; the unusable judge answer is not.
    assert len(answer_keys(await redis.keys("*"))) == 3


def test_an_old_cached_answer_without_text_is_a_miss() -> None:
    entry = {"text": "", "usage": [10, 0, 0], "latency_ms": 5.0, "cost_usd": 0.0}
    assert _from_cache(entry) is None
    assert _from_cache({**entry, "text": "ok"}) is not None
    assert _from_cache({**entry, "vectors": [[0.1, 0.2]]}) is not None  # embeddings have no text


@pytest.mark.parametrize(("content", "finish_reason", "problem"), [
    ("Refunds take 5 days.", "stop", ""),
    ("Refunds take 5", "length", ""),  # cut at the limit, but text: usable
    ([{"type": "text", "text": "hi"}], "stop",
     "no usable text: content that is not text (finish_reason stop)"),
    (None, "tool_calls", "no usable text: null content (finish_reason tool_calls)"),
    ("", None, "no usable text: an empty answer (finish_reason none)"),
])
def test_what_counts_as_usable_text(content: Any, finish_reason: str | None,
                                    problem: str) -> None:
    assert answer_problem(content, finish_reason) == problem
