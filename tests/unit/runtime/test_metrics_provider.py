"""Provider calls, cache hits and USD reach the worker's metrics as the engine makes them.

A real gate run (pipeline.gate_trees) against the fake OpenAI-compatible server on 127.0.0.1 and
a real Redis response cache, with `worker.runtime.metrics.record_call` as the run context's
observer, exactly as worker/jobs/pull_request.py wires it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, model_config, write_repo
from worker.evals.context import CallEvent
from worker.pipeline.trees import gate_trees
from worker.runtime import metrics as worker_metrics
from worker.runtime.metrics import COST_USD, PROVIDER_CACHE_HITS, PROVIDER_CALLS, WorkerMetrics

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

ROWS = [{"id": f"e{i}", "input": f"question {i}"} for i in range(3)]
#: Every answer: 100 tokens in, 10 out; at $2 / $8 per million that is $0.00028 a call.
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 0}
CALL_USD = (100 * 2 + 10 * 8) / 1_000_000


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> WorkerMetrics:
    """A fresh in-memory `WorkerMetrics` in place of the process's one."""
    fresh = WorkerMetrics("test")
    monkeypatch.setattr(worker_metrics, "METRICS", fresh)
    return fresh


def sample(metrics: WorkerMetrics, name: str, kind: str, provider: str) -> float:
    """The in-memory increment of one counter sample (0.0 when never touched)."""
    field = worker_metrics._field(name + "_total", {"kind": kind, "provider": provider})
    return metrics._increments.get(field, 0.0)


def judged_config(url: str) -> str:
    judge = llm_support.endpoint_yaml(url, "openai/judge-model",
                                      "pricing: {input: 2, output: 8}")
    return model_config(url, settings=f"judge: {judge}", gate="{pass_rate: {min: 0.0}}",
                        assertions="      - type: llm_judge\n        rubric: Is it polite?\n",
                        target_extra=", pricing: {input: 2, output: 8}")


async def test_live_calls_then_a_cached_rerun_count_calls_hits_and_exact_usd(
        llm: FakeLLMServer, redis: Redis, tmp_path: Path, counted: WorkerMetrics) -> None:
    llm.setup({"rules": [{"match": "", "reply": "VERDICT: PASS",
                          "usage": USAGE}]})
    repo = write_repo(tmp_path, judged_config(llm.url), ROWS)
    evals = context(redis=redis, namespace="acme/bot", on_call=worker_metrics.record_call)
    first = await gate_trees(repo, None, evals=evals)
    sent = len(llm.calls())
    assert first.head is not None and sent == 2 * len(ROWS)  # a target and a judge call each
    for kind in ("model", "judge"):
        assert sample(counted, PROVIDER_CALLS.name, kind, "openai") == len(ROWS)
        assert sample(counted, PROVIDER_CACHE_HITS.name, kind, "openai") == 0
        assert sample(counted, COST_USD.name, kind, "openai") == pytest.approx(
            len(ROWS) * CALL_USD, abs=1e-12)
    second = await gate_trees(repo, None, evals=context(
        redis=redis, namespace="acme/bot", on_call=worker_metrics.record_call))
    assert len(llm.calls()) == sent and second.head is not None  # all from the cache
    total_calls = sum(sample(counted, PROVIDER_CALLS.name, k, "openai") for k in ("model", "judge"))
    total_hits = sum(sample(counted, PROVIDER_CACHE_HITS.name, k, "openai")
                     for k in ("model", "judge"))
    total_usd = sum(sample(counted, COST_USD.name, k, "openai") for k in ("model", "judge"))
    assert (total_calls, total_hits) == (sent, sent)
    assert total_usd == pytest.approx(sent * CALL_USD, abs=1e-12)  # hits spent nothing
    assert total_usd == pytest.approx(first.head.spend.cost_usd, abs=1e-12)


async def test_retries_count_every_request_and_failures_cost_nothing(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"rules": [{"match": "", "reply": "echo", "usage": USAGE}],
               "faults": [{"status": 500, "body": {"error": {"message": "down"}}, "times": 2}]})
    repo = write_repo(tmp_path, model_config(
        llm.url, settings="concurrency: 1", target_extra=", pricing: {input: 2, output: 8}"),
        ROWS[:1])
    events: list[CallEvent] = []
    await gate_trees(repo, None, evals=context(on_call=events.append))
    assert len(llm.calls()) == 3
    assert [(e.kind, e.model, e.sent, e.cache_hits) for e in events] == [
        ("model", "openai/test-model", 3, 0)]
    assert events[0].cost_usd == pytest.approx(CALL_USD, abs=1e-12)


async def test_command_targets_count_one_call_per_example_and_the_cli_counts_nothing(
        tmp_path: Path, counted: WorkerMetrics) -> None:
    config = ("version: 1\nsuites:\n  - name: s\n    dataset: evals/d.jsonl\n"
              "    target: {command: \"cp {input_file} {output_file}\"}\n")
    repo = write_repo(tmp_path, config, ROWS)
    events: list[CallEvent] = []
    await gate_trees(repo, None, evals=context(on_call=events.append))
    assert [(e.kind, e.model, e.sent, e.cache_hits, e.cost_usd) for e in events] == [
        ("command", "", 1, 0, 0.0)] * len(ROWS)
    await gate_trees(repo, None, evals=context())  # the default observer: the CLI's
    assert dict(counted._increments) == {}
