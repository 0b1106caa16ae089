"""Run one gate request from check run to sticky comment, never leaving the check in progress.

`run_gate` creates the ``llmgate`` check run on the head SHA, decides trust, evaluates base and
head (`worker.gate_run`), completes the check run with annotations and edits the PR's sticky
comment. Whatever happens after the check run is created, a ``finally`` concludes it.
"""

from __future__ import annotations

import asyncio
import logging

from worker import report, untrusted
from worker.calibrate_job import with_calibration_note
from worker.evals.types import ExecutionError
from worker.gate_request import GateRequest
from worker.gate_run import evaluate
from worker.github.checks import CheckOutput, clip_text, complete_check_run
from worker.github.client import GitHubClient
from worker.github.comments import upsert_sticky_comment
from worker.metrics import record_gate_report
from worker.services import Services

log = logging.getLogger("llmgate.worker")

#: Why a check run was concluded ``cancelled``: its job's task was cancelled.
STOPPED_REASON = ("The run was stopped: its worker shut down (the job is queued again and a new "
                  "check run follows) or it ran past the job time limit.")
#: How long one PR's sticky comment stays locked while it is found and edited, seconds.
COMMENT_LOCK_TIMEOUT_S = 60


async def run_gate(services: Services, gh: GitHubClient, request: GateRequest) -> dict[str, str]:
    """Gate ``request`` and publish the check run and the sticky comment.

    Returns:
        ``{"conclusion": ..., "head_sha": ...}``, stored by arq as the job result.

    Raises:
        ExecutionError: the run itself failed (the check run is concluded ``failure`` first).
        asyncio.CancelledError: the job was stopped (the check run is concluded ``cancelled``).
    """
    repo, pr_number, head_sha = request.repo, request.pr_number, request.head_sha
    owner, name = repo["owner"], repo["name"]
    check_run_id = await gh.create_check_run(owner, name, head_sha, status="in_progress", output={
        "title": "llmgate: running", "summary": f"Running the eval suites at `{head_sha[:7]}`."})
    completed = False
    reason = "The eval run could not finish (see the worker logs)."
    conclusion = "failure"
    try:
        verdict = await untrusted.verdict_for(gh, services.checkouts, services.approvals, repo,
                                              pr_number, head_sha, request.base_sha,
                                              request.facts)
        if verdict.decision != "run":  # untrusted and not approved: nothing of the head runs
            await untrusted.conclude_waiting(gh, repo, check_run_id, pr_number, head_sha, verdict)
            completed = True
            return {"conclusion": "action_required", "head_sha": head_sha}
        try:
            gate_report = services.redactor.redact_value(await evaluate(services, gh, request))
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
        body = report.comment_body(gate_report, head_sha=head_sha, base_sha=request.base_sha)
        async with services.redis.lock(f"llmgate:lock:comment:{owner}/{name}#{pr_number}",
                                       timeout=COMMENT_LOCK_TIMEOUT_S):
            await upsert_sticky_comment(gh, owner, name, pr_number, body)
        return {"conclusion": gate_report.conclusion, "head_sha": head_sha}
    except asyncio.CancelledError:
        conclusion, reason = "cancelled", STOPPED_REASON
        raise
    finally:
        if not completed:
            await conclude_aborted(gh, owner, name, check_run_id,
                                   services.redactor.redact(reason), conclusion)


async def conclude_aborted(
    gh: GitHubClient, owner: str, name: str, check_run_id: int, reason: str,
    conclusion: str = "failure",
) -> None:
    """Conclude a check run whose job failed or was stopped, so a required check never hangs.

    ``conclusion`` is a GitHub check conclusion (``failure``, ``cancelled``, ``timed_out``);
    ``reason`` becomes the output summary (clipped to 2,000 characters). A failure to reach
    GitHub is logged, never raised: the job's own error is the one to report.
    """
    title = f"llmgate: the run {'was stopped' if conclusion == 'cancelled' else 'failed'}"
    try:
        await gh.update_check_run(owner, name, check_run_id, {
            "status": "completed", "conclusion": conclusion,
            "output": {"title": title,
                       "summary": f"{clip_text(reason, 2000)}\n\n"
                                  "Comment `/llmgate rerun` to try again."}})
    except Exception:  # the job's own error is the one to report
        log.exception("could not conclude check run %s", check_run_id)
