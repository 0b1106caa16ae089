"""The web process: a Starlette app that receives GitHub webhooks and enqueues arq jobs.

Run it with ``uvicorn app.main:app``. The module-level ``app`` is built on first access (PEP 562
``__getattr__``), so importing ``create_app`` in tests reads no environment, while uvicorn gets
settings checked at start-up: a missing or malformed variable prints one line on stderr and
exits with status 2.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool, Redis
from redis.exceptions import AuthenticationError, AuthorizationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from app.asgi import FastPathApp
from app.dashboard import AuthSettings, ClearRefusedSession, GitHubAccess, SignIn, dashboard_routes
from app.logs import web_formatter
from app.ops import OpsEndpoints, OpsSettings
from app.reports import ReportPages
from app.settings import SettingsError, WebSettings, masked_url
from app.webhooks import HEALTH_TIMEOUT_S, WebhookReceiver, redis_answers
from worker.contract import probe_queue_redis

log = logging.getLogger(__name__)

#: Bound on opening a Redis connection, in seconds (the per-delivery Redis work has its own
#: overall bound, ``app.webhooks.REDIS_TIMEOUT_S``).
REDIS_CONNECT_TIMEOUT_S = 1.0
#: Young-generation threshold of the server's garbage collector (``tune_gc``); CPython's
#: default is 700.
GC_YOUNG_THRESHOLD = 10_000
#: Exit status when the settings are missing or malformed.
EXIT_SETTINGS = 2
#: Bound on the start-up probe of the queue's Redis, seconds.
PROBE_TIMEOUT_S = 3.0


def check_queue_redis(url: str) -> list[str]:
    """Check the queue's Redis at start-up; return warnings to log.

    A Redis that does not answer is not checked (the web process starts without it and
    answers 503 on ``/healthz`` meanwhile; the workers wait for it and check it then).

    Raises:
        SettingsError: one line naming the setting: a ``maxmemory-policy`` that can evict,
            cluster mode, or a password Redis refuses
            (`worker.contract.queue_redis_refusal`).
    """
    try:
        refusal, warnings = probe_queue_redis(url, PROBE_TIMEOUT_S)
    except (AuthenticationError, AuthorizationError) as err:
        raise SettingsError(f"REDIS_URL is refused by Redis: {err}") from None
    except (RedisConnectionError, RedisTimeoutError, OSError):
        return [f"the queue's Redis at {masked_url(url)} does not answer: its "
                "maxmemory-policy is not checked"]
    if refusal is not None:
        raise SettingsError(refusal)
    return warnings


def open_queue(redis_url: str) -> ArqRedis:
    """Return an arq client for ``redis_url`` without connecting yet.

    ``arq.create_pool`` would PING at once and retry for seconds before raising, so a web
    process started while Redis is down could not start; this client connects on first use and
    reconnects by itself, and ``/healthz`` reports 503 meanwhile. Jobs use arq's default
    (pickle) serializer and default queue, like the worker. There is no per-command socket
    timeout (it costs a timer per read, about a third of the Redis time per delivery): the
    receiver bounds each delivery's Redis work as a whole instead.
    """
    pool = ConnectionPool.from_url(redis_url, socket_connect_timeout=REDIS_CONNECT_TIMEOUT_S)
    return ArqRedis(pool)


def create_app(settings: WebSettings | None = None, ops: OpsSettings | None = None, *,
               server_gc: bool = False, auth: AuthSettings | None = None) -> Starlette:
    """Build the web app: ``POST /webhook``, ``GET /healthz``, ``/readyz``, ``/metrics``, reports,
    and with sign-in configured (``auth``) ``/login``, ``/auth/callback``, ``/logout`` and the
    dashboard (``/dashboard...``, app/dashboard/): without sign-in there is no dashboard, so
    nothing of a private repository's history is ever served to an unknown visitor.

    Args:
        settings: the web settings; read from the environment when ``None``.
        ops: settings of ``/readyz`` and ``/metrics``; from the environment when both are
            ``None``, else the defaults.
        server_gc: tune the garbage collector for serving at start-up (``tune_gc``); for
            the server process only, not for tests that start many apps in one process.
        auth: "Sign in with GitHub" (app/dashboard/session.py); read from the environment when
            ``settings`` is ``None`` too, else none.

    Raises:
        SettingsError: ``settings`` is ``None`` and the environment is incomplete or malformed.
    """
    resolved = settings if settings is not None else WebSettings.from_env()
    if auth is None and settings is None:
        auth = AuthSettings.from_env()
    access = GitHubAccess(auth) if auth is not None else None
    receiver = WebhookReceiver(resolved)
    endpoints = OpsEndpoints(ops or (OpsSettings.from_env() if settings is None else OpsSettings()),
                             lambda: receiver.queue)
    #: The Redis of the stored reports (LLMGATE_CACHE_REDIS_URL, else the queue's), while open.
    reports_redis: dict[str, Redis | None] = {"client": None}

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        queue = open_queue(resolved.redis_url)
        if not await redis_answers(queue):
            log.warning("Redis at %s does not answer within %.0f s; /healthz answers 503 and "
                        "deliveries 503 until it does", masked_url(resolved.redis_url),
                        HEALTH_TIMEOUT_S)
        receiver.queue = queue
        reports = queue if resolved.reports_redis_url == resolved.redis_url else \
            Redis.from_url(resolved.reports_redis_url,
                           socket_connect_timeout=REDIS_CONNECT_TIMEOUT_S)
        reports_redis["client"] = reports
        if len(resolved.webhook_secrets) > 1:
            log.warning("GITHUB_WEBHOOK_SECRET_PREVIOUS is set: deliveries signed with the "
                        "previous webhook secret are accepted too; unset it once the rotation "
                        "is done")
        if server_gc:
            tune_gc()
        try:
            yield
        finally:
            await receiver.spool.close()
            receiver.queue = None
            reports_redis["client"] = None
            if reports is not queue:
                await reports.aclose()
            await queue.aclose(close_connection_pool=True)
            if access is not None:
                await access.aclose()

    routes: list[BaseRoute] = [
        Route("/webhook", receiver, methods=["POST"]),  # a raw ASGI app: the hot path
        Route("/healthz", receiver.healthz, methods=["GET"]),
        Route("/readyz", endpoints.readyz, methods=["GET"]),
        Route("/metrics", endpoints.metrics, methods=["GET"]),
        Route("/reports/{report_id}", ReportPages(lambda: reports_redis["client"], access).page,
              methods=["GET"]),
    ]
    if access is not None:  # the history lives on the queue's Redis (worker/history_contract.py)
        routes += [*SignIn(access).routes(), *dashboard_routes(
            lambda: receiver.queue, access, github_url=access.settings.github_url)]
    app = FastPathApp("/webhook", receiver, routes=routes, lifespan=lifespan)
    if access is not None:
        app.add_middleware(ClearRefusedSession)  # a token GitHub refused ends the session
    return app


def tune_gc(young_threshold: int = GC_YOUNG_THRESHOLD) -> None:
    """Move everything alive now out of the cyclic GC's reach and collect young objects less often.

    At start-up the process holds tens of thousands of objects (modules, classes, functions)
    that live as long as it does; each full collection walked them all: pauses of 2 to 15 ms
    in the middle of deliveries in ``bench/webhook_ack.py``. ``gc.freeze()`` moves them to a
    generation no collection visits (docs.python.org/3/library/gc.html#gc.freeze). Deliveries
    make few reference cycles, so the young generation is collected after
    ``young_threshold`` net allocations instead of CPython's 700: at 700 young collections
    cost about 15 us per delivery at 50 in flight, at 10,000 about 1 us, with pauses under
    3 ms.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


def _configure_logging(formatter: logging.Formatter) -> None:
    """Send the ``app`` loggers to stderr at uvicorn's level, unless logging is set up already.

    This makes ``uvicorn --log-level`` govern the one-line-per-delivery log too. uvicorn's own
    handlers get ``formatter`` as well, so ``LLMGATE_LOG_FORMAT=json`` makes every line JSON.
    """
    logger = logging.getLogger("app")
    if logger.handlers:
        return
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        for uvicorn_handler in logging.getLogger(name).handlers:
            uvicorn_handler.setFormatter(formatter)
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    logger.addHandler(handler)
    logger.setLevel(logging.getLogger("uvicorn.error").getEffectiveLevel())
    logger.propagate = False
    # Neither format shows where a log call was made; not looking it up saves a frame walk per
    # line (docs.python.org/3/howto/logging.html#optimization).
    logging._srcfile = None


def __getattr__(name: str) -> Starlette:
    """Build the module-level ``app`` from the environment on first access (for uvicorn).

    Raises:
        SystemExit: with status 2 after one line on stderr, when the settings are bad.
        AttributeError: for any other name.
    """
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        settings = WebSettings.from_env()
        ops = OpsSettings.from_env()
        auth = AuthSettings.from_env()
        formatter = web_formatter()
        warnings = check_queue_redis(settings.redis_url)
    except SettingsError as exc:
        sys.stderr.write(f"llmgate web: configuration error: {exc}\n")
        raise SystemExit(EXIT_SETTINGS) from None
    _configure_logging(formatter)
    for warning in warnings:
        log.warning("%s", warning)
    app = create_app(settings, ops, server_gc=True, auth=auth)
    globals()["app"] = app
    return app
