"""Provider processes: calls, errors and embeddings cross the process boundary unchanged.

One real provider process (``python -m worker.evals.llm.pool``, litellm inside) serves the whole
module on one event loop; the fake provider answers over real HTTP. The test that kills the
process runs last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.fakes.fake_llm import FakeLLMServer, embed_text
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV, FakeSleep
from worker.evals.config.load import parse_config
from worker.evals.llm import client as llm_mod
from worker.evals.llm import pool as llm_pool
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.direct import DIRECT_ENV
from worker.evals.llm.pool import PROCESSES_ENV, ProviderPool, process_count
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm.retry import ProviderError
from worker.evals.llm_types import Endpoint, Pricing, RetrySettings, TokenUsage
from worker.evals.run.engine import run_config
from worker.evals.types import Settings

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

on_module_loop = pytest.mark.asyncio(loop_scope="module")  # the pool serves one loop
MESSAGES = [{"role": "user", "content": "ping number 1"}]


@pytest.mark.parametrize(("value", "cpus", "count"), [
    (None, 1, 0), (None, 2, 2), (None, 3, 3), (None, 5, 4), (None, 64, 4), ("auto", 3, 3),
    ("", 2, 2), (" AUTO ", 2, 2),
    ("0", 8, 0), ("3", 1, 3), ("16", 2, 16),
])
def test_process_count(value: str | None, cpus: int, count: int) -> None:
    environ = {} if value is None else {PROCESSES_ENV: value}
    assert process_count(environ, cpus) == count


@pytest.mark.parametrize("value", ["17", "-1", "two", "1.5"])
def test_process_count_refuses_other_values(value: str) -> None:
    with pytest.raises(ValueError, match=f"{PROCESSES_ENV} must be auto or a number of provider "
                                         f"processes 0-16, not '{value}'"):
        process_count({PROCESSES_ENV: value}, 2)


#: Set before the provider process starts: a provider key litellm reads itself, and a secret
#: of the worker's own that the provider process must never see.
PROVIDER_KEY = "sk-provider-env-key-1234"
WEBHOOK_SECRET = "whsec-worker-only-5678"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool() -> AsyncIterator[ProviderPool]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        env.setenv("GITHUB_WEBHOOK_SECRET", WEBHOOK_SECRET)
        started = llm_pool.ensure({PROCESSES_ENV: "1"})
        assert started is not None
        assert await started.wait_ready() == 1
    yield started
    started.close()
    llm_pool._pool = None


def test_the_environments_of_a_provider_process() -> None:
    environ = {"PATH": "/usr/bin", "HOME": "/home/w", "TMPDIR": "/tmp/x", "SHELL": "/bin/sh",
               "PYTHONPATH": "/srv/app", "OPENAI_API_KEY": "sk-a", "REDIS_URL": "redis://r",
               "GITHUB_APP_PRIVATE_KEY": "pem", "GITHUB_WEBHOOK_SECRET": "w",
               "LLMGATE_ENCRYPTION_KEYS": "k", "GITHUB_API_KEY": "gh-model-key"}
    assert llm_pool.start_environ(environ) == {
        "PATH": "/usr/bin", "HOME": "/home/w", "TMPDIR": "/tmp/x", "PYTHONPATH": "/srv/app"}
    assert llm_pool.provider_environ(environ) == {
        "PATH": "/usr/bin", "HOME": "/home/w", "TMPDIR": "/tmp/x", "SHELL": "/bin/sh",
        "PYTHONPATH": "/srv/app", "OPENAI_API_KEY": "sk-a", "GITHUB_API_KEY": "gh-model-key"}
    assert llm_pool.start_environ({"HOME": "hunter2-secret", "DB_PASSWORD": "hunter2-secret"}) \
        == {}


@on_module_loop
async def test_a_provider_process_gets_provider_keys_but_not_in_its_proc_environ(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    [child] = pool.live()
    initial = Path(f"/proc/{child.popen.pid}/environ").read_bytes()
    assert PROVIDER_KEY.encode() not in initial and WEBHOOK_SECRET.encode() not in initial
    llm.setup({"default_reply": "ok"})
    keyless = Endpoint("openai/test-model", {}, llm.url, None)  # litellm reads OPENAI_API_KEY
    assert (await llm_mod.chat(keyless, MESSAGES, 10)).text == "ok"
    assert [c["authorization"] for c in llm.calls("chat")] == [f"Bearer {PROVIDER_KEY}"]


@pytest.fixture(autouse=True)
def _through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Provider processes serve litellm's path only: the fake server's ``openai/test-model``
    would take the direct path (worker/evals/llm/direct.py) without ``LLMGATE_DIRECT_CLIENT=0``."""
    monkeypatch.setenv(DIRECT_ENV, "0")


def endpoint(server: FakeLLMServer, model: str = "openai/test-model") -> Endpoint:
    return Endpoint(model, {"temperature": 0}, server.url, KEY_ENV, Pricing(1.0, 2.0))


