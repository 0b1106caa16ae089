"""arq worker entry point: ``arq worker.main.WorkerSettings`` (or ``llmgate worker``).

Several workers may share one Redis: arq hands each job to one worker, and job ids made by
`worker.contract` keep a PR head from being gated twice at once.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
from arq.connections import RedisSettings
from redis.asyncio import Redis

from worker.baselines import BaselineSettings
from worker.checkout import Checkouts
from worker.gate import (
    CalibrationSchedule,
    quiet_when_uninstalled,
    reconcile_interval_s,
    start_reconciling,
    stop_reconciling,
    sweeper_cron_jobs,
)
from worker.github import (
    AppCredentials,
    GitHubLimiter,
    GitHubLimits,
    InstallationTokenCache,
    RedisLimitStore,
    SharedTokenStore,
)
from worker.jobs import (
    EVENT_JOBS,
    Services,
    answer_shard,
    approve_pull_request,
    calibration_cron_jobs,
    deliver_notification,
    gate_pull_request,
    installation_changed,
    rerun_from_comment,
    store_baseline,
)
from worker.notify import CTX_NOTIFY, NotifySettings
from worker.report import ReportSettings, ReportStore
from worker.runtime import (
    CTX_KEY,
    JobLimits,
    SettingsError,
    ShardSettings,
    WorkerConfig,
    check_queue_redis,
    check_settings,
    configure_worker_logging,
    fence_finished_jobs,
    guard_poll_loop,
    guard_stopping,
    harden,
    instrument_all,
    patient_redis,
    retry_options,
    shutdown_grace_s,
    start_publishing,
    stop_publishing,
)
from worker.security import Redactor

#: Wall-clock limit of one job, seconds, unless ``LLMGATE_JOB_TIMEOUT_S`` says otherwise.
JOB_TIMEOUT_S = JobLimits().job_timeout_s
#: GitHub API request timeout, seconds.
HTTP_TIMEOUT_S = 30.0
#: Exit status when a setting is missing or malformed (as the web process).
EXIT_SETTINGS = 2
#: Bounds on one call to the cache's Redis (``LLMGATE_CACHE_REDIS_URL``), seconds: it may be
#: down or evicting, and a cache failure is a miss, so a gate never waits long for it.
CACHE_CONNECT_TIMEOUT_S = 2.0
CACHE_TIMEOUT_S = 5.0


def cache_client(config: WorkerConfig, queue: Redis) -> Redis:
    """The client of the cache's Redis: ``queue`` itself unless ``LLMGATE_CACHE_REDIS_URL``
    names another one, which gets short timeouts and no retry (a failure is a cache miss)."""
    if config.cache_redis_url == config.redis_url:
        return queue
    client: Redis = Redis.from_url(config.cache_redis_url,
                                   socket_connect_timeout=CACHE_CONNECT_TIMEOUT_S,
                                   socket_timeout=CACHE_TIMEOUT_S)
    return client


@dataclass(frozen=True)
class StartupSettings:
    """Every setting a worker process reads from its environment, parsed once.

    `worker_settings` reads them before arq starts (so a bad one stops the process at once)
    and hands the same values to `startup`, which makes the shared clients from them; jobs
    read them from `Services`, never from the environment.

    Attributes:
        config: the App, Redis and worker basics (`WorkerConfig`).
        redis_settings: arq's connection settings for ``config.redis_url``.
        calibration: the scheduled calibration (``LLMGATE_CALIBRATE_*``), or None.
        github_limits: rate-limit handling (``LLMGATE_GITHUB_*``).
        reports: full reports behind Details (``LLMGATE_PUBLIC_URL``, ``*_REPORT_TTL_S``), or
            None when off.
        baselines: stored baselines (``LLMGATE_BASELINE_*``).
        shards: sharded gates (``LLMGATE_SHARD_*``: worker/gate/shards.py).
        job_limits: leases and job limits (``LLMGATE_JOB_*``).
        grace_s: seconds a stopping worker waits for its jobs (``LLMGATE_SHUTDOWN_GRACE_S``).
        notify: the notification webhooks and their retries (``LLMGATE_NOTIFY_*``:
            worker/notify/channels.py); no URL set means no notifications.
    """

    config: WorkerConfig
    redis_settings: RedisSettings
    calibration: CalibrationSchedule | None
    github_limits: GitHubLimits
    reports: ReportSettings | None
    baselines: BaselineSettings
    job_limits: JobLimits
    shards: ShardSettings
    grace_s: int
    notify: NotifySettings = dataclasses.field(default_factory=NotifySettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str],
                 config: WorkerConfig | None = None) -> StartupSettings:
        """Read and check every worker setting (the security ones included).

        Args:
            environ: the process environment.
            config: `WorkerConfig` when already read from ``environ``.

        Raises:
            SettingsError: one line naming the variable that is missing or malformed.
        """
        config = config or WorkerConfig.from_env(environ)
        # arq's pool retries a lost connection forever: a Redis restart pauses the poll loop
        # instead of ending the worker (worker/runtime/redis_checks.py).
        redis_settings = dataclasses.replace(RedisSettings.from_dsn(config.redis_url),
                                             **retry_options())
        check_settings(environ)  # the sandbox and the encryption keys
        grace_s = shutdown_grace_s(environ)
        calibration = CalibrationSchedule.from_env(environ)
        job_limits = JobLimits.from_env(environ)
        reconcile_interval_s(environ)  # LLMGATE_RECONCILE_S, checked before arq starts
        shards = ShardSettings.from_env(environ)
        return cls(config=config, redis_settings=redis_settings, calibration=calibration,
                   github_limits=GitHubLimits.from_env(environ),
                   reports=ReportSettings.from_env(environ),
                   baselines=BaselineSettings.from_env(environ), job_limits=job_limits,
                   shards=shards, grace_s=grace_s, notify=NotifySettings.from_env(environ))


async def startup(ctx: dict[str, Any], settings: StartupSettings | None = None) -> None:
    """Harden the process and make the clients every job shares, from ``settings``.

    Args:
        ctx: arq's worker context; gets ``services`` and the job limits.
        settings: what `worker_settings` read; None reads the environment now (a worker
            started without `worker_settings`, as some tests do).

    Raises:
        SystemExit: a setting is missing or malformed (one clear line, non-zero exit).
    """
    try:
        settings = settings or StartupSettings.from_env(os.environ)
    except SettingsError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    try:
        configure_worker_logging()
    except ValueError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    try:
        redactor = harden(settings.config)  # sandbox, log redaction, non-dumpable process
    except SettingsError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    # litellm is not imported here: a worker whose gates call no model through it (command
    # targets, self-hosted endpoints on the direct path, cached answers) never pays its import
    # (seconds of CPU, ~200 MB). The first call that needs it imports it once, in a thread, off
    # the event loop (worker/evals/llm/client.py `load_litellm`), so the loop keeps renewing
    # the job's lease meanwhile.
    redactor.add(*settings.notify.secrets())  # webhook URLs never reach a log line
    ctx[CTX_KEY] = settings.job_limits
    ctx[CTX_NOTIFY] = settings.notify
    ctx["services"] = make_services(settings, redactor)
    start_publishing(ctx)
    start_reconciling(ctx)  # GitHub decides what is lost (worker/gate/reconcile.py)


def make_services(settings: StartupSettings, redactor: Redactor) -> Services:
    """Return the clients every job of this process shares, made from ``settings``."""
    config = settings.config
    redis = patient_redis(config.redis_url)  # outlives Redis restarts (runtime/redis_checks.py)
    cache = cache_client(config, redis)
    return Services(
        config=config,
        http=httpx.AsyncClient(timeout=HTTP_TIMEOUT_S),
        tokens=InstallationTokenCache(AppCredentials(config.app_id, config.private_key),
                                      shared=SharedTokenStore.from_env(redis, os.environ)),
        checkouts=Checkouts(config.workdir),
        redis=redis,
        redactor=redactor,
        calibration=settings.calibration,
        github_limiter=GitHubLimiter(RedisLimitStore(redis), settings.github_limits),
        reports=ReportStore(cache, settings.reports) if settings.reports else None,
        cache_redis=cache,
        baselines=settings.baselines,
        shards=settings.shards,
    )


async def shutdown(ctx: dict[str, Any]) -> None:
    """Publish the last metrics and close the shared clients."""
    await stop_reconciling(ctx)
    await stop_publishing(ctx)
    services: Services | None = ctx.get("services")
    if services is not None:
        await services.http.aclose()
        if services.cache is not services.redis:
            await services.cache.aclose()
        await services.redis.aclose()


def worker_settings(environ: Mapping[str, str] | None = None) -> type:
    """Check every worker setting and return arq's settings class for them.

    Everything a job will need is checked here, before arq connects to Redis, so a bad setting
    stops the process at once (arq would otherwise retry Redis and then run ``on_startup``).

    Raises:
        SettingsError: one line naming the variable that is missing or malformed (the
            ``LLMGATE_CALIBRATE_*`` schedule included), or an ``LLMGATE_WORKDIR`` that cannot
            be created.
    """
    env = os.environ if environ is None else environ
    config = WorkerConfig.from_env(env)
    try:
        config.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SettingsError(f"LLMGATE_WORKDIR cannot be created: {err.strerror}") from None
    settings = StartupSettings.from_env(env, config)
    job_limits = settings.job_limits
    guard_poll_loop()  # a Redis restart or a full Redis must not end the worker
    guard_stopping()  # a stop signal ends the wait for an absent Redis
    fence_finished_jobs()  # a try that lost its lease leaves the job to the try holding it

    async def on_startup_hook(ctx: dict[str, Any]) -> None:
        await startup(ctx, settings)

    class WorkerSettings:
        """arq settings: the job functions, start-up/shutdown hooks and limits."""

        functions: ClassVar[list[Any]] = instrument_all([
            *(quiet_when_uninstalled(fn) for fn in (gate_pull_request, rerun_from_comment,
                                                    approve_pull_request, *EVENT_JOBS,
                                                    store_baseline, answer_shard)),
            installation_changed, deliver_notification])
        on_startup = on_startup_hook
        on_shutdown = shutdown
        redis_settings = settings.redis_settings
        job_timeout = job_limits.job_timeout_s  # LLMGATE_JOB_TIMEOUT_S
        max_tries = job_limits.max_tries  # LLMGATE_JOB_MAX_TRIES
        max_jobs = config.max_jobs
        keep_result = 3600
        job_completion_wait = settings.grace_s
        # LLMGATE_CALIBRATE_* (none by default), and abandoned check runs (gate/sweeper.py)
        cron_jobs = [*calibration_cron_jobs(settings.calibration), *sweeper_cron_jobs(job_limits)]
        timezone = datetime.UTC  # of the cron schedule

    return WorkerSettings


def __getattr__(name: str) -> type:
    """Build ``WorkerSettings`` from the environment on first access (PEP 562), for arq.

    ``arq worker.main.WorkerSettings`` and ``llmgate worker`` get settings checked at start-up;
    importing this module reads no environment.

    The queue's Redis is checked here too (`worker.runtime.redis_checks.check_queue_redis`:
    waits until it answers, refuses one that can evict or runs in cluster mode, warns when it
    has no persistence).

    Raises:
        SystemExit: status 2 after one line on stderr, when a setting is missing or malformed
            or the queue's Redis is refused.
        AttributeError: for any other name.
    """
    if name != "WorkerSettings":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        settings = worker_settings()
        warnings = check_queue_redis(WorkerConfig.from_env().redis_url)
    except SettingsError as err:
        sys.stderr.write(f"llmgate worker: configuration error: {err}\n")
        raise SystemExit(EXIT_SETTINGS) from None
    for warning in warnings:
        sys.stderr.write(f"llmgate worker: warning: {warning}\n")
    globals()["WorkerSettings"] = settings
    return settings
