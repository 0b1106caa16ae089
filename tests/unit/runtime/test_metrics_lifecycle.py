"""Instrumented jobs, publishing, the heartbeat health check and the shutdown grace setting."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from arq.worker import Retry
from redis.asyncio import Redis

from tests.conftest import free_port
from worker.cli import healthcheck
from worker.runtime import lifecycle
from worker.runtime import metrics as worker_metrics
from worker.runtime.lifecycle import observed, shutdown_grace_s, start_publishing, stop_publishing
from worker.runtime.logs import JsonFormatter, configure_worker_logging, log_format
from worker.runtime.metrics import WORKERS_KEY, WorkerMetrics
from worker.runtime.redis_checks import patient_redis
from worker.runtime.settings import SettingsError

PAYLOAD = {"delivery_id": "d-1", "installation_id": 1, "pr_number": 7,
           "repo": {"owner": "acme", "name": "tiny", "clone_url": "file:///x"}}


@pytest.fixture()
def fresh(monkeypatch: pytest.MonkeyPatch) -> WorkerMetrics:
    metrics = WorkerMetrics("test-worker")
    monkeypatch.setattr(worker_metrics, "METRICS", metrics)
    monkeypatch.setattr(lifecycle, "METRICS", metrics)
    return metrics


async def jobs_total(redis: Redis) -> dict[str, float]:
    raw = await redis.hgetall(worker_metrics.SAMPLES_KEY)
    out = {}
    for field, value in raw.items():
        name, labels = json.loads(field)
        if name == "llmgate_jobs_total":
            out[labels["outcome"]] = float(value)
    return out


async def test_each_outcome_is_counted_and_the_job_is_seen_running(fresh, redis):
    seen: list[dict] = []

    async def gate_pull_request(ctx, payload):
        seen.append(json.loads((await redis.hget(WORKERS_KEY, "test-worker")).decode()))
        return {"conclusion": "success"}

    async def fails(ctx, payload):
        raise ValueError("boom")

    async def retries(ctx, payload):
        raise Retry(defer=1)

    async def hangs(ctx, payload):
        await asyncio.sleep(60)

    ctx = {"redis": redis, "job_id": "gate:acme/tiny#7@x"}
    wrapped = observed(gate_pull_request)
    assert wrapped.__name__ == "gate_pull_request"  # arq registers jobs by name
    assert await wrapped(ctx, PAYLOAD) == {"conclusion": "success"}
    assert seen[0]["running"] == 1 and fresh.running == 0
    with pytest.raises(ValueError):
        await observed(fails)(ctx, PAYLOAD)
    with pytest.raises(Retry):
        await observed(retries)(ctx, PAYLOAD)
    task = asyncio.create_task(observed(hangs)(ctx, PAYLOAD))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await jobs_total(redis) == {"completed": 1, "failed": 1, "retried": 1, "cancelled": 1}
    assert fresh.running == 0


async def test_a_redis_outage_never_fails_the_job(fresh):
    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")

    async def job(ctx, payload):
        return "done"

    assert await observed(job)({"redis": down}, PAYLOAD) == "done"
    assert any("llmgate_jobs_total" in key for key in fresh._increments)  # kept for later
    await down.aclose()


async def test_log_lines_inside_a_job_carry_its_identifiers(fresh, redis):
    lines: list[str] = []

    class Keep(logging.Handler):  # formats as it emits, like a StreamHandler
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    logger = logging.getLogger("llmgate.test.job")
    keep = Keep()
    keep.setFormatter(JsonFormatter())
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)

    async def job(ctx, payload):
        logger.info("working on it")

    await observed(job)({"redis": redis, "job_id": "gate:acme/tiny#7@x"}, PAYLOAD)
    logger.info("outside any job")
    logger.removeHandler(keep)
    inside, outside = (json.loads(line) for line in lines)
    assert inside["job_id"] == "gate:acme/tiny#7@x" and inside["delivery_id"] == "d-1"
    assert inside["repository"] == "acme/tiny" and inside["pr"] == 7
    assert inside["message"] == "working on it" and inside["level"] == "INFO"
    assert "job_id" not in outside


async def test_publishing_touches_the_heartbeat_and_stopping_forgets_the_worker(
        fresh, redis, tmp_path, monkeypatch):
    beat = tmp_path / "heartbeat"
    monkeypatch.setenv("LLMGATE_HEARTBEAT_FILE", str(beat))
    ctx = {"redis": redis}
    start_publishing(ctx, interval_s=0.05)
    deadline = time.monotonic() + 5
    while not beat.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert beat.exists()
    assert await redis.hexists(WORKERS_KEY, "test-worker")
    ok, reason = healthcheck.check({"LLMGATE_HEARTBEAT_FILE": str(beat)})
    assert ok, reason
    await stop_publishing(ctx)
    assert not await redis.hexists(WORKERS_KEY, "test-worker")


def test_a_stale_heartbeat_is_unhealthy(tmp_path):
    beat = tmp_path / "heartbeat"
    beat.touch()
    env = {"LLMGATE_HEARTBEAT_FILE": str(beat)}
    now = beat.stat().st_mtime
    assert healthcheck.check(env, now_s=now + 10)[0]
    ok, reason = healthcheck.check(env, now_s=now + healthcheck.HEARTBEAT_MAX_AGE_S + 1)
    assert not ok and "heartbeat" in reason


async def test_a_worker_that_lost_redis_says_so_in_its_heartbeat(tmp_path, monkeypatch,
                                                                  redis_url):
    """The loop is alive (the file is fresh) but Redis is not: unhealthy after 30 s of it,
    with the reason; healthy again once Redis answers."""
    beat = tmp_path / "heartbeat"
    monkeypatch.setenv("LLMGATE_HEARTBEAT_FILE", str(beat))
    client = patient_redis(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    waiting = asyncio.create_task(client.ping())
    ctx = {"redis": client}
    start_publishing(ctx, interval_s=0.05)
    env = {"LLMGATE_HEARTBEAT_FILE": str(beat)}
    try:
        deadline = time.monotonic() + 5
        while "redis-outage-s=" not in (beat.read_text() if beat.exists() else "") and \
                time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert healthcheck.check(env)[0]  # a blip of a second is not unhealthy
        beat.write_text("redis-outage-s=31\n")  # as written 31 s into the outage
        assert healthcheck.check(env) == (False, "worker cannot reach Redis for 31 s (> 30 s): "
                                                 "it takes no job until Redis answers")
    finally:
        waiting.cancel()
        await stop_publishing(ctx)  # its last flush gives up within FLUSH_TIMEOUT_S
        await client.aclose()
    back = patient_redis(redis_url)  # Redis answers again: the outage is over
    await back.ping()
    await back.aclose()
    assert lifecycle.heartbeat_note() == ""


def test_without_a_heartbeat_the_web_process_healthz_decides():
    answers = {"/healthz": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(answers.get(self.path, 404))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        env = {"PORT": str(server.server_address[1])}
        assert healthcheck.check(env) == (True, f"http://127.0.0.1:{env['PORT']}/healthz: HTTP 200")
        answers["/healthz"] = 503
        assert not healthcheck.check(env)[0]
    finally:
        server.shutdown()
        server.server_close()
    assert not healthcheck.check({"PORT": str(free_port())})[0]  # nothing listens


def test_shutdown_grace_setting():
    assert shutdown_grace_s({}) == 270
    assert shutdown_grace_s({"LLMGATE_SHUTDOWN_GRACE_S": "0"}) == 0
    assert shutdown_grace_s({"LLMGATE_SHUTDOWN_GRACE_S": " 30 "}) == 30
    for bad in ("-5", "1.5", "soon"):
        with pytest.raises(SettingsError, match="LLMGATE_SHUTDOWN_GRACE_S"):
            shutdown_grace_s({"LLMGATE_SHUTDOWN_GRACE_S": bad})


def test_worker_settings_carry_the_grace(tmp_path):
    from tests.unit.worker_support import APP_ID
    from worker.cli.demo import _keypair
    from worker.main import worker_settings

    env = {"GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": _keypair()[0],
           "LLMGATE_WORKDIR": str(tmp_path), "LLMGATE_SHUTDOWN_GRACE_S": "42"}
    settings = worker_settings(env)
    assert settings.job_completion_wait == 42
    assert all(fn.__wrapped__ for fn in settings.functions)  # every job is instrumented


def test_worker_log_settings_are_checked():
    assert log_format({}) == "text"
    assert log_format({"LLMGATE_LOG_FORMAT": "json"}) == "json"
    with pytest.raises(ValueError, match="LLMGATE_LOG_FORMAT"):
        log_format({"LLMGATE_LOG_FORMAT": "yaml"})
    with pytest.raises(ValueError, match="LLMGATE_LOG_LEVEL"):
        configure_worker_logging({"LLMGATE_LOG_LEVEL": "LOUD"})
