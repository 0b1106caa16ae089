"""Worker metrics published through a real Redis and rendered by the web side's reader."""

from __future__ import annotations

from typing import Any

import pytest
from arq.connections import ArqRedis
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import ConnectionPool, Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from app import metrics as web_metrics
from tests.conftest import free_port
from worker.evals.context import CallEvent
from worker.evals.types import ExampleResult, GateReport, RunResult, SuiteResult
from worker.runtime import metrics as worker_metrics
from worker.runtime.metrics import (
    GITHUB_CALLS,
    JOB_DURATION,
    JOBS,
    WorkerMetrics,
)


def parse(text: bytes) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


async def snapshot(redis_url: str, now_s: float | None = None) -> web_metrics.Snapshot:
    queue = ArqRedis(ConnectionPool.from_url(redis_url))
    try:
        return await web_metrics.read_snapshot(queue, now_s)
    finally:
        await queue.aclose(close_connection_pool=True)


def test_the_web_reads_the_keys_the_workers_write():
    assert (web_metrics.SAMPLES_KEY, web_metrics.META_KEY, web_metrics.WORKERS_KEY) == (
        worker_metrics.SAMPLES_KEY, worker_metrics.META_KEY, worker_metrics.WORKERS_KEY)


async def test_counters_from_two_workers_add_up_and_histograms_are_cumulative(redis, redis_url):
    one, two = WorkerMetrics("w1"), WorkerMetrics("w2")
    one.inc(JOBS, "gate_pull_request", "completed")
    two.inc(JOBS, "gate_pull_request", "completed", amount=2)
    one.observe(JOB_DURATION, "gate_pull_request", value=4.0)
    two.observe(JOB_DURATION, "gate_pull_request", value=100.0)
    await one.flush(redis, now_s=1000.0)
    await two.flush(redis, now_s=1000.0)
    samples = parse(web_metrics.render(await snapshot(redis_url, now_s=1001.0)))
    job = (("function", "gate_pull_request"),)
    assert samples[("llmgate_jobs_total", (*job, ("outcome", "completed")))] == 3
    bucket = "llmgate_job_duration_seconds_bucket"
    assert samples[(bucket, (("function", "gate_pull_request"), ("le", "1.0")))] == 0
    assert samples[(bucket, (("function", "gate_pull_request"), ("le", "5.0")))] == 1
    assert samples[(bucket, (("function", "gate_pull_request"), ("le", "120.0")))] == 2
    assert samples[(bucket, (("function", "gate_pull_request"), ("le", "+Inf")))] == 2
    assert samples[("llmgate_job_duration_seconds_sum", job)] == 104.0
    assert samples[("llmgate_job_duration_seconds_count", job)] == 2
    assert samples[("llmgate_workers", ())] == 2


async def test_a_flush_clears_what_it_sent(redis, redis_url):
    metrics = WorkerMetrics("w1")
    metrics.inc(JOBS, "f", "completed")
    await metrics.flush(redis)
    await metrics.flush(redis)  # nothing new: nothing added twice
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    assert samples[("llmgate_jobs_total", (("function", "f"), ("outcome", "completed")))] == 1


async def test_a_failed_flush_keeps_its_counts_for_the_next(redis, redis_url):
    metrics = WorkerMetrics("w1")
    metrics.inc(GITHUB_CALLS, "GET", "200", amount=5)
    metrics.set(worker_metrics.GITHUB_RATE_REMAINING, "7", "core", value=4990)
    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises((RedisConnectionError, OSError)):
        await metrics.flush(down)
    await down.aclose()
    metrics.inc(GITHUB_CALLS, "GET", "200")
    await metrics.flush(redis)
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    assert samples[("llmgate_github_api_calls_total", (("method", "GET"), ("status", "200")))] == 6
    assert samples[("llmgate_github_rate_limit_remaining",
                    (("installation", "7"), ("resource", "core")))] == 4990


async def test_gauges_keep_the_last_value_written(redis, redis_url):
    one, two = WorkerMetrics("w1"), WorkerMetrics("w2")
    one.set(worker_metrics.GITHUB_RATE_REMAINING, "7", "core", value=4000)
    await one.flush(redis)
    two.set(worker_metrics.GITHUB_RATE_REMAINING, "7", "core", value=3999)
    await two.flush(redis)
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    assert samples[("llmgate_github_rate_limit_remaining",
                    (("installation", "7"), ("resource", "core")))] == 3999


async def test_running_and_queued_count_only_live_workers(redis, redis_url):
    live, dead = WorkerMetrics("live"), WorkerMetrics("dead")
    live.running, dead.running = 1, 3
    await live.flush(redis, now_s=1000.0)
    await dead.flush(redis, now_s=1000.0 - web_metrics.WORKER_STALE_S - 1)
    await redis.zadd("arq:queue", {"a": 1, "b": 2, "c": 3})  # one of them is the running job
    snap = await snapshot(redis_url, now_s=1000.0)
    assert (snap.workers, snap.running, snap.queued) == (1, 1, 2)
    await live.forget(redis)
    assert (await snapshot(redis_url, now_s=1000.0)).workers == 0
    assert await redis.hexists(web_metrics.WORKERS_KEY, "dead")  # gone 31 s: kept for now
    await snapshot(redis_url, now_s=1000.0 + web_metrics.WORKER_FORGET_S)
    assert not await redis.hexists(web_metrics.WORKERS_KEY, "dead")  # gone a day: deleted


