"""Run one gate request from check run to sticky comment, never leaving the check in progress.

`run_gate` gives up at once, writing no check run, when a newer push, a new base branch or a
close superseded the request before it started (`worker.gate.supersede`); otherwise it opens
the ``llmgate`` check run on the head SHA (or reuses the one an earlier try of its job opened:
`worker.gate.check_run`; the check and the opening hold one lock per head commit,
`worker.runtime.locks.open_lock_key`), skips a draft when the base config says so
(`worker.gate.drafts`), decides trust, concludes ``neutral`` with no comment a repository without
any config at the merge base and at head (`worker.gate.evaluate.unconfigured`; for an untrusted head
not approved yet, which is not fetched, at the base's tip), evaluates base and head
(`worker.gate.evaluate`: every config of the repository, `worker.pipeline.plan`; its progress per
suite and side shown in the check run meanwhile, `worker.gate.progress`), writes the PR's
sticky comment, completes the check runs of configs that report on their own
(`worker.gate.config_checks`) and completes the ``llmgate`` check run with annotations
(`worker.report.multi`). What base and head's evaluation found is kept in Redis until the
check run is completed (`worker.gate.results`), so a later try of the job, after GitHub or Redis
failed while it published, only publishes: it never pays for the calls again (issue 31). Right
before each of those it asks afresh whether it is still
wanted (`Supersede.reason` with ``fresh``: GitHub is asked again whenever the web process's
record does not name this head and base unmarked), so a run never publishes a verdict about
a head or base the pull request has left, passing or not (issue 30). A run GitHub showed on
another base of its own head, dropped or cancelled, then makes sure that base gets gated
(`worker.gate.regate.ensure_gated`). Every way out but one concludes the check run:
``cancelled`` when superseded, ``timed_out`` past the job's time limit or when its worker
stopped on the last try, ``failure`` when the run failed. The one exception is a try that arq
will repeat (a stopping worker, a transient failure): the check run stays ``in_progress`` for
the next try, and the sweeper (`worker.gate.sweeper`) concludes it if arq gives the job up.
"""

from __future__ import annotations

import asyncio
import logging
import time

from redis.exceptions import RedisError

from worker.errors import ExecutionError
from worker.gate import accept, drafts, history_record, regate, results, shared_head, untrusted
from worker.gate.calibration import with_calibration_note
from worker.gate.check_run import (
    TRANSIENT_ERRORS,
    OpenRun,
    finish,
    forget,
    open_run,
    retry_later,
    running_output,
    stopped_reason,
)
from worker.gate.config_checks import publish_config_checks
from worker.gate.evaluate import evaluate_configs, unconfigured
from worker.gate.progress import updating
from worker.gate.registry import RunRegistry
from worker.gate.request import GateRequest
from worker.gate.services import Services
from worker.gate.supersede import Supersede, Superseded, supervise
from worker.gate.trend_read import read_trends
from worker.gate.trust import Verdict
from worker.github import (
    CheckOutput,
    GitHubClient,
    GitHubError,
    complete_check_run,
    upsert_sticky_comment,
)
from worker.pipeline import NO_CONFIG_HEADLINE, GateProgress, MultiReport, unconfigured_report
from worker.report import multi as report_multi
from worker.report import redact_report, render_html, store_report
from worker.runtime import JobRef, current_job, locks, record_gate_report

log = logging.getLogger("llmgate.worker")

#: Why a check run was concluded ``cancelled`` when its task was cancelled outside an arq job.
STOPPED_REASON = "The run was stopped: its worker shut down."
#: The verdict of a `GateRequest.trusted` head (a merge group's commit): it runs.
TRUSTED = Verdict("run", True)


