"""Helpers for the web-process tests: signed deliveries, a running app, and the arq queue."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from arq.connections import ArqRedis
from arq.jobs import JobDef
from redis.asyncio import ConnectionPool

from app.main import create_app
from app.settings import WebSettings
from app.webhooks import sign

WEBHOOKS = Path(__file__).parents[1] / "fixtures" / "github" / "webhooks"
SIGNATURES = json.loads((WEBHOOKS / "signatures.json").read_text())
#: The secret the fixtures in signatures.json were signed with.
SECRET: str = SIGNATURES["secret"]
HEAD_SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
BASE_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"


def fixture_bytes(name: str) -> bytes:
    """Return the exact bytes of a webhook fixture, e.g. ``"pull_request.synchronize.json"``."""
    return (WEBHOOKS / name).read_bytes()


def fixture_json(name: str) -> dict[str, Any]:
    """Return a webhook fixture parsed, to edit before re-serialising with ``encode``."""
    data: dict[str, Any] = json.loads(fixture_bytes(name))
    return data


def set_fields(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Set nested fields of ``data`` in place and return it: a key ``"check_run__app__id"``
    sets ``data["check_run"]["app"]["id"]``. Raises KeyError when a parent is missing."""
    for path, value in changes.items():
        node = data
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return data


def encode(data: Any) -> bytes:
    """Serialise a payload as GitHub would send it (UTF-8 JSON)."""
    return json.dumps(data).encode()


def headers(event: str, delivery_id: str, body: bytes | None = None,
            secret: str = SECRET) -> dict[str, str]:
    """Return GitHub's delivery headers; signed over ``body`` unless it is ``None``."""
    result = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery_id,
              "Content-Type": "application/json"}
    if body is not None:
        result["X-Hub-Signature-256"] = sign(secret, body)
    return result


def settings(redis_url: str, **overrides: Any) -> WebSettings:
    """Return web settings for tests: the fixtures' secret and the given Redis."""
    values: dict[str, Any] = {"webhook_secret": SECRET, "redis_url": redis_url}
    return WebSettings(**(values | overrides))


@asynccontextmanager
async def running_app(config: WebSettings) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``create_app(config)`` with its lifespan; yield an HTTP client bound to it."""
    app = create_app(config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://llmgate.test") as c:
            yield c


async def post(client: httpx.AsyncClient, event: str, delivery_id: str, body: bytes,
               *, signed: bool = True) -> httpx.Response:
    """POST one delivery to ``/webhook``."""
    sent = headers(event, delivery_id, body if signed else None)
    return await client.post("/webhook", content=body, headers=sent)


async def queued_jobs(redis_url: str) -> list[JobDef]:
    """Return the jobs waiting in the real arq queue, read with arq's own reader."""
    queue = ArqRedis(ConnectionPool.from_url(redis_url))
    try:
        return await queue.queued_jobs()
    finally:
        await queue.aclose(close_connection_pool=True)


def redis_keys(redis_url: str) -> list[str]:
    """Return every key in the test database, sorted (sync, for assertions)."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        keys: list[str] = client.keys("*")  # type: ignore[assignment]
        return sorted(keys)
    finally:
        client.close()