async def test_malformed_entries_are_skipped_not_fatal(redis, redis_url):
    await redis.hset(web_metrics.SAMPLES_KEY, mapping={"not json": "1", '["x", {}]': "nan?",
                                                       '["llmgate_ok", {}]': "2"})
    await redis.hset(web_metrics.META_KEY, mapping={
        "llmgate_ok": '{"type": "gauge", "help": "ok"}', "bad name!": '{"type": "gauge"}',
        "llmgate_weird": '{"type": "summary", "help": "unsupported"}', "llmgate_x": "{"})
    await redis.hset(web_metrics.WORKERS_KEY, mapping={"w": "garbage"})
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    assert samples[("llmgate_ok", ())] == 2
    assert not any(name.startswith(("llmgate_weird", "llmgate_x")) for name, _ in samples)


async def test_redis_down_renders_the_web_metrics_with_redis_up_zero():
    snap = await snapshot(f"redis://127.0.0.1:{free_port()}/0")
    samples = parse(web_metrics.render(snap))
    assert samples[("llmgate_redis_up", ())] == 0
    assert ("llmgate_jobs_queued", ()) in samples


def test_counters_refuse_negative_amounts_and_wrong_labels():
    metrics = WorkerMetrics("w")
    with pytest.raises(ValueError, match="only goes up"):
        metrics.inc(JOBS, "f", "completed", amount=-1)
    with pytest.raises(ValueError, match="takes labels"):
        metrics.inc(JOBS, "f")


def _fresh(monkeypatch: pytest.MonkeyPatch) -> WorkerMetrics:
    fresh = WorkerMetrics("test")
    monkeypatch.setattr(worker_metrics, "METRICS", fresh)
    return fresh


async def test_github_answers_are_counted_with_their_rate_limit(monkeypatch, redis, redis_url):
    fresh = _fresh(monkeypatch)
    worker_metrics.record_github_response("get", 200, {"x-ratelimit-remaining": "4999",
                                                       "x-ratelimit-resource": "core"}, "7")
    worker_metrics.record_github_response("POST", None, {}, "7")
    worker_metrics.record_github_response("GET", 502, {"x-ratelimit-remaining": "many"}, "7")
    await fresh.flush(redis)
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    calls = "llmgate_github_api_calls_total"
    assert samples[(calls, (("method", "GET"), ("status", "200")))] == 1
    assert samples[(calls, (("method", "POST"), ("status", "error")))] == 1
    assert samples[(calls, (("method", "GET"), ("status", "502")))] == 1
    assert samples[("llmgate_github_rate_limit_remaining",
                    (("installation", "7"), ("resource", "core")))] == 4999


def _example(cost_usd: float | None) -> ExampleResult:
    return ExampleResult(id="e", line=1, passed=True, errored=False, output="x", expected="x",
                         cost_usd=cost_usd)


def _run(*costs: float | None) -> RunResult:
    examples = tuple(_example(c) for c in costs)
    return RunResult("a" * 40, {"s": SuiteResult("s", "evals/s.jsonl", examples, {})})


async def test_a_gate_report_counts_its_conclusion_and_calls_count_as_they_happen(
        monkeypatch, redis, redis_url):
    fresh = _fresh(monkeypatch)
    report: Any = GateReport(conclusion="success", outcomes=(), regressions=(),
                             head=_run(0.25, None, 0.5), base=_run(0.125))
    worker_metrics.record_gate_report(report)
    await fresh.flush(redis)
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    assert samples[("llmgate_gate_conclusions_total", (("conclusion", "success"),))] == 1
    assert not any(name.startswith("llmgate_provider") for name, _ in samples)  # not from here
    for cost_usd in (0.25, 0.0, 0.5, 0.125):
        worker_metrics.record_call(CallEvent("command", "", 1, 0, cost_usd))
    worker_metrics.record_call(CallEvent("judge", "anthropic/claude-x", 3, 0, 0.002))
    worker_metrics.record_call(CallEvent("judge", "Anthropic/claude-y", 0, 1, 0.0))
    await fresh.flush(redis)
    samples = parse(web_metrics.render(await snapshot(redis_url)))
    command = (("kind", "command"), ("provider", "none"))
    assert samples[("llmgate_provider_calls_total", command)] == 4
    assert samples[("llmgate_provider_cache_hits_total", command)] == 0
    assert samples[("llmgate_cost_usd_total", command)] == 0.875
    judge = (("kind", "judge"), ("provider", "anthropic"))
    assert samples[("llmgate_provider_calls_total", judge)] == 3  # each retry was a request
    assert samples[("llmgate_provider_cache_hits_total", judge)] == 1
    assert samples[("llmgate_cost_usd_total", judge)] == 0.002


@pytest.mark.parametrize(("model", "label"), [
    ("openai/gpt-4o-mini", "openai"), ("gpt-4o-mini", "default"), ("", "none"),
    ("evil-123/x", "other"), ("VERTEX_AI/gemini-pro", "vertex_ai"), ("/x", "other"),
    ("local/minilm", "local")])
def test_the_provider_label_is_bounded(model: str, label: str) -> None:
    assert worker_metrics.provider_label(model) == label
