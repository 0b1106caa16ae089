"""arq jobs: wire GitHub, git and the eval engine together; the logic lives in the services.

Each job takes one plain-JSON payload (`worker.contract`), is safe to run twice, and never leaves
its check run ``in_progress``: whatever happens after the check run is created, a ``finally``
concludes it.
"""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError

from worker.contract import ApprovePayload, GatePayload, RepoRef, RerunPayload
from worker.gate import (
    WRITE_PERMISSIONS,
    GateRequest,
    Services,
    commands,
    remember_base,
    retry_later,
    run_gate,
    untrusted,
)
from worker.github import GitHubClient, courtesy
from worker.runtime import current_job

log = logging.getLogger("llmgate.worker")

__all__ = ["Services", "approve_pull_request", "gate_pull_request", "rerun_from_comment"]


async def gate_pull_request(ctx: dict[str, Any], payload: GatePayload) -> dict[str, str]:
    """Gate one PR head against its base and publish the check run and the sticky comment.

    First records when the head arrived (the delivery's ``updated_at``), which is what an
    approve comment is bound by (`worker.gate.head_history`).

    Returns:
        ``{"conclusion": ..., "head_sha": ...}``, stored by arq as the job result.

    Raises:
        arq.worker.Retry: Redis could not record the head (full, or away), before the job's
            last try: no check run is opened yet, and the next try records it.
        redis.exceptions.RedisError: the same on the last try (before any check run).
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo = payload["repo"]
    try:
        await services.heads.record(f"{repo['owner']}/{repo['name']}", payload["pr_number"],
                                    payload["head_sha"], payload.get("updated_at", ""))
        await remember_base(services.redis, services.calibration, payload)
    except RedisError as err:  # a full Redis refuses the record (issue 32): try again later
        job = current_job()
        if job is None or job.last_try:
            raise
        raise retry_later(job, err) from err
    return await run_gate(services, gh, GateRequest(
        repo=payload["repo"], pr_number=payload["pr_number"], head_sha=payload["head_sha"],
        base_sha=payload["base_sha"], facts=untrusted.facts_from_payload(payload),
        draft=payload.get("draft", False), base_ref=payload["base_ref"]))


async def rerun_from_comment(ctx: dict[str, Any], payload: RerunPayload) -> dict[str, str]:
    """Handle ``/llmgate rerun``: check the commenter may write, react, and gate the PR afresh.

    The PR's current head and base are read from GitHub (the comment may be older than the last
    push). A commenter without write access gets no run and no reaction. A reaction or reply
    GitHub refuses (a locked conversation) is logged and the run goes on (`courtesy`). A
    closed pull request
    gets no run (its check run could cancel the same commit's check of an open pull request):
    a ``confused`` reaction and one short reply (within the reply limit of
    `worker.gate.commands.allow_reply`).
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo = payload["repo"]
    permission = await gh.get_permission(repo["owner"], repo["name"], payload["commenter"])
    if permission not in WRITE_PERMISSIONS:
        log.info("rerun refused: %s has %s permission", payload["commenter"], permission)
        return {"status": "refused", "permission": permission}
    pull = await gh.get_pull(repo["owner"], repo["name"], payload["pr_number"])
    if pull.state != "open":  # a check run here could cancel a commit an open PR shares
        await courtesy.react(gh, repo["owner"], repo["name"], payload["comment_id"], "confused")
        await _reply(services, gh, repo, payload["pr_number"], CLOSED_REPLY)
        return {"status": "closed"}
    await courtesy.react(gh, repo["owner"], repo["name"], payload["comment_id"], "+1")
    return await run_gate(services, gh, GateRequest(
        repo=repo, pr_number=payload["pr_number"], head_sha=pull.head_sha,
        base_sha=pull.base_sha, facts=untrusted.facts_from_pull(repo, pull),
        no_cache=payload.get("no_cache", False), base_ref=pull.base_ref))


async def approve_pull_request(ctx: dict[str, Any], payload: ApprovePayload) -> dict[str, str]:
    """Handle ``/llmgate approve`` or the "Approve and run" button: one run per approved head.

    A writer's first approval of the PR's current head SHA is stored and the head is gated
    (untrusted heads run only with an approval; see `worker.gate.trust`). Anyone else, a stale SHA
    or a second approval of the same head runs nothing. A comment approves the head the pull
    request had when it was written (`worker.gate.head_history`): one written before the
    current head was pushed runs nothing and gets a reply (within the reply limit of
    `worker.gate.commands.allow_reply`) naming the commit it approves and how to approve the
    head.
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    repo = payload["repo"]
    outcome = await untrusted.record_approval(gh, services.approvals, services.heads, payload)
    if outcome.reply:
        await _reply(services, gh, repo, payload["pr_number"], outcome.reply)
    pull = outcome.pull
    if pull is None:
        return {"status": outcome.status}
    return await run_gate(services, gh, GateRequest(
        repo=repo, pr_number=payload["pr_number"], head_sha=pull.head_sha,
        base_sha=pull.base_sha, facts=untrusted.facts_from_pull(repo, pull),
        base_ref=pull.base_ref))


#: The reply to ``/llmgate rerun`` on a closed pull request.
CLOSED_REPLY = ("llmgate runs nothing on a closed pull request: reopen it to gate its head "
                "again.")


async def _reply(services: Services, gh: GitHubClient, repo: RepoRef, pr_number: int,
                 body: str) -> None:
    if await commands.allow_reply(services.redis, f"{repo['owner']}/{repo['name']}", pr_number):
        await courtesy.reply(gh, repo["owner"], repo["name"], pr_number, body)
