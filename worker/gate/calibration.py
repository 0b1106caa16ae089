"""Scheduled calibration, the gate's side: the schedule, the remembered base, the report note.

The operator opts repositories in (``LLMGATE_CALIBRATE_REPOS``; `CalibrationSchedule`). The
gate job remembers the base commit of the latest pull request it was given (`remember_base`:
installation, clone URL, base SHA; never a pull request's head, so only code already merged
into the repository runs). The cron job (worker/jobs/calibrate.py) calibrates that commit and
stores the result under `result_key`; every later gate report of the repository carries one
note line with it (`with_calibration_note`). Records are kept for `RESULT_TTL_S`.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.contract import GatePayload, RepoRef
from worker.evals.types import GateReport
from worker.pipeline import history_of
from worker.runtime import SettingsError

log = logging.getLogger("llmgate.worker")

#: How long the remembered base commit and the last calibration are kept, seconds (90 days).
TARGET_TTL_S = RESULT_TTL_S = 90 * 86400
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


async def calibration_history(redis: Redis, repo: str) -> dict[str, Any]:
    """Return the examples' pass shares of the repository's last calibration as a gate's
    ``history`` (`worker.pipeline.calibration_history.history_of`), or {} when there is none.

    The weights it gives never look at a pull request's draws, so a missing or stale record
    changes power, not the false-alarm rate: a Redis failure or an unreadable record is logged
    and gates without it.
    """
    try:
        raw = await redis.get(result_key(repo))
        return history_of(json.loads(raw)) if raw is not None else {}
    except (RedisError, ValueError, TypeError, AttributeError) as err:
        log.warning("could not read the last calibration's example history: %s", err)
        return {}


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
