"""``/readyz`` and ``/metrics`` of the real app over a real Redis, and delivery counting."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from gidgethub.sansio import Event
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from app.logs import JsonFormatter, delivery_fields, web_formatter
from app.main import create_app
from app.metrics import WORKERS_KEY
from app.ops import OpsSettings
from app.settings import SettingsError
from tests.conftest import free_port
from tests.unit.app_support import encode, fixture_json, post, settings


@asynccontextmanager
async def client(redis_url: str,
                 ops: OpsSettings | None = None) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings(redis_url), ops or OpsSettings())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://llmgate.test") as c:
            yield c


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def beat(redis_url: str, seen_s: float) -> None:
    """Publish one worker's heartbeat, as worker/runtime/metrics.py does, seen at ``seen_s``."""
    redis = Redis.from_url(redis_url)
    await redis.hset(WORKERS_KEY, "host:1:abc", json.dumps({"seen": seen_s, "running": 0}))
    await redis.aclose()


async def test_readyz_is_ready_below_the_queue_limit_and_not_at_it(redis_url):
    await beat(redis_url, time.time())
    async with client(redis_url, OpsSettings(ready_max_queue_depth=3)) as web:
        ready = await web.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "queued": 0, "max_queued": 3, "workers": 1}
        redis = Redis.from_url(redis_url)
        await redis.zadd("arq:queue", {"j1": 1, "j2": 2, "j3": 3})
        full = await web.get("/readyz")
        assert full.status_code == 503
        assert full.json()["reason"] == "queue backed up" and full.json()["queued"] == 3
        await redis.aclose()


async def test_readyz_is_unready_while_no_worker_heartbeated_recently(redis_url):
    """Deliveries would be queued with nobody to gate them: /readyz says so, with why."""
    async with client(redis_url) as web:
        none = await web.get("/readyz")
        await beat(redis_url, time.time() - 31)  # a worker that stopped beating 31 s ago
        stale = await web.get("/readyz")
        await beat(redis_url, time.time())
        live = await web.get("/readyz")
    for unready in (none, stale):
        assert unready.status_code == 503
        assert unready.json()["reason"] == ("0 workers heartbeated in the last 30 s (at least "
                                            "1 needed): queued gates are not being run")
    assert live.status_code == 200 and live.json()["workers"] == 1


async def test_readyz_without_a_queue_limit_only_needs_redis(redis_url):
    async with client(redis_url, OpsSettings(ready_max_queue_depth=0,
                                             ready_min_workers=0)) as web:
        redis = Redis.from_url(redis_url)
        await redis.zadd("arq:queue", {f"j{i}": i for i in range(50)})
        await redis.aclose()
        assert (await web.get("/readyz")).status_code == 200


async def test_readyz_and_metrics_when_redis_is_down():
    async with client(f"redis://127.0.0.1:{free_port()}/0") as web:
        unready = await web.get("/readyz")
        assert unready.status_code == 503 and unready.json()["reason"] == "redis does not answer"
        scraped = await web.get("/metrics")
        assert scraped.status_code == 200
        assert samples(scraped.text)[("llmgate_redis_up", ())] == 0


async def test_metrics_with_a_token_needs_it(redis_url):
    async with client(redis_url, OpsSettings(metrics_token="s3cret-token")) as web:
        assert (await web.get("/metrics")).status_code == 401
        wrong = await web.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        right = await web.get("/metrics", headers={"Authorization": "Bearer s3cret-token"})
        assert right.status_code == 200
        assert ("llmgate_redis_up", ()) in samples(right.text)
    assert "s3cret" not in repr(OpsSettings(metrics_token="s3cret-token"))


async def test_deliveries_are_counted_by_event_and_outcome(redis_url):
    key_queued = ("llmgate_webhooks_received_total",
                  (("event", "pull_request"), ("outcome", "queued")))
    key_dup = ("llmgate_webhooks_received_total",
               (("event", "pull_request"), ("outcome", "duplicate")))
    key_401 = ("llmgate_webhooks_received_total", (("event", "-"), ("outcome", "rejected_401")))
    async with client(redis_url) as web:
        before = samples((await web.get("/metrics")).text)
        body = encode(fixture_json("pull_request.opened.json"))
        assert (await post(web, "pull_request", "m-1", body)).status_code == 202
        assert (await post(web, "pull_request", "m-1", body)).status_code == 200
        assert (await post(web, "pull_request", "m-2", body, signed=False)).status_code == 401
        after = samples((await web.get("/metrics")).text)
    for key in (key_queued, key_dup, key_401):
        assert after[key] - before.get(key, 0) == 1, key


def test_ops_settings_from_the_environment():
    assert OpsSettings.from_env({}) == OpsSettings(1000, "")
    got = OpsSettings.from_env({"LLMGATE_READY_MAX_QUEUE_DEPTH": " 50 ",
                                "LLMGATE_METRICS_TOKEN": "t"})
    assert (got.ready_max_queue_depth, got.metrics_token) == (50, "t")
    for bad in ("-1", "ten", "1e3"):
        with pytest.raises(SettingsError, match="LLMGATE_READY_MAX_QUEUE_DEPTH"):
            OpsSettings.from_env({"LLMGATE_READY_MAX_QUEUE_DEPTH": bad})


def test_web_json_log_lines_carry_the_delivery():
    data = fixture_json("pull_request.opened.json")
    event = Event(data, event="pull_request", delivery_id="d-9")
    record = logging.LogRecord("app.webhooks", logging.INFO, __file__, 1, "delivery %s", ("d-9",),
                               None)
    for name, value in delivery_fields(event, "queued").items():
        setattr(record, name, value)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "delivery d-9" and entry["outcome"] == "queued"
    assert entry["delivery_id"] == "d-9" and entry["event"] == "pull_request"
    assert entry["repository"] == data["repository"]["full_name"]
    assert entry["pr"] == data["pull_request"]["number"] and entry["action"] == "opened"


def test_web_log_format_choice():
    assert isinstance(web_formatter({"LLMGATE_LOG_FORMAT": "JSON"}), JsonFormatter)
    assert not isinstance(web_formatter({}), JsonFormatter)
    with pytest.raises(SettingsError, match="LLMGATE_LOG_FORMAT"):
        web_formatter({"LLMGATE_LOG_FORMAT": "xml"})
