"""arq jobs: wire GitHub, git and the eval engine together; the logic lives in the services.

Each job takes one plain-JSON payload (`worker.contract`), is safe to run twice, and never leaves
its check run ``in_progress``: whatever happens after the check run is created, a ``finally``
concludes it.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx
from redis.asyncio import Redis

from worker import report, untrusted
from worker.calibrate_job import CalibrationSchedule, remember_base, with_calibration_note
from worker.checkout import Checkouts, GitError
from worker.contract import ApprovePayload, GatePayload, RepoRef, RerunPayload
from worker.evals.context import EvalContext
from worker.evals.types import ExecutionError, GateReport
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.checks import CheckOutput, clip_text, complete_check_run
from worker.github.client import GitHubClient
from worker.github.comments import upsert_sticky_comment
from worker.metrics import record_call, record_gate_report
from worker.pipeline import gate_trees
from worker.redact import Redactor
from worker.settings import WorkerConfig
from worker.trust import ApprovalStore, PullFacts

log = logging.getLogger("llmgate.worker")

#: Repository permissions that may ask for a re-run (GitHub's role names and legacy values).
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
#: Why a check run was concluded ``cancelled``: its job's task was cancelled.
STOPPED_REASON = ("The run was stopped: its worker shut down (the job is queued again and a new "
                  "check run follows) or it ran past the job time limit.")
#: How long one PR's sticky comment stays locked while it is found and edited, seconds.
COMMENT_LOCK_TIMEOUT_S = 60


@dataclass
class Services:
    """Clients shared by every job of one worker process (made once in ``on_startup``)."""

    config: WorkerConfig
    http: httpx.AsyncClient
    tokens: InstallationTokenCache
    checkouts: Checkouts
    redis: Redis
    redactor: Redactor = field(default_factory=Redactor)
    calibration: CalibrationSchedule | None = None  # scheduled calibration (worker/calibrate_job)

    @property
    def approvals(self) -> ApprovalStore:
        """Writers' approvals of untrusted heads (`worker.trust`), in this worker's Redis."""
        return ApprovalStore(self.redis)

    def github(self, installation_id: int) -> GitHubClient:
        """Return a client authenticated as the given installation."""
        creds = AppCredentials(self.config.app_id, self.config.private_key)
        return GitHubClient(self.http, self.config.api_url, creds, self.tokens, installation_id)


async def gate_pull_request(ctx: dict[str, Any], payload: GatePayload) -> dict[str, str]:
    """Gate one PR head against its base and publish the check run and the sticky comment.

    Returns:
        ``{"conclusion": ..., "head_sha": ...}``, stored by arq as the job result.
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    await remember_base(services.redis, services.calibration, payload)
    return await _gate(services, gh, payload["repo"], payload["pr_number"],
                       payload["head_sha"], payload["base_sha"],
                       untrusted.facts_from_payload(payload))


async def rerun_from_comment(ctx: dict[str, Any], payload: RerunPayload) -> dict[str, str]:
    """Handle ``/llmgate rerun``: check the commenter may write, react, and gate the PR afresh.

    The PR's current head and base are read from GitHub (the comment may be older than the last
    push). A commenter without write access gets no run and no reaction.
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo = payload["repo"]
    permission = await gh.get_permission(repo["owner"], repo["name"], payload["commenter"])
    if permission not in WRITE_PERMISSIONS:
        log.info("rerun refused: %s has %s permission", payload["commenter"], permission)
        return {"status": "refused", "permission": permission}
    await gh.add_reaction(repo["owner"], repo["name"], payload["comment_id"], "+1")
    pull = await gh.get_pull(repo["owner"], repo["name"], payload["pr_number"])
    return await _gate(services, gh, repo, payload["pr_number"], pull.head_sha, pull.base_sha,
                       untrusted.facts_from_pull(repo, pull))


async def approve_pull_request(ctx: dict[str, Any], payload: ApprovePayload) -> dict[str, str]:
    """Handle ``/llmgate approve`` or the "Approve and run" button: one run per approved head.

    A writer's first approval of the PR's current head SHA is stored and the head is gated
    (untrusted heads run only with an approval; see `worker.trust`). Anyone else, a stale SHA or
    a second approval of the same head runs nothing.
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    status, pull = await untrusted.record_approval(gh, services.approvals, payload)
    if pull is None:
        return {"status": status}
    repo = payload["repo"]
    return await _gate(services, gh, repo, payload["pr_number"], pull.head_sha, pull.base_sha,
                       untrusted.facts_from_pull(repo, pull))


