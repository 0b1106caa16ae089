"""The check run of one gate run across the tries of its job: create or reuse, conclude, retry.

A gate run's check run is registered (`worker.gate.registry`) as soon as it exists. A later try of
the same job (its worker was killed or stopped, or a transient failure was retried) finds the entry
and updates that check run instead of creating a second one; the entry is removed once the check run
is concluded. Transient failures (GitHub 5xx or rate limits, Redis errors) are retried by arq with
exponential backoff until the job's last try.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

from arq.worker import Retry
from redis.exceptions import RedisError

from worker.contract import pr_external_id, write_refusal
from worker.gate import regate
from worker.gate.registry import RunRegistry, new_entry
from worker.gate.request import GateRequest
from worker.github import (
    GitHubClient,
    GitHubError,
    GitHubRateLimited,
    GitHubUnavailable,
    clip_text,
)
from worker.runtime import JobRef

log = logging.getLogger("llmgate.worker")

#: Failures worth another try of the job: GitHub down or rate limited, Redis unreachable.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (GitHubUnavailable, GitHubRateLimited,
                                                 RedisError)
#: Backoff of a retried job: ``BACKOFF_BASE_S * 2 ** (try - 1)``, at most ``BACKOFF_MAX_S``
#: seconds, or longer when GitHub names the time (exponential backoff, as in the AWS
#: Architecture Blog's "Exponential Backoff And Jitter", without jitter: few jobs retry at once).
BACKOFF_BASE_S = 10.0
BACKOFF_MAX_S = 300.0
#: Titles of a concluded check run, by conclusion.
_TITLES = {"cancelled": "llmgate: cancelled", "timed_out": "llmgate: the run timed out",
           "skipped": "llmgate: skipped"}


@dataclass(frozen=True)
class OpenRun:
    """The check run a gate run reports to, and its registry id ("" when not registered)."""

    check_run_id: int
    run_id: str = ""


def retry_delay_s(attempt: int, err: Exception | None = None) -> float:
    """Return seconds to wait before try ``attempt + 1`` (``attempt`` >= 1).

    ``BACKOFF_BASE_S * 2 ** (attempt - 1)`` capped at ``BACKOFF_MAX_S`` (10, 20, 40, ... s); a
    GitHub error that names when to retry (a rate limit's reset, ``retry-after``) waits at
    least that long.
    """
    delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** max(0, attempt - 1))
    hint = err.retry_after_s() if isinstance(err, GitHubError) else None
    return max(delay, hint or 0.0)


def retry_later(job: JobRef, err: Exception) -> Retry:
    """Return arq's ``Retry`` for a transient ``err`` on try ``job.attempt`` (logged)."""
    delay_s = retry_delay_s(job.attempt, err)
    log.warning("job %s try %d of %d: transient failure (%s: %s); retrying in %.0f s",
                job.job_id, job.attempt, job.limits.max_tries, type(err).__name__, err, delay_s)
    return Retry(defer=delay_s)


def running_output(head_sha: str, job: JobRef | None) -> dict[str, str]:
    """Return the ``output`` of an in-progress check run: ``{"title", "summary"}`` naming the
    head and, on a later try of the job, which try it is."""
    if job is None or job.attempt == 1:
        return {"title": "llmgate: running", "summary": f"Running the eval suites at "
                                                       f"`{head_sha[:7]}`."}
    return {"title": f"llmgate: running (try {job.attempt} of {job.limits.max_tries})",
            "summary": f"Running the eval suites at `{head_sha[:7]}` again: the previous try "
                       "stopped before it finished (its worker stopped, or GitHub or Redis "
                       "failed for a while)."}


async def open_run(registry: RunRegistry, gh: GitHubClient, request: GateRequest,
                   job: JobRef | None) -> OpenRun:
    """Return the check run of this gate run: the registered one of an earlier try, or new.

    A new check run's base branch is recorded (`worker.gate.regate.remember`), so the
    reconciler can tell a verdict about a base the pull request has left.

    Raises:
        GitHubError, redis.exceptions.RedisError: creating or registering failed (a check run
            created but not registered is concluded ``cancelled`` first, so none is orphaned).
    """
    repo, head_sha = request.repo, request.head_sha
    owner, name = repo["owner"], repo["name"]
    output = running_output(head_sha, job)
    external_id = request.external_id or pr_external_id(request.pr_number)
    if job is None:
        check_run_id = await gh.create_check_run(owner, name, head_sha, status="in_progress",
                                                 output=output, external_id=external_id)
        await regate.remember(registry.redis, repo, request.pr_number, check_run_id,
                              request.base_ref)
        return OpenRun(check_run_id)
    entry = await registry.get(job.job_id, request.pr_number)
    if entry is not None and (entry.owner, entry.name, entry.head_sha) == (owner, name, head_sha):
        await gh.update_check_run(owner, name, entry.check_run_id,
                                  {"status": "in_progress", "output": output})
        await registry.put(dataclasses.replace(entry, attempt=job.attempt,
                                               updated_at=time.time()))
        return OpenRun(entry.check_run_id, entry.run_id)
    if entry is not None:  # this job moved to a newer head (a re-run read it on this try)
        await conclude(gh, entry.owner, entry.name, entry.check_run_id, "cancelled",
                       f"Superseded by a push of {head_sha[:7]}.")
    check_run_id = await gh.create_check_run(owner, name, head_sha, status="in_progress",
                                             output=output, external_id=external_id)
    fresh = new_entry(job.job_id, check_run_id, job.installation_id, owner, name,
                      request.pr_number, head_sha, job.attempt)
    try:
        await regate.remember(registry.redis, repo, request.pr_number, check_run_id,
                              request.base_ref)
        await registry.put(fresh)
    except RedisError as err:
        await conclude(gh, owner, name, check_run_id, "cancelled", redis_failed(err))
        raise
    return OpenRun(check_run_id, fresh.run_id)


def redis_failed(error: BaseException) -> str:
    """The summary of a check run concluded ``cancelled`` because Redis failed right after it
    was created (its retry opens a new one): Redis did not answer, or refused the write
    (`worker.contract.write_refusal`: a full Redis answers, but refuses)."""
    refusal = write_refusal(error)
    if refusal is None:
        return "llmgate's Redis did not answer; the run is tried again."
    return (f"llmgate's Redis refused to store this run ({refusal}); the run is tried again "
            "once it takes writes.")


def conclusion_body(conclusion: str, reason: str, *, rerun_hint: bool = True) -> dict[str, Any]:
    """Return the PATCH body that concludes a check run without a gate report.

    ``conclusion`` is a GitHub check conclusion (``failure``, ``cancelled``, ``timed_out``,
    ``skipped``); ``reason`` becomes the output summary (clipped to 2,000 characters), followed
    by how to run again unless ``rerun_hint`` is False.
    """
    summary = clip_text(reason, 2000)
    if rerun_hint:
        summary += "\n\nComment `/llmgate rerun` to try again."
    return {"status": "completed", "conclusion": conclusion,
            "output": {"title": _TITLES.get(conclusion, "llmgate: the run failed"),
                       "summary": summary}}


async def conclude(gh: GitHubClient, owner: str, name: str, check_run_id: int,
                   conclusion: str, reason: str, *, rerun_hint: bool = True) -> bool:
    """Conclude a check run that did not get a gate report, so a required check never hangs.

    The body is `conclusion_body`'s. A failure to reach GitHub is logged, never raised: the
    job's own outcome is the one to report (401/403/404, the App lost the repository, only at
    debug level: worker/gate/installs.py).

    Returns:
        False when GitHub failed transiently (rate limited, 5xx): the caller leaves the
        conclusion to the sweeper; True otherwise (concluded, or refused for good).
    """
    try:
        await gh.update_check_run(owner, name, check_run_id,
                                  conclusion_body(conclusion, reason, rerun_hint=rerun_hint))
    except TRANSIENT_ERRORS as err:
        log.warning("could not conclude check run %s yet (%s)", check_run_id,
                    type(err).__name__)
        return False
    except GitHubError as err:
        if err.status_code in (401, 403, 404):
            log.debug("could not conclude check run %s: %s", check_run_id, err)
        else:
            log.exception("could not conclude check run %s", check_run_id)
    except Exception:  # the job's own outcome is the one to report
        log.exception("could not conclude check run %s", check_run_id)
    return True


async def finish(registry: RunRegistry, gh: GitHubClient, owner: str, name: str, run: OpenRun,
                 conclusion: str, reason: str, *, rerun_hint: bool = True) -> None:
    """`conclude` ``run``'s check run and forget the run; when GitHub fails transiently, leave
    the conclusion to the sweeper (`RunRegistry.mark_pending`)."""
    if await conclude(gh, owner, name, run.check_run_id, conclusion, reason,
                      rerun_hint=rerun_hint):
        await forget(registry, run)
        return
    if run.run_id:
        summary = conclusion_body(conclusion, reason, rerun_hint=rerun_hint)["output"]["summary"]
        try:
            await registry.mark_pending(run.run_id, conclusion, summary)
        except RedisError as exc:
            log.warning("check run %s stays in progress: Redis failed too (%s)",
                        run.check_run_id, type(exc).__name__)


async def forget(registry: RunRegistry, run: OpenRun) -> None:
    """Remove ``run``'s registry entry (its check run is concluded); a Redis error is logged
    (the sweeper removes the entry later without touching the concluded check run)."""
    if not run.run_id:
        return
    try:
        await registry.remove(run.run_id)
    except RedisError as exc:
        log.warning("could not remove run %s from the registry (%s)", run.run_id,
                    type(exc).__name__)


def stopped_reason(entry_attempts: int) -> str:
    """Return the explanation of a check run whose job's worker stopped on every try."""
    times = "once" if entry_attempts == 1 else f"{entry_attempts} times"
    return (f"The worker running this check stopped {times} before the run finished (killed, "
            "restarted or out of memory), so llmgate gave up on it.")

