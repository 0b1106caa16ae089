"""arq jobs of the events around a gate: re-runs, accept, merge groups, command replies, installs.

- `rerun_check`: GitHub's Re-run (``check_run``/``check_suite`` ``rerequested``) or the check
  run's Re-run button. Every open pull request whose head is still that commit is gated
  afresh, each against its own base and with its own check run and comment: the pull requests
  named by the payload plus those of every ``llmgate`` check run on the commit (its
  ``external_id`` ``pr:<n>``, which also covers forks, whose ``pull_requests`` GitHub leaves
  empty). Each becomes its own ``gate_pull_request`` job.
- `accept_regression`: `worker.gate.accept`.
- `gate_merge_group`: the merge queue's commit, gated against the group's base, no comment.
- `reply_to_command`: ``/llmgate help`` and unknown commands (`worker.gate.commands`).
- `installation_changed`: `worker.gate.installs`.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from arq.connections import ArqRedis

from worker.contract import (
    JOB_GATE_PULL_REQUEST,
    JOB_MERGE_GROUP,
    AcceptPayload,
    CommandPayload,
    GatePayload,
    InstallationPayload,
    MergeGroupPayload,
    RecheckPayload,
    event_job_id,
    external_target,
    gate_job_id,
    merge_group_external_id,
)
from worker.gate import (
    WRITE_PERMISSIONS,
    GateRequest,
    Services,
    accept,
    commands,
    installs,
    run_gate,
)
from worker.github import GitHubClient, GitHubError, courtesy

log = logging.getLogger("llmgate.worker")



async def _targets(gh: GitHubClient, payload: RecheckPayload) -> tuple[set[int], str]:
    """Return the pull request numbers and merge-group base to re-gate for ``payload``."""
    numbers, base = set(payload["pr_numbers"]), payload["merge_group_base"]
    if payload["source"] == "button":  # a button re-runs its own check run's pull request
        return numbers, base
    repo = payload["repo"]
    async for run in gh.list_check_runs(repo["owner"], repo["name"], payload["head_sha"]):
        number, merge_group_base = external_target(run.external_id)
        if number is not None:
            numbers.add(number)
        elif merge_group_base:
            base = base or merge_group_base
    return numbers, base


async def _gate_payload(gh: GitHubClient, payload: RecheckPayload,
                        number: int) -> GatePayload | None:
    """Return the gate job of pull request ``number``, or None when it is closed, gone or moved."""
    repo = payload["repo"]
    try:
        pull = await gh.get_pull(repo["owner"], repo["name"], number)
    except GitHubError as err:
        if err.status_code != 404:
            raise
        return None
    if pull.state != "open" or pull.head_sha != payload["head_sha"]:
        return None
    return GatePayload(delivery_id=payload["delivery_id"],
                       installation_id=payload["installation_id"], repo=repo, pr_number=number,
                       head_sha=pull.head_sha, base_sha=pull.base_sha, base_ref=pull.base_ref,
                       head_repo=pull.head_repo_full_name, author=pull.author_login)


def _other_app(services: Services, app_id: int) -> bool:
    """Whether a payload's App id names another App than this worker's (unknown: no)."""
    ours = services.config.app_id
    return bool(app_id) and ours.isdigit() and int(ours) != app_id


async def rerun_check(ctx: dict[str, Any], payload: RecheckPayload) -> dict[str, str]:
    """Queue a fresh gate of ``payload["head_sha"]`` for each of its open pull requests.

    Returns ``{"status": "queued", "pulls": "11,12", "merge_group": "yes"|"no"}``, or
    ``ignored`` (another App's check run) / ``refused`` (a button pressed without write access).
    """
    services: Services = ctx["services"]
    repo, head_sha = payload["repo"], payload["head_sha"]
    if _other_app(services, payload["app_id"]):
        return {"status": "ignored", "reason": f"check of App {payload['app_id']}"}
    gh = services.github(payload["installation_id"])
    if payload["source"] == "button":
        permission = await gh.get_permission(repo["owner"], repo["name"], payload["requester"])
        if permission not in WRITE_PERMISSIONS:
            log.info("re-run refused: %s has %s permission", payload["requester"], permission)
            return {"status": "refused", "permission": permission}
    numbers, base = await _targets(gh, payload)
    queue: ArqRedis = ctx["redis"]
    suffix = f"rerun-{payload['delivery_id']}"
    queued = []
    for number in sorted(numbers):
        gate = await _gate_payload(gh, payload, number)
        if gate is not None:
            await queue.enqueue_job(JOB_GATE_PULL_REQUEST, gate,
                                    _job_id=gate_job_id(repo, number, head_sha, suffix))
            queued.append(str(number))
    if base:
        group = MergeGroupPayload(delivery_id=payload["delivery_id"],
                                  installation_id=payload["installation_id"], repo=repo,
                                  head_sha=head_sha, base_sha=base, base_ref="", head_ref="")
        await queue.enqueue_job(JOB_MERGE_GROUP, group,
                                _job_id=event_job_id("merge_group", repo, f"{head_sha}:{suffix}"))
    return {"status": "queued", "pulls": ",".join(queued), "merge_group": "yes" if base else "no"}


async def accept_regression(ctx: dict[str, Any], payload: AcceptPayload) -> dict[str, str]:
    """Handle the "Accept regression" button (see `worker.gate.accept.accept_regression`)."""
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    return await accept.accept_regression(services.redis, gh, payload,
                                              functools.partial(services.bot_login, gh))


async def gate_merge_group(ctx: dict[str, Any], payload: MergeGroupPayload) -> dict[str, str]:
    """Gate a merge group's head SHA against its base SHA: a check run, no PR comment.

    The group's commit is trusted: GitHub built it in the base repository from pull requests
    a writer added to the queue, each of which passed its own gate (or was approved to run).
    """
    services: Services = ctx["services"]
    gh = services.github(payload["installation_id"])
    return await run_gate(services, gh, GateRequest(
        repo=payload["repo"], pr_number=0, head_sha=payload["head_sha"],
        base_sha=payload["base_sha"], comment=False, trusted=True,
        external_id=merge_group_external_id(payload["base_sha"])))


async def reply_to_command(ctx: dict[str, Any], payload: CommandPayload) -> dict[str, str]:
    """Post the command list on the pull request, unless its reply limit is reached."""
    services: Services = ctx["services"]
    repo = payload["repo"]
    repo_key = f"{repo['owner']}/{repo['name']}"
    if not await commands.allow_reply(services.redis, repo_key, payload["pr_number"]):
        log.info("no reply to %s on %s#%d: %d replies in the last %d s already",
                 payload["kind"], repo_key, payload["pr_number"], commands.MAX_REPLIES,
                 commands.REPLY_WINDOW_S)
        return {"status": "limited"}
    gh = services.github(payload["installation_id"])
    body = commands.reply_body(payload["kind"], payload["command"])
    comment_id = await courtesy.reply(gh, repo["owner"], repo["name"], payload["pr_number"],
                                      body)
    if comment_id is None:  # refused (a locked conversation): logged
        return {"status": "refused"}
    return {"status": "replied", "comment_id": str(comment_id)}


async def installation_changed(ctx: dict[str, Any], payload: InstallationPayload) -> dict[str, str]:
    """Record an installation or its repositories going away or coming back (Redis only)."""
    services: Services = ctx["services"]
    done = await installs.record(services.redis, payload)
    log.info("%s %s of installation %d: %s", payload["event"], payload["action"],
             payload["installation_id"], done)
    return {"status": done}


#: The job functions of one repository this module adds (`worker.main` registers them, and
#: `installation_changed`, which must run even for a removed installation).
EVENT_JOBS = (rerun_check, accept_regression, gate_merge_group, reply_to_command)
