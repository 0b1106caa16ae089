"""Scheduled calibration: an arq cron job running `llmgate calibrate` for opted-in repositories.

The operator opts repositories in (``LLMGATE_CALIBRATE_REPOS``); nothing is scheduled otherwise.
For each one, the gate job remembers the base commit of the latest pull request it was given
(`remember_base`: installation, clone URL, base SHA; never a pull request's head, so only code
already merged into the repository runs). At the scheduled time (``LLMGATE_CALIBRATE_AT``, UTC)
the cron job checks that commit out and runs `worker.pipeline.calibrate.calibrate_tree` on it:
``LLMGATE_CALIBRATE_RUNS`` identical runs without the response cache, under the same sandbox as
every gate run. The result is kept in Redis for `RESULT_TTL_S`, and every later gate report of
the repository carries one note line with it (`with_calibration_note`).

Costs: each scheduled calibration runs the suites R times, model calls included (cached answers
would hide the noise it measures), within each run's ``max_cost_usd``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from arq.cron import CronJob, cron
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.checkout import GitError
from worker.contract import GatePayload, RepoRef
from worker.evals.types import ConfigError, ExecutionError, GateReport
from worker.github.client import GitHubError
from worker.pipeline.calibrate import calibrate_tree, render_json
from worker.runtime.settings import SettingsError

if TYPE_CHECKING:  # worker.jobs.pull_request imports this module
    from worker.gate.services import Services

log = logging.getLogger("llmgate.worker")

#: How long the remembered base commit and the last calibration are kept, seconds (90 days).
TARGET_TTL_S = RESULT_TTL_S = 90 * 86400
#: Wall-clock limit of one scheduled calibration of every opted-in repository, seconds.
CALIBRATE_TIMEOUT_S = 6 * 3600
DEFAULT_RUNS, MAX_RUNS = 5, 20
DEFAULT_AT = "sun 03:00"
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
#: Unstable example ids named in a report note, per suite.
MAX_NOTE_IDS = 10
_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*)/[A-Za-z0-9._-]+\Z")
_AT = re.compile(r"(?P<day>daily|mon|tue|wed|thu|fri|sat|sun) (?P<hour>\d\d):(?P<minute>\d\d)\Z")


@dataclass(frozen=True)
class CalibrationSchedule:
    """Which repositories are calibrated, how often and with how many runs.

    Attributes:
        repos: ``owner/name`` of each opted-in repository.
        runs: identical runs R per calibration (2-20).
        weekday: 0 (Monday) to 6 (Sunday), or None for every day.
        hour, minute: the time of day, UTC.
    """

    repos: tuple[str, ...]
    runs: int = DEFAULT_RUNS
    weekday: int | None = 6
    hour: int = 3
    minute: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CalibrationSchedule | None:
        """Read ``LLMGATE_CALIBRATE_REPOS``, ``_RUNS`` and ``_AT``; None when no repository is set.

        Raises:
            SettingsError: one line naming the malformed variable.
        """
        repos = tuple(r for r in re.split(r"[\s,]+", env.get("LLMGATE_CALIBRATE_REPOS", "")) if r)
        if not repos:
            return None
        bad = next((r for r in repos if not _REPO.match(r)), None)
        if bad is not None:
            raise SettingsError(f"LLMGATE_CALIBRATE_REPOS must list owner/name repositories "
                                f"separated by commas, got {bad[:100]!r}")
        raw_runs = env.get("LLMGATE_CALIBRATE_RUNS", "").strip() or str(DEFAULT_RUNS)
        if not (raw_runs.isascii() and raw_runs.isdigit() and 2 <= int(raw_runs) <= MAX_RUNS):
            raise SettingsError(f"LLMGATE_CALIBRATE_RUNS must be a whole number from 2 to "
                                f"{MAX_RUNS}")
        at = _AT.match(env.get("LLMGATE_CALIBRATE_AT", "").strip().lower() or DEFAULT_AT)
        if at is None or int(at["hour"]) > 23 or int(at["minute"]) > 59:
            raise SettingsError("LLMGATE_CALIBRATE_AT must be a day (mon ... sun, or daily) and "
                                "a UTC time, e.g. 'sun 03:00'")
        weekday = None if at["day"] == "daily" else DAYS.index(at["day"])
        return cls(tuple(dict.fromkeys(repos)), int(raw_runs), weekday, int(at["hour"]),
                   int(at["minute"]))


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


def target_key(repo: str) -> str:
    """Redis key of the commit to calibrate for ``owner/name``."""
    return f"llmgate:calibrate:target:{repo}"


def result_key(repo: str) -> str:
    """Redis key of the last calibration of ``owner/name``."""
    return f"llmgate:calibration:{repo}"


async def remember_base(redis: Redis, schedule: CalibrationSchedule | None,
                        payload: GatePayload) -> None:
    """Remember a pull request's base commit as the next one to calibrate (opted-in only).

    A Redis failure is logged, never raised: the gate does not depend on it.
    """
    repo = payload["repo"]
    key = f"{repo['owner']}/{repo['name']}"
    if schedule is None or key not in schedule.repos:
        return
    target = {"installation_id": payload["installation_id"], "clone_url": repo["clone_url"],
              "sha": payload["base_sha"]}
    try:
        await redis.set(target_key(key), json.dumps(target), ex=TARGET_TTL_S)
    except RedisError as err:
        log.warning("could not remember %s for calibration: %s", key, err)


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


async def with_calibration_note(redis: Redis, repo: RepoRef, report: GateReport) -> GateReport:
    """Return ``report`` with a note on the repository's last calibration, when there is one.

    A Redis failure or an unreadable record leaves the report as it is.
    """
    try:
        raw = await redis.get(result_key(f"{repo['owner']}/{repo['name']}"))
        note = calibration_note(json.loads(raw)) if raw is not None else None
    except (RedisError, ValueError, KeyError, TypeError) as err:
        log.warning("could not read the last calibration: %s", err)
        return report
    return report if note is None else replace(report, notes=(*report.notes, note))


def calibration_note(record: Mapping[str, Any]) -> str:
    """Return the one-line report note of a stored calibration (pure).

    Raises:
        KeyError, TypeError, ValueError: the record is not one `calibrate_repository` stored.
    """
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(record["finished_at"])))
    alpha = record["alpha"]
    expected = f" (expected at most alpha = {alpha:g})" if alpha is not None else ""
    unstable: Mapping[str, list[str]] = record["unstable"]
    flips = "; ".join(
        f"{suite}: {', '.join(ids[:MAX_NOTE_IDS])}"
        + (f" and {len(ids) - MAX_NOTE_IDS} more" if len(ids) > MAX_NOTE_IDS else "")
        for suite, ids in unstable.items())
    return (f"last calibration ({record['runs']} identical runs of {str(record['sha'])[:7]}, "
            f"{when}): false-alarm rate {record['false_alarms']}/{record['comparisons']} = "
            f"{float(record['false_alarm_rate']):.3f}{expected}; "
            + (f"unstable examples (candidates for `quarantine:`): {flips}" if flips else
               "no example changed between identical runs"))
