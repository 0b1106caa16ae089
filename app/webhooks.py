"""Receive GitHub webhook deliveries: verify, filter, enqueue, and nothing else.

Per delivery: read the body under a size cap, check ``X-Hub-Signature-256`` over the raw bytes
before parsing anything, parse the JSON once, route it (``app.routes``), then one Redis
``SET NX`` to drop redeliveries and at most one arq enqueue. GitHub waits 10 seconds for an
answer and does not redeliver on its own (docs.github.com/en/webhooks/using-webhooks/
best-practices-for-using-webhooks), so a delivery we could not queue gets 503 and is left
unmarked for a manual redelivery.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from arq.connections import ArqRedis
from gidgethub.sansio import Event
from redis.exceptions import RedisError
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from app.routes import router
from app.routes.decision import Decision
from app.routes.payload import PayloadError
from app.settings import WebSettings
from worker.contract import DELIVERY_KEY_PREFIX, DELIVERY_TTL_S

log = logging.getLogger(__name__)

#: Errors that mean "Redis is unreachable or too slow", answered with 503.
REDIS_ERRORS = (RedisError, OSError, asyncio.TimeoutError)
#: How long ``/healthz`` waits for Redis to answer PING, in seconds.
HEALTH_TIMEOUT_S = 1.0
#: Bound on one delivery's Redis work (mark + enqueue), in seconds: well inside the 10 s GitHub
#: waits for an answer.
REDIS_TIMEOUT_S = 5.0
_SIGNATURE_PREFIX = "sha256="
# Header values are not signed: accept only plain names (GitHub sends GUIDs and snake_case).
_DELIVERY_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_EVENT_NAME = re.compile(r"[a-z0-9_]{1,64}")


def _json_loader() -> Callable[[bytes], Any]:
    """Return ``orjson.loads`` when orjson is installed (about 2.5x faster here), else json's."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - depends on the environment
        return json.loads
    return orjson.loads


_loads = _json_loader()


class Rejection(Exception):
    """A delivery refused with ``status_code`` (4xx/503) and a short, payload-free ``message``."""

    def __init__(self, status_code: int, message: str) -> None:
        """Keep the HTTP status code and the message sent back as ``{"error": message}``."""
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def sign(secret: str | bytes, body: bytes) -> str:
    """Return GitHub's ``X-Hub-Signature-256`` value for ``body``: ``"sha256=" + hex HMAC``.

    The HMAC-SHA256 is keyed with the UTF-8 secret and taken over the raw body bytes
    (docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
    """
    key = secret.encode() if isinstance(secret, str) else secret
    return _SIGNATURE_PREFIX + hmac.new(key, body, hashlib.sha256).hexdigest()


def signature_matches(secret: str | bytes, body: bytes, header: str | None) -> bool:
    """Return whether ``header`` is the valid ``X-Hub-Signature-256`` of ``body``.

    Compared in constant time; a missing or malformed header is simply not a match.
    """
    if header is None:
        return False
    try:
        given = header.encode("latin-1")  # how Starlette decoded the header bytes
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(sign(secret, body).encode("ascii"), given)


