"""arq job delivering one notification of a default-branch regression (worker/notify/).

Enqueued by the push job (worker/jobs/push.py) after the baseline is stored, one job per
channel, so a slow or failing webhook never holds up a push or a gate. Each try is a job of its
own that POSTs once (`worker.notify.deliver.post`). After a transient failure it enqueues the
next try, deferred by ``LLMGATE_NOTIFY_BACKOFF_S * 2 ** (tries - 1)`` seconds or the receiver's
``Retry-After`` (`worker.notify.channels.NotifySettings.delay_s`), up to
``LLMGATE_NOTIFY_MAX_TRIES`` tries, independent of arq's ``max_tries`` (which stays for killed
workers). Then, or at once for a permanent refusal, the delivery is logged as given up. The URL
is read from the worker's settings by channel and never logged.
"""

from __future__ import annotations

import logging
from typing import Any

from arq.connections import ArqRedis

from worker.gate import Services
from worker.notify import (
    CTX_NOTIFY,
    JOB_DELIVER_NOTIFICATION,
    NotifyPayload,
    NotifySettings,
    notify_job_id,
    post,
    request,
)

log = logging.getLogger("llmgate.notify")


async def deliver_notification(ctx: dict[str, Any], payload: NotifyPayload) -> dict[str, str]:
    """POST ``payload["notice"]`` to ``payload["channel"]``'s webhook (one try).

    Returns:
        ``{"status": ...}``: ``delivered``, ``retrying`` (the next try is queued, with
        ``next_try_in_s``), ``given_up`` (with ``reason``: the last error and the tries) or
        ``not_configured`` (the channel's URL is no longer set on this worker).

    Raises:
        redis.exceptions.RedisError: the next try could not be queued (arq tries this one
            again).
    """
    settings: NotifySettings = ctx.get(CTX_NOTIFY) or NotifySettings()
    services: Services = ctx["services"]
    channel, notice = payload["channel"], payload["notice"]
    attempt = max(1, int(payload.get("attempt") or 1))
    what = f"{notice['event']} of {notice['repository']}@{notice['short_sha']} to {channel}"
    url = settings.url(channel)
    if not url:
        log.warning("notification %s not sent: the channel has no URL on this worker", what)
        return {"status": "not_configured", "channel": channel}
    body, headers = request(channel, notice, settings)
    result = await post(services.http, url, body, headers)
    if result.delivered:
        log.info("notification %s delivered (try %d)", what, attempt)
        return {"status": "delivered", "channel": channel, "tries": str(attempt)}
    if result.permanent or attempt >= settings.max_tries:
        why = "refused" if result.permanent else f"{attempt} tries failed"
        log.warning("notification %s given up: %s, last: %s", what, why, result.error)
        return {"status": "given_up", "channel": channel, "reason": f"{why}: {result.error}"}
    delay_s = settings.delay_s(attempt, result.retry_after_s)
    following = NotifyPayload(channel=channel, notice=notice, attempt=attempt + 1)
    queue: ArqRedis = ctx["redis"]
    await queue.enqueue_job(JOB_DELIVER_NOTIFICATION, following,
                            _job_id=notify_job_id(following), _defer_by=delay_s)
    log.info("notification %s: try %d of %d failed (%s); next in %.1f s", what, attempt,
             settings.max_tries, result.error, delay_s)
    return {"status": "retrying", "channel": channel, "next_try_in_s": f"{delay_s:.1f}"}
