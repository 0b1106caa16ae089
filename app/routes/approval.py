"""Approvals of untrusted pull request heads: ``/llmgate approve`` and the check run's button.

A comment approves only when its first line is exactly ``/llmgate approve``, optionally with the
head SHA (7 to 40 lowercase hex digits) to pin the commit: ``/llmgate approve 1a2b3c4``. Text
on later lines is free; anything else on the first line, a quote (``> /llmgate approve``), a
code block or a mention of the command inside a sentence approves nothing. The button is the
``requested_action`` of llmgate's own check run (identifier ``approve``); that run's
``external_id`` (``pr:<number>``) names the pull request, since GitHub leaves
``check_run.pull_requests`` empty for forks. Whether the approver may write is checked by the
worker, which can call GitHub. A comment's ``created_at`` goes with it: the comment approves only
the head the pull request had when it was written (`worker.gate.head_history`). The other
buttons (``rerun``, ``accept``) are planned by `app.routes.checks`: this module's handler is the
one ``requested_action`` handler.
"""

from __future__ import annotations

import re

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.checks import plan_check_action
from app.routes.decision import Decision
from app.routes.payload import (
    LOGIN_PATTERN,
    NO_INSTALLATION,
    SHA_PATTERN,
    get_id,
    get_obj,
    get_str,
    get_time,
    installation_id,
    installed,
    repo_ref,
)
from worker.contract import (
    ACCEPT_ACTION,
    APPROVE_ACTION,
    APPROVE_COMMAND,
    CHECK_NAME,
    JOB_APPROVE,
    RERUN_ACTION,
    ApprovePayload,
    approve_job_id,
    external_target,
)

router = Router()
_APPROVE_LINE = re.compile(re.escape(APPROVE_COMMAND) + r"(?: ([0-9a-f]{7,40}))?")


def parse_approve(body: str) -> str | None:
    """Return the SHA (prefix) a comment approves, "" for "the current head", None if none.

    ``"/llmgate approve"`` gives ``""``; ``"/llmgate approve 1a2b3c4\\nLGTM"`` gives
    ``"1a2b3c4"``; ``"/llmgate approve please"``, ``"/llmgate approved"``,
    ``"> /llmgate approve"`` and ``"ok /llmgate approve"`` give None.
    """
    first_line = body.strip().split("\n", 1)[0].strip()
    match = _APPROVE_LINE.fullmatch(first_line)
    if match is None:
        return None
    return match.group(1) or ""


def plan_comment_approval(event: Event, decision: Decision, sha: str) -> None:
    """Plan the approval job of a ``/llmgate approve`` comment already found to be one.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if (install_id := installed(data, decision)) is None:
        return
    repo = repo_ref(data)
    approval = ApprovePayload(
        delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
        pr_number=get_id(data, "issue.number"),
        approver=get_str(data, "comment.user.login", LOGIN_PATTERN), source="comment",
        head_sha=sha, comment_id=get_id(data, "comment.id"))
    if created_at := get_time(data, "comment.created_at"):  # absent: the worker fails closed
        approval["comment_created_at"] = created_at
    job_id = approve_job_id(repo, approval["pr_number"], comment_id=approval["comment_id"])
    decision.enqueue(JOB_APPROVE, approval, job_id)


@router.register("check_run", action="requested_action")
async def approve_from_button(event: Event, decision: Decision) -> None:
    """Plan an approval when someone presses "Approve and run" on llmgate's check run.

    The Re-run and Accept regression buttons go to `app.routes.checks.plan_check_action`.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if (identifier := get_str(data, "requested_action.identifier")) in (RERUN_ACTION,
                                                                         ACCEPT_ACTION):
        plan_check_action(event, decision, identifier)
        return
    pr_number, _ = external_target(get_obj(data, "check_run").get("external_id"))
    if identifier != APPROVE_ACTION:
        decision.ignore("unknown requested action")
    elif get_str(data, "check_run.name") != CHECK_NAME or pr_number is None:
        decision.ignore("not an llmgate check run waiting for approval")
    elif get_str(data, "sender.type") == "Bot":
        decision.ignore("requested by a bot")
    elif (install_id := installation_id(data)) is None:
        decision.ignore(NO_INSTALLATION)
    else:
        repo, head_sha = repo_ref(data), get_str(data, "check_run.head_sha", SHA_PATTERN)
        approver = get_str(data, "sender.login", LOGIN_PATTERN)
        approval = ApprovePayload(
            delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
            pr_number=pr_number, approver=approver, source="button",
            head_sha=head_sha, comment_id=0)
        decision.enqueue(JOB_APPROVE, approval, approve_job_id(
            repo, approval["pr_number"], head_sha=head_sha, approver=approver))