async def run_gate(services: Services, gh: GitHubClient, request: GateRequest) -> dict[str, str]:
    """Gate ``request`` and publish the check run and the sticky comment.

    Returns:
        ``{"conclusion": ..., "head_sha": ...}`` (plus ``"reason"`` when superseded or timed
        out), stored by arq as the job result.

    Raises:
        arq.worker.Retry: a transient failure (GitHub 5xx or rate limit, Redis) before the
            job's last try; the check run stays ``in_progress`` for the next try.
        ExecutionError: the run itself failed (the check run is concluded ``failure`` first).
        GitHubError, redis.exceptions.RedisError: on the last try (concluded ``failure``).
        asyncio.CancelledError: the worker is stopping (arq runs the job again; on the last
            try the check run is concluded ``timed_out`` first).
    """
    job, registry = current_job(), RunRegistry(services.redis)
    watch = Supersede(services.redis, gh, request)
    try:
        async with locks.held(services.redis, locks.open_lock_key(
                request.repo["owner"], request.repo["name"], request.head_sha),
                locks.OPEN_LOCK_TTL_S):
            reason = await watch.reason()
            if reason is not None:
                return await _cancel_unstarted(services, gh, request, job, watch, reason)
            await _record(services, request, shared_head.PENDING)  # blocks the head's others
            run = await open_run(registry, gh, request, job)
    except TRANSIENT_ERRORS as err:  # no check run of this try to conclude (LockError too)
        if job is None or job.last_try:
            raise
        raise retry_later(job, err) from err
    return await _run(services, gh, request, job, watch, run)


async def _cancel_unstarted(services: Services, gh: GitHubClient, request: GateRequest,
                            job: JobRef | None, watch: Supersede,
                            reason: str) -> dict[str, str]:
    """Drop a queued run that a newer push, a new base or a close superseded before it started:
    no check run is written for it (issue 14: a burst of pushes must not cost two paced writes
    per superseded head; the pull request shows its newest head's check). Only a check run an
    earlier try of this job opened is concluded ``cancelled``, so none stays in progress. When
    GitHub shows the head on another base, that base is gated unless it is already (`_regate`).
    """
    registry = RunRegistry(services.redis)
    entry = None if job is None else await registry.get(job.job_id, request.pr_number)
    if entry is not None:
        await finish(registry, gh, entry.owner, entry.name,
                     OpenRun(entry.check_run_id, entry.run_id), "cancelled", reason,
                     rerun_hint=False)
    log.info("PR #%s @%s not run: %s", request.pr_number, request.head_sha[:7], reason)
    await _regate(services, gh, request, job, watch)
    return {"conclusion": "cancelled", "head_sha": request.head_sha, "reason": reason}


async def _regate(services: Services, gh: GitHubClient, request: GateRequest,
                  job: JobRef | None, watch: Supersede) -> None:
    """After GitHub showed the run's own head on another base (`Supersede.same_head`) and the
    run's check run, if any, is concluded: queue a gate of that base unless one is there or
    coming (`worker.gate.regate.ensure_gated`). Otherwise the pull request's newest ``llmgate``
    check could stay this run's, about a base it left (issue 30). A Redis or GitHub failure is
    logged, not raised: the reconciler compares the bases again (`worker.gate.reconcile`)."""
    if not watch.same_head or watch.pull is None:
        return
    try:
        await regate.ensure_gated(services.redis, gh, request, watch.pull,
                                  "" if job is None else job.job_id)
    except (RedisError, GitHubError, OSError) as err:
        log.warning("PR #%s @%s: could not make sure base %s is gated (%s); the reconciler "
                    "looks again", request.pr_number, request.head_sha[:7],
                    watch.pull.base_ref, type(err).__name__)


