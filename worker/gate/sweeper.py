"""The sweeper: conclude check runs whose job arq gave up, so none stays ``in_progress``.

arq never calls a job function again once its tries are used up (a worker killed on every try:
arq then stores a ``JobExecutionFailed("max N retries exceeded")`` result), and its own job
timeout cancels a job without a word; in both cases nothing of llmgate runs to conclude the
check run. The sweeper, an arq cron job every ``LLMGATE_SWEEP_INTERVAL_S`` seconds (one worker
per tick: arq's ``unique`` cron), walks the run registry (`worker.gate.registry`): a run whose job
is neither running nor queued was abandoned, unless arq's result shows the job function ended by
itself (then it concluded its check run, and only the entry is left to remove). An abandoned run's
check run is concluded ``timed_out`` with the explanation and a Re-run button.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from arq.constants import result_key_prefix
from arq.cron import CronJob, cron
from arq.jobs import deserialize_result
from arq.worker import JobExecutionFailed
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.gate.accept import RERUN_BUTTON
from worker.gate.check_run import TRANSIENT_ERRORS, conclusion_body, stopped_reason
from worker.gate.registry import RunEntry, RunRegistry, job_state
from worker.github import GitHubClient, GitHubError
from worker.runtime import CTX_KEY, JobLimits

log = logging.getLogger(__name__)

#: Time limit of one sweep, seconds (a few GitHub calls per abandoned run).
SWEEP_TIMEOUT_S = 60
LOST_REASON = ("The job running this check was lost: its worker stopped and the job was not "
               "queued again.")


def sweep_schedule(interval_s: int) -> dict[str, Any]:
    """Return arq ``cron`` keyword arguments that fire every ``interval_s`` seconds.

    ``interval_s`` divides 60 (fires on those seconds of every minute) or is whole minutes
    dividing an hour (fires on those minutes, at second 0); `JobLimits.from_env` checks it.
    """
    if interval_s < 60:
        return {"second": set(range(0, 60, interval_s))}
    return {"minute": set(range(0, 60, interval_s // 60)), "second": 0}


def sweeper_cron_jobs(limits: JobLimits) -> list[CronJob]:
    """Return the sweeper's arq cron job (unique across workers, one try, no result kept)."""
    return [cron(sweep_runs, name="sweep_runs", unique=True, timeout=SWEEP_TIMEOUT_S,
                 max_tries=1, keep_result=0, **sweep_schedule(limits.sweep_interval_s))]


async def abandoned_reason(redis: Redis, entry: RunEntry,
                           limits: JobLimits) -> tuple[str, str] | None:
    """Return ``(conclusion, reason)`` for ``entry``'s unconcluded check run, or None.

    Called for a job that is neither running nor queued and whose run is still registered (a
    job forgets its run when it concludes the check run); reads arq's stored result. None: the
    job succeeded (it concluded its check run). A worker that died or a job past its time
    limit gives ``timed_out``; a job that raised before it could conclude (e.g. GitHub kept
    failing on its last try, also while concluding) gives ``failure`` with the error's type.
    """
    raw = await redis.get(result_key_prefix + entry.job_id)
    if raw is None:
        return "timed_out", LOST_REASON
    try:
        result = deserialize_result(raw)
    except Exception:  # an unreadable result: the job is gone all the same
        return "timed_out", LOST_REASON
    if result.success:
        return None
    error = result.result
    if isinstance(error, JobExecutionFailed):
        return "timed_out", (stopped_reason(entry.attempt) if "retries exceeded" in str(error)
                             else LOST_REASON)
    if isinstance(error, TimeoutError):
        return "timed_out", (f"The run took longer than the job time limit "
                             f"({limits.job_timeout_s} s, `LLMGATE_JOB_TIMEOUT_S` of the worker).")
    if isinstance(error, asyncio.CancelledError):
        return "timed_out", LOST_REASON
    return "failure", (f"The run could not finish: it failed with {type(error).__name__} "
                       "on its last try (GitHub or Redis kept failing), before it could "
                       "conclude this check run.")


async def sweep(redis: Redis, github: Callable[[int], GitHubClient],
                limits: JobLimits) -> dict[str, int]:
    """Conclude every abandoned run's check run (``timed_out``, or ``failure`` when its job raised
    before concluding it) and forget finished runs.

    ``github`` returns a client for an installation id. A run whose check run could not be
    updated because GitHub failed transiently stays registered for the next sweep.

    Returns:
        Counts: ``concluded`` (check runs concluded now), ``forgotten`` (entries of runs
        that had concluded themselves, or were damaged), ``alive`` (jobs running or queued).

    Raises:
        redis.exceptions.RedisError: Redis failed (the next sweep starts over).
    """
    registry = RunRegistry(redis)
    counts = {"concluded": 0, "forgotten": 0, "alive": 0}
    for rid in await registry.run_ids():
        entry = await registry.get_run(rid)
        if entry is not None and await job_state(redis, entry.job_id) != "gone":
            counts["alive"] += 1
            continue
        body = None if entry is None else await _abandoned_body(redis, entry, limits)
        if entry is not None and body is not None:
            if not await _conclude(github(entry.installation_id), entry, body):
                continue
            counts["concluded"] += 1
        else:
            counts["forgotten"] += 1
        await registry.remove(rid)
    return counts


async def _abandoned_body(redis: Redis, entry: RunEntry,
                          limits: JobLimits) -> dict[str, Any] | None:
    """The PATCH body concluding an ended job's check run, or None if the job concluded it.

    A conclusion the job left pending (GitHub refused it for a while) comes first; otherwise
    `abandoned_reason` decides (``timed_out`` or ``failure``), with a Re-run button (as the
    reconciler's, `worker.gate.reconcile`).
    """
    if entry.conclusion:
        return {"status": "completed", "conclusion": entry.conclusion,
                "output": {**conclusion_body(entry.conclusion, "")["output"],
                           "summary": entry.summary}}
    ending = await abandoned_reason(redis, entry, limits)
    if ending is None:
        return None
    return {**conclusion_body(*ending), "actions": [dict(RERUN_BUTTON)]}


async def _conclude(gh: GitHubClient, entry: RunEntry, body: dict[str, Any]) -> bool:
    """PATCH ``entry``'s check run with ``body``; False to keep it for the next sweep."""
    try:
        await gh.update_check_run(entry.owner, entry.name, entry.check_run_id, body)
    except TRANSIENT_ERRORS as err:
        log.warning("sweeper: check run %s not concluded yet (%s)", entry.check_run_id,
                    type(err).__name__)
        return False
    except GitHubError as err:  # refused for good (e.g. the App lost the repository)
        log.warning("sweeper: check run %s cannot be concluded: %s", entry.check_run_id, err)
        return True
    log.info("sweeper: concluded check run %s of job %s %s", entry.check_run_id, entry.job_id,
             body["conclusion"])
    return True


async def sweep_runs(ctx: dict[str, Any]) -> dict[str, int]:
    """The arq cron job: `sweep` with the worker's services and `JobLimits`."""
    services = ctx["services"]
    limits = ctx.get(CTX_KEY)
    try:
        return await sweep(services.redis, services.github,
                           limits if isinstance(limits, JobLimits) else JobLimits())
    except RedisError as err:
        log.warning("sweeper: Redis failed (%s); the next sweep tries again", type(err).__name__)
        return {"concluded": 0, "forgotten": 0, "alive": 0}