@on_module_loop
async def test_a_chat_call_is_sent_from_the_provider_process(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    llm.setup({"rules": [{"match": "ping", "reply": "pong", "usage": {
        "prompt_tokens": 12, "completion_tokens": 3, "cached_tokens": 2}}]})
    before = pool.sent
    reply = await llm_mod.chat(endpoint(llm), MESSAGES, 10)
    assert (reply.text, reply.usage) == ("pong", TokenUsage(12, 3, 2))
    assert 0 < reply.latency_ms < 10_000
    assert pool.sent == before + 1
    [call] = llm.calls("chat")
    assert (call["model"], call["messages"], call["params"]["temperature"]) == (
        "test-model", MESSAGES, 0)


@on_module_loop
async def test_a_call_on_the_direct_path_is_sent_from_the_run_process(
        pool: ProviderPool, llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct client's CPU per call is small: no process boundary to cross."""
    monkeypatch.setenv(DIRECT_ENV, "1")
    llm.setup({"default_reply": "here"})
    before = pool.sent
    assert (await llm_mod.chat(endpoint(llm), MESSAGES, 10)).text == "here"
    assert pool.sent == before and len(llm.calls("chat")) == 1


@on_module_loop
async def test_unusable_answers_and_missing_usage_cross_the_process_boundary_unchanged(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    llm.setup({"rules": [
        {"match": "filtered", "reply": None, "finish_reason": "content_filter"},
        {"match": "nousage", "reply": "fine", "usage": None},
        {"match": "written", "reply": "ok", "usage": {
            "prompt_tokens": 900, "completion_tokens": 4, "cache_creation_input_tokens": 600}}]})
    kwargs = llm_mod._call_kwargs(endpoint(llm), 10)
    before = pool.sent
    for text, expected in [
        ("filtered", ("", TokenUsage(1, 0, 0), "no usable text: the provider's content filter "
                      "withheld the answer (finish_reason content_filter)")),
        ("nousage", ("fine", None, "")), ("written", ("ok", TokenUsage(900, 4, 0, 600), ""))]:
        messages = [{"role": "user", "content": text}]
        remote = await llm_mod.chat(endpoint(llm), messages, 10)
        local = await llm_mod.send_chat(kwargs, messages)
        assert (remote.text, remote.usage, remote.problem) == expected
        assert (local.text, local.usage, local.problem) == expected
    assert pool.sent == before + 3


@on_module_loop
async def test_errors_cross_the_process_boundary_unchanged(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    key = "sk-fake-test-key"
    faults = [{"status": 429, "headers": {"Retry-After": "7"}},
              {"status": 401, "body": {"error": {"message": f"bad key {key}"}}},
              {"status": 503}]
    kwargs = llm_mod._call_kwargs(endpoint(llm), 10)
    for fault in faults:
        llm.setup({"faults": [fault, fault]})
        with pytest.raises(ProviderError) as remote:
            await llm_mod.chat(endpoint(llm), MESSAGES, 10)
        with pytest.raises(ProviderError) as local:
            await llm_mod.send_chat(kwargs, MESSAGES)
        got = [(e.kind, e.status, e.retryable, e.retry_after_s, e.message)
               for e in (remote.value, local.value)]
        assert got[0] == got[1]
    assert (remote.value.kind, remote.value.status, remote.value.retryable) == (
        "provider", 503, True)
    assert len(llm.calls("chat")) == 6


@on_module_loop
async def test_the_key_is_masked_in_an_error_from_the_provider_process(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"status": 401, "body": {"error": {
        "message": "Incorrect API key provided: sk-fake-test-key"}}}]})
    with pytest.raises(ProviderError) as raised:
        await llm_mod.chat(endpoint(llm), MESSAGES, 10)
    assert (raised.value.kind, raised.value.status, raised.value.retryable) == (
        "provider", 401, False)
    assert "sk-fake-test-key" not in raised.value.message
    assert "Incorrect API key provided: ***" in raised.value.message


@on_module_loop
async def test_embeddings_from_the_provider_process(pool: ProviderPool,
                                                    llm: FakeLLMServer) -> None:
    texts = ["refund in 5 days", "the refund takes five days"]
    before = pool.sent
    reply = await llm_mod.embed(endpoint(llm, "openai/test-embed"), texts, 10)
    assert reply.vectors == [embed_text(t) for t in texts]
    assert reply.usage == TokenUsage(9, 0, 0)
    assert pool.sent == before + 1


@on_module_loop
async def test_retries_budget_and_cost_stay_in_the_run_process(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    llm.setup({"default_reply": "fine thanks",
               "faults": [{"status": 500}, {"status": 429, "headers": {"Retry-After": "2"}}]})
    sleep = FakeSleep()
    settings = Settings(concurrency=2, retry=RetrySettings(max_retries=3, backoff_base_s=0.5,
                                                           max_backoff_s=5))
    ctx = llm_support.context(sleep)
    caller = ModelCaller(settings, ResponseCache(None, "t"), Budget(None, None), ctx)
    before = pool.sent
    outcome = await caller.chat(endpoint(llm), MESSAGES)
    assert outcome.answer is not None and outcome.answer.text == "fine thanks"
    assert outcome.spend.provider_calls == 3
    assert outcome.spend.tokens == TokenUsage(3, 2, 0)
    assert outcome.spend.cost_usd == pytest.approx((3 * 1.0 + 2 * 2.0) / 1e6, abs=1e-15)
    assert len(sleep.waits) == 2 and sleep.waits[1] >= 2.0  # Retry-After honoured
    assert pool.sent == before + 3


@on_module_loop
async def test_a_run_sends_its_calls_from_the_provider_process(
        pool: ProviderPool, llm: FakeLLMServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm_pool, "MIN_CALLS", 3)
    expected: list[int] = []
    expect = llm_pool.expect

    def recording_expect(calls: int) -> ProviderPool | None:
        expected.append(calls)
        return expect(calls)

    monkeypatch.setattr(llm_pool, "expect", recording_expect)
    rows = [{"id": f"e{i}", "input": f"order {i}"} for i in range(5)]
    config = llm_support.model_config(llm.url, assertions="      - {type: contains, "
                                      "value: order}\n")
    root = llm_support.write_repo(tmp_path, config, rows)
    before = pool.sent
    run = await run_config(parse_config(config), root, "", llm_support.context())
    suite = run.suites["s"]
    assert [e.output for e in suite.examples] == [
        f"echo: Customer says: order {i}" for i in range(5)]
    assert all(e.passed for e in suite.examples)
    assert run.spend.provider_calls == 5
    assert pool.sent == before + 5
    assert expected == [5]  # the run told the pool how many calls it expects


@on_module_loop
async def test_a_cancelled_call_frees_its_slot(pool: ProviderPool, llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"stall": True, "stall_s": 2}]})
    task = asyncio.create_task(llm_mod.chat(endpoint(llm), MESSAGES, 10))
    while not llm.calls("chat"):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [len(c.pending) for c in pool.live()] == [0]
    llm.setup({"default_reply": "still here"})
    assert (await llm_mod.chat(endpoint(llm), MESSAGES, 10)).text == "still here"