async def _run(services: Services, gh: GitHubClient, request: GateRequest, job: JobRef | None,
               watch: Supersede, run: OpenRun) -> dict[str, str]:
    """Run the gate under the supersede watch and the job's time limit; conclude the check."""
    head_sha = request.head_sha
    ending: tuple[str, str, bool] | None = ("failure", "The eval run could not finish (see the "
                                            "worker logs).", True)
    finished = False  # the check run is concluded: forget the run
    superseded = False  # cancelled: once concluded, make sure the base it lost is gated
    try:
        async with asyncio.timeout(None if job is None else job.remaining_s()) as limit:
            result = await supervise(_gate(services, gh, request, run.check_run_id, watch,
                                           job), watch)
        ending, finished = None, True  # _gate concluded the check run
        return result
    except Superseded as err:
        ending, superseded = ("cancelled", err.reason, False), True
        return {"conclusion": "cancelled", "head_sha": head_sha, "reason": err.reason}
    except TimeoutError:
        if job is None or not limit.expired():
            raise
        reason = (f"The run took longer than the job time limit ({job.limits.job_timeout_s} s, "
                  "`LLMGATE_JOB_TIMEOUT_S` of the worker).")
        ending = ("timed_out", reason, True)
        return {"conclusion": "timed_out", "head_sha": head_sha, "reason": reason}
    except asyncio.CancelledError:
        ending = ("cancelled", STOPPED_REASON, True) if job is None else \
            ("timed_out", stopped_reason(job.attempt), True) if job.last_try else None
        raise
    except TRANSIENT_ERRORS as err:
        if job is not None and not job.last_try:
            ending = None  # the next try reuses the check run
            raise retry_later(job, err) from err
        ending = ("failure", f"The run could not finish: GitHub or Redis kept failing "
                             f"({type(err).__name__}).", True)
        raise
    except ExecutionError as err:
        ending = ("failure", f"The eval run could not finish: {err}", True)
        raise
    finally:
        await _close(services, gh, request, run, ending, finished)
        if superseded:
            await _regate(services, gh, request, job, watch)


async def _close(services: Services, gh: GitHubClient, request: GateRequest, run: OpenRun,
                 ending: tuple[str, str, bool] | None, finished: bool) -> None:
    """Conclude ``run``'s check run with ``ending`` (conclusion, reason, whether to hint at a
    re-run) and forget it; with no ending, only forget it when ``finished`` (`_gate` concluded
    it), else leave it for the job's next try."""
    registry = RunRegistry(services.redis)
    if ending is not None:
        conclusion, reason, hint = ending
        await finish(registry, gh, request.repo["owner"], request.repo["name"], run, conclusion,
                     services.redactor.redact(reason), rerun_hint=hint)
    elif finished:
        await forget(registry, run)


