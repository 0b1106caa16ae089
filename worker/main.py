"""arq worker entry point: ``arq worker.main.WorkerSettings`` (or ``llmgate worker``).

Several workers may share one Redis: arq hands each job to one worker, and job ids made by
`worker.contract` keep a PR head from being gated twice at once.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
from arq.connections import RedisSettings
from redis.asyncio import Redis

from worker.baselines import BaselineSettings
from worker.calibrate_job import CalibrationSchedule, calibration_cron_jobs
from worker.checkout import Checkouts
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.ratelimit import GitHubLimiter, GitHubLimits, RedisLimitStore
from worker.github.token_store import SharedTokenStore
from worker.hardening import check_settings, harden
from worker.installs import quiet_when_uninstalled
from worker.jobs import Services, approve_pull_request, gate_pull_request, rerun_from_comment
from worker.jobs_events import EVENT_JOBS, installation_changed
from worker.jobs_push import store_baseline
from worker.lease import CTX_KEY, JobLimits
from worker.lifecycle import instrument_all, shutdown_grace_s, start_publishing, stop_publishing
from worker.logging_setup import configure_worker_logging
from worker.reconcile import reconcile_interval_s, start_reconciling, stop_reconciling
from worker.report_store import ReportSettings, ReportStore
from worker.settings import SettingsError, WorkerConfig
from worker.sweeper import sweeper_cron_jobs

#: Wall-clock limit of one job, seconds, unless ``LLMGATE_JOB_TIMEOUT_S`` says otherwise.
JOB_TIMEOUT_S = JobLimits().job_timeout_s
#: GitHub API request timeout, seconds.
HTTP_TIMEOUT_S = 30.0
#: Exit status when a setting is missing or malformed (as the web process).
EXIT_SETTINGS = 2


async def startup(ctx: dict[str, Any]) -> None:
    """Validate the settings and make the clients every job shares.

    Raises:
        SystemExit: a setting is missing or malformed (one clear line, non-zero exit).
    """
    try:
        config = WorkerConfig.from_env()
        calibration = CalibrationSchedule.from_env(os.environ)
        limits = GitHubLimits.from_env(os.environ)  # LLMGATE_GITHUB_*
        report_settings = ReportSettings.from_env(os.environ)  # LLMGATE_PUBLIC_URL, *_REPORT_TTL_S
        ctx[CTX_KEY] = JobLimits.from_env(os.environ)  # LLMGATE_JOB_*: leases (worker/lease.py)
    except SettingsError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    try:
        configure_worker_logging()
    except ValueError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    try:
        redactor = harden(config)  # sandbox, log redaction, non-dumpable process
    except SettingsError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    redis = Redis.from_url(config.redis_url)
    ctx["services"] = Services(
        config=config,
        http=httpx.AsyncClient(timeout=HTTP_TIMEOUT_S),
        tokens=InstallationTokenCache(AppCredentials(config.app_id, config.private_key),
                                      shared=SharedTokenStore.from_env(redis, os.environ)),
        checkouts=Checkouts(config.workdir),
        redis=redis,
        redactor=redactor,
        calibration=calibration,
        github_limiter=GitHubLimiter(RedisLimitStore(redis), limits),
        reports=ReportStore(redis, report_settings) if report_settings else None,
    )
    start_publishing(ctx)
    start_reconciling(ctx)  # GitHub decides what is lost (worker/reconcile.py)


async def shutdown(ctx: dict[str, Any]) -> None:
    """Publish the last metrics and close the shared clients."""
    await stop_reconciling(ctx)
    await stop_publishing(ctx)
    services: Services | None = ctx.get("services")
    if services is not None:
        await services.http.aclose()
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
    config = WorkerConfig.from_env(environ)
    try:
        config.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SettingsError(f"LLMGATE_WORKDIR cannot be created: {err.strerror}") from None
    checked_redis = RedisSettings.from_dsn(config.redis_url)
    check_settings(os.environ if environ is None else environ)
    grace_s = shutdown_grace_s(os.environ if environ is None else environ)
    calibration = CalibrationSchedule.from_env(os.environ if environ is None else environ)
    job_limits = JobLimits.from_env(os.environ if environ is None else environ)
    GitHubLimits.from_env(os.environ if environ is None else environ)  # checked before arq starts
    ReportSettings.from_env(os.environ if environ is None else environ)
    BaselineSettings.from_env(os.environ if environ is None else environ)  # LLMGATE_BASELINE_*
    reconcile_interval_s(os.environ if environ is None else environ)  # LLMGATE_RECONCILE_S

    class WorkerSettings:
        """arq settings: the job functions, start-up/shutdown hooks and limits."""

        functions: ClassVar[list[Any]] = instrument_all([
            *(quiet_when_uninstalled(fn) for fn in (gate_pull_request, rerun_from_comment,
                                                    approve_pull_request, *EVENT_JOBS,
                                                    store_baseline)),
            installation_changed])
        on_startup = startup
        on_shutdown = shutdown
        redis_settings = checked_redis
        job_timeout = job_limits.job_timeout_s  # LLMGATE_JOB_TIMEOUT_S
        max_tries = job_limits.max_tries  # LLMGATE_JOB_MAX_TRIES
        max_jobs = config.max_jobs
        keep_result = 3600
        job_completion_wait = grace_s
        cron_jobs = [*calibration_cron_jobs(calibration),  # LLMGATE_CALIBRATE_*; none by default
                     *sweeper_cron_jobs(job_limits)]  # abandoned check runs (worker/sweeper.py)
        timezone = datetime.UTC  # of the cron schedule

    return WorkerSettings


def __getattr__(name: str) -> type:
    """Build ``WorkerSettings`` from the environment on first access (PEP 562), for arq.

    ``arq worker.main.WorkerSettings`` and ``llmgate worker`` get settings checked at start-up;
    importing this module reads no environment.

    Raises:
        SystemExit: status 2 after one line on stderr, when a setting is missing or malformed.
        AttributeError: for any other name.
    """
    if name != "WorkerSettings":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        settings = worker_settings()
    except SettingsError as err:
        sys.stderr.write(f"llmgate worker: configuration error: {err}\n")
        raise SystemExit(EXIT_SETTINGS) from None
    globals()["WorkerSettings"] = settings
    return settings
