"""Operations endpoints of the web process: ``GET /readyz`` and ``GET /metrics``.

``/healthz`` (in ``app.webhooks``) says the process is alive and Redis answers; ``/readyz``
says it should get traffic: Redis answers, at least ``LLMGATE_READY_MIN_WORKERS`` workers
heartbeated within the last 30 s (a worker beats every 10 s while its loop runs and Redis answers;
none means deliveries are queued but nobody gates them), and the queue is not backed up beyond
``LLMGATE_READY_MAX_QUEUE_DEPTH`` jobs (a backed-up queue means workers are missing or stuck, and
a load balancer may prefer another region or page someone), and Redis takes writes (a full
Redis refuses them: no job is claimed until memory is freed). Each 503 says why. ``/metrics``
is the Prometheus text exposition (``app.metrics``); with ``LLMGATE_METRICS_TOKEN`` set it asks for
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from arq.connections import ArqRedis
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.metrics import WORKER_STALE_S, read_snapshot, render
from app.settings import SettingsError

#: Default of ``LLMGATE_READY_MAX_QUEUE_DEPTH``: waiting jobs beyond which ``/readyz`` is 503.
DEFAULT_READY_MAX_QUEUE_DEPTH = 1000
#: Default of ``LLMGATE_READY_MIN_WORKERS``: live workers below which ``/readyz`` is 503.
DEFAULT_READY_MIN_WORKERS = 1


@dataclass(frozen=True, repr=False)
class OpsSettings:
    """Settings of the operations endpoints.

    Attributes:
        ready_max_queue_depth: ``LLMGATE_READY_MAX_QUEUE_DEPTH``, waiting jobs; 0 turns the
            queue check off (then only Redis counts).
        metrics_token: ``LLMGATE_METRICS_TOKEN``; when set, ``/metrics`` needs it as a bearer
            token. Never shown by ``repr``.
        ready_min_workers: ``LLMGATE_READY_MIN_WORKERS``, workers that must have heartbeated
            within the last 30 s (`app.metrics.WORKER_STALE_S`); 0 turns the check off.
    """

    ready_max_queue_depth: int = DEFAULT_READY_MAX_QUEUE_DEPTH
    metrics_token: str = field(default="")
    ready_min_workers: int = DEFAULT_READY_MIN_WORKERS

    def __repr__(self) -> str:
        """Show the settings with the token masked."""
        token = "**********" if self.metrics_token else ""
        return (f"OpsSettings(ready_max_queue_depth={self.ready_max_queue_depth}, "
                f"metrics_token={token!r}, ready_min_workers={self.ready_min_workers})")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> OpsSettings:
        """Read the settings; unset or empty variables take the defaults.

        Raises:
            SettingsError: ``LLMGATE_READY_MAX_QUEUE_DEPTH`` or ``LLMGATE_READY_MIN_WORKERS`` is
                not a whole number.
        """
        return cls(ready_max_queue_depth=_count(environ, "LLMGATE_READY_MAX_QUEUE_DEPTH", "jobs",
                                                DEFAULT_READY_MAX_QUEUE_DEPTH),
                   metrics_token=environ.get("LLMGATE_METRICS_TOKEN", "").strip(),
                   ready_min_workers=_count(environ, "LLMGATE_READY_MIN_WORKERS", "workers",
                                            DEFAULT_READY_MIN_WORKERS))


def _count(environ: Mapping[str, str], name: str, unit: str, default: int) -> int:
    """A whole number in ``name`` (unset or empty: ``default``).

    Raises:
        SettingsError: it is not a whole number.
    """
    raw = environ.get(name, "").strip()
    if raw and not (raw.isascii() and raw.isdigit()):
        raise SettingsError(f"{name} must be a whole number of {unit} (0: no limit), "
                            f"got {raw[:20]!r}")
    return int(raw) if raw else default


class OpsEndpoints:
    """``/readyz`` and ``/metrics``; ``queue`` returns the app's arq client (None when closed)."""

    def __init__(self, settings: OpsSettings, queue: Callable[[], ArqRedis | None]) -> None:
        """Keep the settings and how to reach the queue."""
        self._settings = settings
        self._queue = queue

    async def readyz(self, request: Request) -> Response:
        """Answer 200 when Redis answers and takes writes, enough workers heartbeat and the
        queue is short enough, else 503 with a reason."""
        snapshot = await read_snapshot(self._queue(), samples=False)
        if not snapshot.redis_up:
            return JSONResponse({"status": "unready", "reason": "redis does not answer"}, 503)
        limit = self._settings.ready_max_queue_depth
        body = {"queued": snapshot.queued, "max_queued": limit, "workers": snapshot.workers}
        if snapshot.writes_refused:
            reason = (f"redis refuses writes ({snapshot.writes_refused}): workers take no job "
                      "until it accepts writes again (free memory or raise its maxmemory)")
            return JSONResponse({"status": "unready", "reason": reason, **body}, 503)
        if snapshot.workers < self._settings.ready_min_workers:
            reason = (f"{snapshot.workers} workers heartbeated in the last "
                      f"{WORKER_STALE_S:.0f} s (at least {self._settings.ready_min_workers} "
                      "needed): queued gates are not being run")
            return JSONResponse({"status": "unready", "reason": reason, **body}, 503)
        if limit and snapshot.queued >= limit:
            return JSONResponse({"status": "unready", "reason": "queue backed up", **body}, 503)
        return JSONResponse({"status": "ready", **body})

    async def metrics(self, request: Request) -> Response:
        """Answer the Prometheus exposition (401 without the token, when one is configured)."""
        token = self._settings.metrics_token
        if token:
            given = request.headers.get("authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, f"Bearer {token}".encode()):
                return JSONResponse({"error": "metrics need Authorization: Bearer <token>"},
                                    401, headers={"WWW-Authenticate": "Bearer"})
        body = render(await read_snapshot(self._queue()))
        return Response(body, headers={"Content-Type": CONTENT_TYPE_LATEST})
