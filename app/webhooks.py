"""Receive GitHub webhook deliveries: verify, filter, enqueue, and nothing else.

Per delivery: read the body under a size cap, check ``X-Hub-Signature-256`` over the raw bytes
(with the current secret, and the previous one while it is rotated) before parsing anything,
parse the JSON once, route it (``app.routes``), then one Redis round trip that drops
redeliveries and replayed bodies and enqueues at most one arq job (``app.enqueue``). GitHub
waits 10 seconds for an answer and does not redeliver on its own (docs.github.com/en/webhooks/
using-webhooks/best-practices-for-using-webhooks), so a delivery we could not queue because
Redis is away is kept in memory and enqueued when Redis answers (``app.spool``: 202
``spooled``); only when that spool is full does it get 503, left unmarked for a manual
redelivery.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from arq.connections import ArqRedis
from gidgethub.sansio import Event
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from app.asgi import header_values, send_json
from app.enqueue import Outcome, body_digest, mark_and_enqueue
from app.logs import delivery_fields
from app.metrics import count_delivery
from app.redis_pipe import RedisPipe
from app.rejections import RejectionLog
from app.routes import Decision, PayloadError, router
from app.settings import WebSettings
from app.spool import DeliverySpool, SpooledDelivery
from worker.contract import write_refusal

log = logging.getLogger(__name__)

#: Errors that mean "Redis is unreachable or too slow", answered with 503.
REDIS_ERRORS = (RedisError, OSError, asyncio.TimeoutError)
#: Of those, the ones that mean "Redis is away" (not "Redis refused"): the delivery is
#: kept in the spool (`app.spool`) rather than refused.
UNREACHABLE_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)
#: How long ``/healthz`` waits for Redis to answer PING, in seconds.
HEALTH_TIMEOUT_S = 1.0
#: Bound on one delivery's Redis work (mark + enqueue), in seconds: well inside the 10 s GitHub
#: waits for an answer.
REDIS_TIMEOUT_S = 5.0
_SIGNATURE_PREFIX = "sha256="
_SIGNATURE_PREFIX_BYTES = b"sha256="
# Header values are not signed: accept only plain names (GitHub sends GUIDs and snake_case).
_DELIVERY_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_EVENT_NAME = re.compile(r"[a-z0-9_]{1,64}")
#: The only request headers the webhook endpoint reads.
_WEBHOOK_HEADERS = frozenset({b"content-length", b"content-type", b"x-github-event",
                              b"x-github-delivery", b"x-hub-signature-256"})


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
    return matching_secret((secret,), body, header) == 0


def matching_secret(secrets: Sequence[str | bytes], body: bytes,
                    header: str | None) -> int | None:
    """Return the index in ``secrets`` of the one ``header`` is the valid signature of
    ``body`` with (``X-Hub-Signature-256``), or None.

    Every secret's HMAC is computed and compared with ``hmac.compare_digest``, whichever
    matches, so the time taken says nothing about which secret, if any, signed the body (a
    rotation's previous secret, `app.settings.WebSettings.webhook_secrets`). A missing or
    malformed header matches none.
    """
    if header is None:
        return None
    try:
        given = header.encode("latin-1")  # how Starlette decoded the header bytes
    except UnicodeEncodeError:
        return None
    found = None
    for index, secret in enumerate(secrets):
        key = secret.encode() if isinstance(secret, str) else secret
        expected = _SIGNATURE_PREFIX_BYTES + hmac.digest(key, body, "sha256").hex().encode()
        if hmac.compare_digest(expected, given) and found is None:
            found = index
    return found


async def read_body(receive: Receive, declared: str | None, max_bytes: int) -> bytes:
    """Return the request body from ASGI ``receive``, refusing more than ``max_bytes``.

    Args:
        receive: the ASGI receive callable of the request.
        declared: the ``Content-Length`` header, if any; checked before reading anything.
        max_bytes: the body cap, in bytes.

    Raises:
        Rejection: 413 when ``Content-Length`` or the streamed byte count exceeds the cap; 400
            on a malformed ``Content-Length`` or a client that went away.
    """
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise Rejection(400, "malformed Content-Length header")
        if int(declared) > max_bytes:
            raise Rejection(413, f"body larger than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    more_body = True
    while more_body:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            raise Rejection(400, "client disconnected before the body was read")
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise Rejection(413, f"body larger than {max_bytes} bytes")
        chunks.append(chunk)
        more_body = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_delivery(headers: Mapping[str, str], body: bytes) -> Event:
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
        """Keep the secrets (as bytes) and the body cap from ``settings``."""
        self._secrets = tuple(secret.encode() for secret in settings.webhook_secrets)
        self._max_body_bytes = settings.max_body_bytes
        self._rejections = RejectionLog(log)
        self._queue: ArqRedis | None = None
        self._pipe: RedisPipe | None = None
        #: Deliveries kept while Redis is away (`app.spool`).
        self.spool = DeliverySpool()

    @property
    def queue(self) -> ArqRedis | None:
        """The arq Redis client, or ``None`` outside the app's lifespan (answers 503)."""
        return self._queue

    @queue.setter
    def queue(self, queue: ArqRedis | None) -> None:
        """Use ``queue``; deliveries go through one pipelined connection of its pool."""
        self._queue = queue
        self._pipe = None if queue is None else RedisPipe(queue.connection_pool, REDIS_TIMEOUT_S)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ``POST /webhook`` delivery, as a raw ASGI app (see ``app.asgi``).

        202 queued, 200 duplicate/ignored/pong, or 4xx/503 refused, with a JSON body.
        """
        headers = header_values(scope, _WEBHOOK_HEADERS)
        try:
            body = await read_body(receive, headers.get("content-length"), self._max_body_bytes)
            signed_with = matching_secret(self._secrets, body,
                                          headers.get("x-hub-signature-256"))
            if signed_with is None:
                raise Rejection(401, "missing or invalid X-Hub-Signature-256 (HMAC-SHA256)")
            event = parse_delivery(headers, body)
            if signed_with:  # never the secret itself: which variable, and the delivery
                log.info("delivery %s is signed with GITHUB_WEBHOOK_SECRET_PREVIOUS: set the "
                         "App's webhook secret to GITHUB_WEBHOOK_SECRET", event.delivery_id)
            status_code, answer = await self._settle(event.delivery_id, body_digest(body),
                                                     await route(event))
        except Rejection as rejection:
            count_delivery("-", f"rejected_{rejection.status_code}")
            self._rejections.record(rejection.status_code, rejection.message)  # aggregated
            await send_json(send, rejection.status_code, {"error": rejection.message})
            return
        await send_json(send, status_code, answer)  # answer first, then account for it
        count_delivery(event.event, answer["status"])
        if log.isEnabledFor(logging.INFO):
            log.info("delivery %s event=%s action=%s: %s", event.delivery_id, event.event,
                     event.data.get("action", "-"), answer["status"],
                     extra=delivery_fields(event, answer["status"]))

    async def _settle(self, delivery_id: str, body_sha256: str,
                      decision: Decision) -> tuple[int, dict[str, str]]:
        """Mark the delivery as seen and enqueue the planned job; return (status, answer).

        One atomic Redis script does both (``app.enqueue``): when it fails, nothing was written
        (or, if only its reply was lost, the job is queued and a redelivery is a duplicate). A
        delivery whose id or body (``body_sha256``, hex SHA-256) was seen before, e.g. a signed
        body replayed under a new delivery id, is answered 200 ``duplicate``, unless the body
        changes what a pull request is gated on (a byte-identical ``edited`` of a retarget back
        and forth within one second: `app.enqueue`).

        When Redis is unreachable or slower than ``REDIS_TIMEOUT_S``, or refuses writes (full:
        ``OOM`` under ``noeviction``, read-only, cannot persist: `worker.contract.write_refusal`),
        the delivery is kept in the spool (`app.spool`) and answered as queued (``spooled``);
        the spool retries it until Redis takes it.

        Raises:
            Rejection: 503 when the queue is not open, Redis refuses the script (a permission),
                or the spool is full.
        """
        pipe = self._pipe
        if pipe is None:
            raise Rejection(503, "the job queue is not open yet; redeliver later")
        try:  # bounded by REDIS_TIMEOUT_S: the pipe's deadline, no timer per delivery
            outcome = await mark_and_enqueue(pipe, delivery_id, body_sha256, decision.job,
                                             decision.head_record)
        except REDIS_ERRORS as err:
            if not isinstance(err, UNREACHABLE_ERRORS) and write_refusal(err) is None:
                # Redis answered, and refused for good (a permission): keeping it won't help
                raise Rejection(503, "the job queue is unavailable; redeliver later") from None
            kept = SpooledDelivery(delivery_id, body_sha256, decision.job, decision.head_record)
            if not self.spool.keep(pipe, kept):
                raise Rejection(503, "the job queue is unavailable; redeliver later") from None
            if decision.job is None:
                return 200, decision.as_json()
            return 202, {"status": "spooled"}
        if outcome is Outcome.DUPLICATE:
            return 200, {"status": "duplicate"}
        if decision.job is None:
            return 200, decision.as_json()
        return 202, {"status": "queued" if outcome is Outcome.MARKED else "already_queued"}

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