async def _gate(
    services: Services, gh: GitHubClient, repo: RepoRef, pr_number: int,
    head_sha: str, base_sha: str, facts: PullFacts | None = None,
) -> dict[str, str]:
    owner, name = repo["owner"], repo["name"]
    check_run_id = await gh.create_check_run(owner, name, head_sha, status="in_progress", output={
        "title": "llmgate: running", "summary": f"Running the eval suites at `{head_sha[:7]}`."})
    completed = False
    reason = "The eval run could not finish (see the worker logs)."
    conclusion = "failure"
    try:
        verdict = await untrusted.verdict_for(gh, services.checkouts, services.approvals, repo,
                                              pr_number, head_sha, base_sha, facts)
        if verdict.decision != "run":  # untrusted and not approved: nothing of the head runs
            await untrusted.conclude_waiting(gh, repo, check_run_id, pr_number, head_sha, verdict)
            completed = True
            return {"conclusion": "action_required", "head_sha": head_sha}
        try:
            gate_report = services.redactor.redact_value(
                await _run(services, gh, repo, head_sha, base_sha))
        except ExecutionError as err:
            reason = f"The eval run could not finish: {err}"
            raise
        record_gate_report(gate_report)
        gate_report = services.redactor.redact_value(
            await with_calibration_note(services.redis, repo, gate_report))
        await complete_check_run(
            gh, owner, name, check_run_id, gate_report.conclusion,
            CheckOutput(report.check_title(gate_report), report.check_summary(gate_report),
                        report.check_text(gate_report)),
            report.annotations(gate_report))
        completed = True
        body = report.comment_body(gate_report, head_sha=head_sha, base_sha=base_sha)
        async with services.redis.lock(f"llmgate:lock:comment:{owner}/{name}#{pr_number}",
                                       timeout=COMMENT_LOCK_TIMEOUT_S):
            await upsert_sticky_comment(gh, owner, name, pr_number, body)
        return {"conclusion": gate_report.conclusion, "head_sha": head_sha}
    except asyncio.CancelledError:
        conclusion, reason = "cancelled", STOPPED_REASON
        raise
    finally:
        if not completed:
            await _conclude_aborted(gh, owner, name, check_run_id,
                                    services.redactor.redact(reason), conclusion)


async def _run(
    services: Services, gh: GitHubClient, repo: RepoRef, head_sha: str, base_sha: str
) -> GateReport:
    token = await gh.installation_token()
    services.redactor.add(token)
    key = f"{repo['owner']}/{repo['name']}"
    try:
        async with AsyncExitStack() as stack:
            head_root = await stack.enter_async_context(
                services.checkouts.worktree(key, repo["clone_url"], head_sha, token))
            base_root = await stack.enter_async_context(
                services.checkouts.worktree(key, repo["clone_url"], base_sha, token))
            evals = EvalContext(redis=services.redis, namespace=key,  # cache per repository
                                on_call=record_call)  # provider calls, cache hits, USD
            return await gate_trees(head_root, base_root, head_sha=head_sha, base_sha=base_sha,
                                    evals=evals)
    except GitError as err:
        raise ExecutionError(f"git failed: {err}") from err
    except ValueError as err:  # a SHA, URL or repository name git must not be given
        raise ExecutionError(str(err)) from err


async def _conclude_aborted(
    gh: GitHubClient, owner: str, name: str, check_run_id: int, reason: str,
    conclusion: str = "failure",
) -> None:
    """Conclude a check run whose job failed or was stopped, so a required check never hangs."""
    title = f"llmgate: the run {'was stopped' if conclusion == 'cancelled' else 'failed'}"
    try:
        await gh.update_check_run(owner, name, check_run_id, {
            "status": "completed", "conclusion": conclusion,
            "output": {"title": title,
                       "summary": f"{clip_text(reason, 2000)}\n\n"
                                  "Comment `/llmgate rerun` to try again."}})
    except Exception:  # the job's own error is the one to report
        log.exception("could not conclude check run %s", check_run_id)