async def read_body(request: Request, max_bytes: int) -> bytes:
    """Return the request body, refusing more than ``max_bytes`` before reading it all.

    Raises:
        Rejection: 413 when ``Content-Length`` or the streamed byte count exceeds the cap; 400
            on a malformed ``Content-Length`` or a client that went away.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise Rejection(400, "malformed Content-Length header")
        if int(declared) > max_bytes:
            raise Rejection(413, f"body larger than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise Rejection(413, f"body larger than {max_bytes} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise Rejection(400, "client disconnected before the body was read") from None
    return b"".join(chunks)


def parse_delivery(headers: Headers, body: bytes) -> Event:
    """Parse a verified body and its GitHub headers into a gidgethub ``Event``.

    Raises:
        Rejection: 400 when the body is not a JSON object, ``action`` is not a string, or
            ``X-GitHub-Event`` / ``X-GitHub-Delivery`` is missing or malformed.
    """
    try:
        data = _loads(body)
    except (ValueError, RecursionError):
        hint = "" if "json" in headers.get("content-type", "") else (
            "; set the webhook content type to application/json")
        raise Rejection(400, "body is not valid JSON" + hint) from None
    if not isinstance(data, dict):
        raise Rejection(400, "body is not a JSON object")
    event_name = headers.get("x-github-event", "")
    if not _EVENT_NAME.fullmatch(event_name):
        raise Rejection(400, "missing or malformed X-GitHub-Event header")
    delivery_id = headers.get("x-github-delivery", "")
    if not _DELIVERY_ID.fullmatch(delivery_id):
        raise Rejection(400, "missing or malformed X-GitHub-Delivery header")
    if not isinstance(data.get("action", ""), str):
        raise Rejection(400, f"delivery {delivery_id}: payload field action must be a string")
    return Event(data, event=event_name, delivery_id=delivery_id)


class WebhookReceiver:
    """The ``POST /webhook`` and ``GET /healthz`` endpoints; ``queue`` is set by the lifespan.

    Attributes:
        queue: the arq Redis client, or ``None`` outside the app's lifespan (answers 503).
    """

    def __init__(self, settings: WebSettings) -> None:
        """Keep the secret (as bytes) and the body cap from ``settings``."""
        self._secret = settings.webhook_secret.encode()
        self._max_body_bytes = settings.max_body_bytes
        self.queue: ArqRedis | None = None

    async def handle(self, request: Request) -> Response:
        """Answer one delivery: 202 queued, 200 duplicate/ignored/pong, or 4xx/503 refused."""
        try:
            body = await read_body(request, self._max_body_bytes)
            signature = request.headers.get("x-hub-signature-256")
            if not signature_matches(self._secret, body, signature):
                raise Rejection(401, "missing or invalid X-Hub-Signature-256 (HMAC-SHA256)")
            event = parse_delivery(request.headers, body)
            status_code, answer = await self._settle(event.delivery_id, await route(event))
        except Rejection as rejection:
            log.warning("webhook rejected (%d): %s", rejection.status_code, rejection.message)
            return JSONResponse({"error": rejection.message}, rejection.status_code)
        log.info("delivery %s event=%s action=%s: %s", event.delivery_id, event.event,
                 event.data.get("action", "-"), answer["status"])
        return JSONResponse(answer, status_code)

    async def _settle(self, delivery_id: str, decision: Decision) -> tuple[int, dict[str, str]]:
        """Mark the delivery as seen, then enqueue the planned job; return (status, answer).

        Raises:
            Rejection: 503 when Redis fails; the mark is then removed so a redelivery counts.
        """
        queue = self.queue
        if queue is None:
            raise Rejection(503, "the job queue is not open yet; redeliver later")
        key = DELIVERY_KEY_PREFIX + delivery_id
        job = decision.job
        marked = False
        try:
            async with asyncio.timeout(REDIS_TIMEOUT_S):
                if not await queue.set(key, b"1", nx=True, ex=DELIVERY_TTL_S):
                    return 200, {"status": "duplicate"}
                marked = True
                if job is None:
                    return 200, decision.as_json()
                queued = await queue.enqueue_job(job.function, job.payload, _job_id=job.job_id)
        except REDIS_ERRORS:
            if marked:
                await _forget(queue, key)
            raise Rejection(503, "the job queue is unavailable; redeliver later") from None
        return 202, {"status": "queued" if queued is not None else "already_queued"}

    async def healthz(self, request: Request) -> Response:
        """Answer 200 ``{"status": "ok"}`` when Redis answers PING within 1 s, else 503."""
        if self.queue is not None and await redis_answers(self.queue):
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "unavailable", "reason": "redis does not answer"}, 503)


async def route(event: Event) -> Decision:
    """Run the event through the handlers of ``app.routes`` and return their decision.

    Raises:
        Rejection: 400 when a handler finds a needed payload field missing or malformed.
    """
    decision = Decision()
    try:
        await router.dispatch(event, decision)
    except PayloadError as exc:
        raise Rejection(400, f"delivery {event.delivery_id}: {exc}") from None
    return decision


async def redis_answers(queue: ArqRedis, timeout_s: float = HEALTH_TIMEOUT_S) -> bool:
    """Return whether Redis answers PING within ``timeout_s`` seconds."""
    try:
        return bool(await asyncio.wait_for(queue.ping(), timeout_s))
    except REDIS_ERRORS:
        return False


async def _forget(queue: ArqRedis, key: str) -> None:
    """Delete a delivery mark, best effort (Redis may be the thing that is down)."""
    try:
        await asyncio.wait_for(queue.delete(key), HEALTH_TIMEOUT_S)
    except REDIS_ERRORS:
        log.warning("could not remove delivery mark %s; a redelivery will be seen as duplicate",
                    key)