async def _gate(services: Services, gh: GitHubClient, request: GateRequest, check_run_id: int,
                watch: Supersede, job: JobRef | None) -> dict[str, str]:
    """Skip a draft, decide trust, evaluate, write the comment, complete the check runs."""
    started_s = time.monotonic()  # the history's duration (worker/gate/history_record.py)
    repo, pr_number, head_sha = request.repo, request.pr_number, request.head_sha
    owner, name = repo["owner"], repo["name"]
    if request.draft and await drafts.read_base_drafts(
            services.checkouts, repo, request.base_sha, await gh.installation_token()) == "skip":
        return await _conclude_draft(services, gh, request, check_run_id, watch)
    verdict = TRUSTED if request.trusted else await untrusted.verdict_for(
        gh, services.checkouts, services.approvals, repo, pr_number, head_sha,
        request.base_sha, request.facts)
    if await unconfigured(services, gh, request, head_runs=verdict.decision == "run"):
        return await _conclude_unconfigured(services, gh, request, check_run_id,
                                            watch)  # no red PRs
    if verdict.decision != "run":  # untrusted and not approved: nothing of the head runs
        return await _conclude_waiting(services, gh, request, check_run_id, watch, verdict)
    kept = None if job is None else results.results_key(request, job.job_id)
    multi = None if kept is None else await results.load(services.redis, kept)
    if multi is None:  # else an earlier try evaluated it: publish only (issue 31)
        multi = await _evaluate(services, gh, request, check_run_id, job)
        if kept is not None:
            await results.store(services.redis, kept, multi)
    gate_report = decided = multi.merged()  # every config's verdict in one report
    gate_report = services.redactor.redact_value(
        await with_calibration_note(services.redis, repo, gate_report))
    gate_report = await accept.prepare_report(services.redis, request, check_run_id,
                                              gate_report)  # Accept regression, its notes
    multi = multi.with_notes(gate_report.notes)  # calibration, an earlier acceptance
    trends = await read_trends(services.redis, f"{owner}/{name}", multi)  # 1 s
    if request.comment:  # a merge group has no pull request to comment on
        body = report_multi.comment_body(multi, head_sha=head_sha, base_sha=request.base_sha,
                                         trends=trends)
        await _write_comment(services, gh, request, body, watch)
    await _still_wanted(watch)
    await publish_config_checks(RunRegistry(services.redis), gh, request, job, multi,
                                services.reports, trends)  # settings.checks: per_config only
    async with shared_head.held(services.redis, repo, head_sha):  # one head, several PRs
        await _still_wanted(watch)  # GitHub shows the newest check run: never an old base's
        own = report_multi.check_output(multi, head_sha, trends)
        conclusion, output = await _shared(services, gh, request, check_run_id,
                                           gate_report.conclusion, own)
        details_url = await store_report(services.reports, output, lambda: render_html(
            multi, head_sha, request.base_sha), f"{owner}/{name}")  # LLMGATE_PUBLIC_URL
        await complete_check_run(
            gh, owner, name, check_run_id, conclusion, output,
            report_multi.check_annotations(multi), accept.check_actions(request, gate_report),
            details_url=details_url)
    record_gate_report(decided)  # once published: a try that lost its lease counts nothing
    if kept is not None:
        await results.forget(services.redis, kept)
    await history_record.gate_completed(  # what was published; never raises (issue 35)
        services, request, multi, gate_report, history_record.Published(
            check_run_id, conclusion, own.title, output.title, details_url), started_s)
    return {"conclusion": conclusion, "head_sha": head_sha}


async def _conclude_draft(services: Services, gh: GitHubClient, request: GateRequest,
                          check_run_id: int, watch: Supersede) -> dict[str, str]:
    """Conclude a draft's check run ``skipped`` (base's config skips drafts,
    `worker.gate.drafts`), unless the run is no longer wanted (`_still_wanted`)."""
    await _still_wanted(watch)
    await drafts.conclude_skipped(gh, request.repo, check_run_id, request.base_sha)
    await _record(services, request, "skipped", check_run_id)
    return {"conclusion": "skipped", "head_sha": request.head_sha}


async def _conclude_waiting(services: Services, gh: GitHubClient, request: GateRequest,
                            check_run_id: int, watch: Supersede,
                            verdict: Verdict) -> dict[str, str]:
    """Conclude the check run of an untrusted head not approved yet ``action_required``
    (`worker.gate.untrusted.conclude_waiting`: nothing of the head runs), unless the run is no
    longer wanted (`_still_wanted`)."""
    await _still_wanted(watch)
    await untrusted.conclude_waiting(gh, request.repo, check_run_id, request.pr_number,
                                     request.head_sha, verdict)
    await _record(services, request, "action_required", check_run_id)
    return {"conclusion": "action_required", "head_sha": request.head_sha}


async def _evaluate(services: Services, gh: GitHubClient, request: GateRequest,
                    check_run_id: int, job: JobRef | None) -> MultiReport:
    """Evaluate base and head, their progress shown in the running check run, and return the
    reports redacted (secrets, and what a `pii` assertion found), as they are published."""
    progress = GateProgress(time.monotonic)  # per suite and side, in the running check run
    async with updating(gh, request.repo["owner"], request.repo["name"], check_run_id,
                        running_output(request.head_sha, job), progress):
        multi = await evaluate_configs(services, gh, request, progress)
    return redact_report(multi, services.redactor)  # keys, then what a `pii` assertion found