@on_module_loop
async def test_expect_starts_processes_only_for_large_runs(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(llm_pool, "_pool", None)
    assert llm_pool.expect(llm_pool.MIN_CALLS - 1, {PROCESSES_ENV: "2"}) is None
    assert llm_pool.expect(llm_pool.MIN_CALLS, {PROCESSES_ENV: "0"}) is None
    with caplog.at_level(logging.ERROR, logger="llmgate.llm_pool"):
        assert llm_pool.expect(llm_pool.MIN_CALLS, {PROCESSES_ENV: "many"}) is None
    assert llm_pool._pool is None
    # the errors only: the INFO lines of the first two calls are captured too when an earlier
    # test of the process set the logger's level lower (`llmgate -v` in-process)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        f"{PROCESSES_ENV} must be auto or a number of provider processes 0-16, not 'many': "
        "no provider processes started"]


@on_module_loop
async def test_a_provider_process_that_dies_fails_its_calls_then_calls_stay_here(
        pool: ProviderPool, llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"stall": True, "stall_s": 5}]})
    task = asyncio.create_task(llm_mod.chat(endpoint(llm), MESSAGES, 10))
    while not llm.calls("chat"):
        await asyncio.sleep(0.01)
    pool.children[0].popen.kill()
    with pytest.raises(ProviderError) as raised:
        await task
    assert (raised.value.kind, raised.value.retryable) == ("provider", True)
    assert raised.value.message == "the provider process exited (code -9) before answering"
    assert pool.live() == [] and llm_pool.active() is None
    sent = pool.sent
    llm.setup({"default_reply": "from the run's process"})
    reply = await llm_mod.chat(endpoint(llm), MESSAGES, 10)
    assert reply.text == "from the run's process" and pool.sent == sent


@on_module_loop
async def test_a_pool_whose_processes_all_exited_is_replaced(
        pool: ProviderPool, monkeypatch: pytest.MonkeyPatch) -> None:
    assert pool.spent()  # the previous test killed its only process
    monkeypatch.setattr(llm_pool, "ProviderPool", _NotStarted)
    fresh = llm_pool.ensure({PROCESSES_ENV: "1"})
    assert isinstance(fresh, _NotStarted) and fresh is not pool and fresh.count == 1
    assert pool.closed
    llm_pool._pool = pool  # the module fixture closes it


class _NotStarted(ProviderPool):
    """A pool that starts no process (the replacement is what is checked)."""

    def start(self) -> None:
        return None
