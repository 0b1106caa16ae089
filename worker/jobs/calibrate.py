"""Scheduled calibration: an arq cron job running `llmgate calibrate` for opted-in repositories.

The operator opts repositories in (``LLMGATE_CALIBRATE_REPOS``); nothing is scheduled otherwise.
For each one, the gate job remembers the base commit of the latest pull request it was given
(`worker.gate.calibration.remember_base`: installation, clone URL, base SHA; never a pull
request's head, so only code already merged into the repository runs). At the scheduled time
(``LLMGATE_CALIBRATE_AT``, UTC) the cron job checks that commit out and runs
`worker.pipeline.calibrate.calibrate_tree` on it: ``LLMGATE_CALIBRATE_RUNS`` identical runs
without the response cache, under the same sandbox as every gate run. The result is kept in
Redis for `RESULT_TTL_S`, and every later gate report of the repository carries one note line
with it (`worker.gate.calibration.with_calibration_note`).

Costs: each scheduled calibration runs the suites R times, model calls included (cached answers
would hide the noise it measures), within each run's ``max_cost_usd``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from arq.cron import CronJob, cron

from worker.checkout import GitError
from worker.errors import ConfigError, ExecutionError
from worker.gate import RESULT_TTL_S, CalibrationSchedule, Services, result_key, target_key
from worker.github import GitHubError
from worker.pipeline import calibrate_tree, render_json

log = logging.getLogger("llmgate.worker")

#: Wall-clock limit of one scheduled calibration of every opted-in repository, seconds.
CALIBRATE_TIMEOUT_S = 6 * 3600


def calibration_cron_jobs(schedule: CalibrationSchedule | None) -> list[CronJob]:
    """Return arq's cron job for ``schedule`` (none when it is None).

    The job runs once per scheduled time however many workers share the queue (arq's
    ``unique``), is not retried, and stops after `CALIBRATE_TIMEOUT_S`.
    """
    if schedule is None:
        return []
    return [cron(calibrate_repositories, name="calibrate_repositories", weekday=schedule.weekday,
                 hour=schedule.hour, minute=schedule.minute, second=0, unique=True,
                 timeout=CALIBRATE_TIMEOUT_S, max_tries=1)]


async def calibrate_repositories(ctx: dict[str, Any]) -> dict[str, str]:
    """The cron job: calibrate every opted-in repository, one after another.

    Returns:
        ``owner/name`` -> ``calibrated`` or why not (stored by arq as the job result).
    """
    services: Services = ctx["services"]
    schedule = services.calibration
    if schedule is None:
        return {}
    return {repo: await calibrate_repository(services, repo, schedule.runs)
            for repo in schedule.repos}


async def calibrate_repository(services: Services, repo: str, runs: int) -> str:
    """Calibrate the remembered base commit of ``repo`` and store the result in Redis.

    Args:
        services: the worker's `worker.gate.services.Services` (Redis, GitHub, checkouts, redactor).
        repo: ``owner/name``.
        runs: identical runs R.

    Returns:
        ``calibrated``, or ``skipped: ...`` / ``failed: ...`` with the reason (secrets redacted).
    """
    raw = await services.redis.get(target_key(repo))
    if raw is None:
        return "skipped: no pull request gated since it was opted in, so no base commit is known"
    target = json.loads(raw)
    try:
        token = await services.github(int(target["installation_id"])).installation_token()
        services.redactor.add(token)
        async with services.checkouts.worktree(repo, target["clone_url"], target["sha"],
                                               token) as root:
            cal = await calibrate_tree(root, runs, sha=target["sha"])
    except ConfigError as err:
        return services.redactor.redact(f"failed: configuration error: {err}")
    except (GitError, ExecutionError, GitHubError, ValueError, OSError) as err:
        log.warning("calibration of %s failed: %s", repo, services.redactor.redact(str(err)))
        return services.redactor.redact(f"failed: {err}")
    record = json.loads(render_json(cal)) | {"sha": target["sha"], "finished_at": time.time()}
    await services.redis.set(result_key(repo), json.dumps(record, sort_keys=True),
                             ex=RESULT_TTL_S)
    return "calibrated"
