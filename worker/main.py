"""arq worker entry point: ``arq worker.main.WorkerSettings`` (or ``llmgate worker``).

Several workers may share one Redis: arq hands each job to one worker, and job ids made by
`worker.contract` keep a PR head from being gated twice at once.
"""

from __future__ import annotations

import logging
import os
from typing import Any, ClassVar

import httpx
from arq.connections import RedisSettings
from redis.asyncio import Redis

from worker.checkout import Checkouts
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.jobs import Services, gate_pull_request, rerun_from_comment
from worker.settings import SettingsError, WorkerConfig, redis_url_from_env

#: Wall-clock limit of one job, seconds: both checkouts and both eval runs.
JOB_TIMEOUT_S = 3600
#: GitHub API request timeout, seconds.
HTTP_TIMEOUT_S = 30.0


async def startup(ctx: dict[str, Any]) -> None:
    """Validate the settings and make the clients every job shares.

    Raises:
        SystemExit: a setting is missing or malformed (one clear line, non-zero exit).
    """
    try:
        config = WorkerConfig.from_env()
    except SettingsError as err:
        raise SystemExit(f"llmgate worker: {err}") from None
    logging.basicConfig(level=os.environ.get("LLMGATE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    ctx["services"] = Services(
        config=config,
        http=httpx.AsyncClient(timeout=HTTP_TIMEOUT_S),
        tokens=InstallationTokenCache(AppCredentials(config.app_id, config.private_key)),
        checkouts=Checkouts(config.workdir),
        redis=Redis.from_url(config.redis_url),
    )


async def shutdown(ctx: dict[str, Any]) -> None:
    """Close the shared clients."""
    services: Services | None = ctx.get("services")
    if services is not None:
        await services.http.aclose()
        await services.redis.aclose()


def _redis_settings() -> RedisSettings:
    try:
        return RedisSettings.from_dsn(redis_url_from_env(os.environ))
    except SettingsError as err:
        raise SystemExit(f"llmgate worker: {err}") from None


class WorkerSettings:
    """arq settings: the job functions, start-up/shutdown hooks and limits."""

    functions: ClassVar[list[Any]] = [gate_pull_request, rerun_from_comment]
    on_startup = startup
    on_shutdown = shutdown
    redis_settings = _redis_settings()
    job_timeout = JOB_TIMEOUT_S
    max_tries = 3
    max_jobs = int(os.environ.get("LLMGATE_MAX_JOBS", "4"))
    keep_result = 3600
