"""Send one notification: one POST to the channel's webhook, and what to do next.

The one module of ``worker/notify`` that talks HTTP (through the worker's shared httpx client).
A 2xx answer delivers. A 429 or 503 is retried after its ``Retry-After`` (seconds or an HTTP
date; RFC 9110 section 10.2.3), another 5xx, 408, a timeout or a network error after the
backoff; any other 4xx is permanent (the URL or the body is refused: trying again cannot
help). The URL never leaves this module in a result, an error text or a log line: errors are
reported by their type and the answer's status only.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import time
from dataclasses import dataclass
from typing import TypedDict

import httpx

from worker.contract import JOB_DELIVER_NOTIFICATION
from worker.notify.channels import POST_TIMEOUT_S, POST_TOTAL_S, Channel, NotifySettings
from worker.notify.message import (
    EVENT_HEADER,
    SIGNATURE_HEADER,
    Notice,
    json_body,
    sign,
    slack_body,
)

#: Answers retried after their ``Retry-After``, and other answers retried at all.
_RETRY_AFTER = (429, 503)
_TRANSIENT_4XX = (408, 425, 429)


__all__ = ["JOB_DELIVER_NOTIFICATION", "Attempt", "NotifyPayload", "notify_job_id", "post",
           "request", "retry_after_s"]


class NotifyPayload(TypedDict):
    """The delivery job's payload: which channel (never its URL), the notice to send, and
    which try this is (1-based; each try is a job of its own)."""

    channel: Channel
    notice: Notice
    attempt: int


def notify_job_id(payload: NotifyPayload) -> str:
    """Return the id of a delivery try's job: one per channel, config, pushed commit and try,
    so a push job run twice enqueues each delivery once, and a try run twice (a worker killed
    meanwhile) enqueues the next one once."""
    notice = payload["notice"]
    folder = f"/{notice['config']}" if notice["config"] else ""
    return (f"notify:{payload['channel']}:{notice['repository']}{folder}@{notice['sha']}"
            f":try{payload['attempt']}")


@dataclass(frozen=True)
class Attempt:
    """How one POST went.

    Attributes:
        delivered: the webhook answered 2xx.
        permanent: trying again cannot help (a 4xx other than 408, 425, 429).
        status: the HTTP status, or None when no answer came.
        retry_after_s: the answer's ``Retry-After`` in seconds (429/503 only), or None.
        error: what went wrong, without the URL (e.g. ``HTTP 500``, ``ConnectError``).
    """

    delivered: bool
    permanent: bool = False
    status: int | None = None
    retry_after_s: float | None = None
    error: str = ""


def request(channel: Channel, notice: Notice, settings: NotifySettings
            ) -> tuple[bytes, dict[str, str]]:
    """Return the body and headers of ``notice`` for ``channel`` (the JSON body signed when
    ``LLMGATE_NOTIFY_WEBHOOK_SECRET`` is set)."""
    headers = {"Content-Type": "application/json; charset=utf-8",
               "User-Agent": "llmgate-notify"}
    if channel == "slack":
        return slack_body(notice), headers
    body = json_body(notice)
    headers[EVENT_HEADER] = notice["event"]
    if settings.webhook_secret:
        headers[SIGNATURE_HEADER] = sign(settings.webhook_secret, body)
    return body, headers


async def post(http: httpx.AsyncClient, url: str, body: bytes,
               headers: dict[str, str]) -> Attempt:
    """POST ``body`` to ``url`` within `POST_TIMEOUT_S` a step and `POST_TOTAL_S` in all
    (redirects are not followed); never raises for a network error, a timeout or an answer
    (see the module docstring)."""
    try:
        async with asyncio.timeout(POST_TOTAL_S):
            answer = await http.post(url, content=body, headers=headers,
                                     timeout=POST_TIMEOUT_S, follow_redirects=False)
    except (httpx.HTTPError, TimeoutError) as err:  # connect, read, timeout: all transient
        return Attempt(False, error=type(err).__name__)
    status = answer.status_code
    if 200 <= status < 300:
        return Attempt(True, status=status)
    wait = retry_after_s(answer.headers.get("retry-after")) if status in _RETRY_AFTER else None
    permanent = 400 <= status < 500 and status not in _TRANSIENT_4XX
    return Attempt(False, permanent, status, wait, f"HTTP {status}")


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Return a ``Retry-After`` value in seconds from now (>= 0), or None when absent or
    malformed. ``value`` is delay-seconds or an HTTP date (RFC 9110 section 10.2.3)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