async def _still_wanted(watch: Supersede) -> None:
    """Ask afresh, right before the run publishes, whether it is still wanted
    (`Supersede.reason` with ``fresh``: what GitHub said earlier in the run does not count).

    Raises:
        Superseded: a newer push, a new base branch or a close came first.
        redis.exceptions.RedisError, GitHubError: Redis or the confirming request failed.
    """
    reason = await watch.reason(fresh=True)
    if reason is not None:
        raise Superseded(reason)


async def _record(services: Services, request: GateRequest, conclusion: str,
                  check_run_id: int = 0) -> None:
    """Record a pull request's own verdict on its head (`worker.gate.shared_head`) without
    publishing the head's shared one; a merge group's run (no pull request) records none."""
    if request.comment and request.pr_number > 0:
        await shared_head.record(services.redis, request.repo, request.head_sha, shared_head.Entry(
            request.pr_number, conclusion, request.base_ref, check_run_id=check_run_id))


async def _shared(services: Services, gh: GitHubClient, request: GateRequest,
                  check_run_id: int, conclusion: str,
                  output: CheckOutput) -> tuple[str, CheckOutput]:
    """Return the conclusion and output of the ``llmgate`` check run: the most blocking
    verdict of the open pull requests with this head (`worker.gate.shared_head.settle`, under its
    lock); a merge group's run (no pull request) keeps its own."""
    if not request.comment or request.pr_number <= 0:
        return conclusion, output
    own = shared_head.Entry(request.pr_number, conclusion, request.base_ref, output.title,
                            check_run_id)
    return await shared_head.settle(services.redis, gh, request.repo, request.head_sha, own,
                                    output)

async def _conclude_unconfigured(services: Services, gh: GitHubClient, request: GateRequest,
                                 check_run_id: int, watch: Supersede) -> dict[str, str]:
    """Conclude the check run ``neutral`` ("no llmgate config"), writing no comment, unless
    the run is no longer wanted (`_still_wanted`)."""
    async with shared_head.held(services.redis, request.repo, request.head_sha):
        await _still_wanted(watch)
        conclusion, output = await _shared(services, gh, request, check_run_id, "neutral",
                                           report_multi.check_output(unconfigured_report(),
                                                                     request.head_sha))
        await complete_check_run(gh, request.repo["owner"], request.repo["name"],
                                 check_run_id, conclusion, output, [])
    log.info("PR #%s @%s: no llmgate config at base or head (neutral)", request.pr_number,
             request.head_sha[:7])
    return {"conclusion": conclusion, "head_sha": request.head_sha, "reason": NO_CONFIG_HEADLINE}


async def _write_comment(services: Services, gh: GitHubClient, request: GateRequest, body: str,
                         watch: Supersede) -> None:
    """Create or edit the sticky comment, unless a newer head or base superseded this run.

    Raises:
        Superseded: a newer push, a new base branch or a close came first (checked under the
            comment lock, afresh: `_still_wanted`, so an older head or base never overwrites a
            newer run's comment).
        GitHubUnavailable, GitHubRateLimited: transient (the job is retried). Any other
            GitHub refusal is logged and the check run is still completed.
    """
    owner, name = request.repo["owner"], request.repo["name"]
    async with locks.held(services.redis, locks.comment_lock_key(owner, name, request.pr_number),
                          locks.COMMENT_LOCK_TTL_S):
        await _still_wanted(watch)
        try:
            await upsert_sticky_comment(gh, owner, name, request.pr_number, body,
                                        bot_login=await services.bot_login(gh))
        except TRANSIENT_ERRORS:
            raise
        except GitHubError as err:
            if err.status_code == 401:  # the token was revoked: the installation is gone
                raise
            log.warning("PR #%s: the sticky comment was not written (%s)", request.pr_number,
                        err)
