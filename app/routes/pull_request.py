"""``pull_request`` events: gate a PR head when it is opened, pushed to, reopened, made ready or
retargeted to another base branch; record the PR's newest head and base branch (or that it
closed) so workers drop runs of older heads or of the old base."""

from __future__ import annotations

from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.decision import Decision
from app.routes.payload import (
    FULL_NAME_PATTERN,
    LOGIN_PATTERN,
    REF_PATTERN,
    SHA_PATTERN,
    get_id,
    get_obj,
    get_str,
    get_time,
    installed,
    repo_ref,
)
from worker.contract import (
    JOB_GATE_PULL_REQUEST,
    GatePayload,
    gate_job_id,
    pr_closed_value,
    pr_head_key,
    pr_head_value,
)

router = Router()

#: Actions that ask for a new run even when the head SHA was gated before (within arq's result
#: retention the plain job id would be answered ``already_queued``): their job id carries the
#: action and the delivery id.
FRESH_RUN_ACTIONS = frozenset({"reopened", "ready_for_review", "edited"})


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="reopened")
@router.register("pull_request", action="ready_for_review")
async def gate_pull_request(event: Event, decision: Decision) -> None:
    """Plan a gate run of the PR's head SHA against its base; record both as newest.

    ``opened`` and ``synchronize`` use the head's plain job id, so two deliveries for one head
    start one job, unless the PR's head moved away and came back to that SHA (then the run
    of the old visit was superseded and a fresh job is queued: `app.enqueue`); ``reopened``
    and ``ready_for_review`` (`FRESH_RUN_ACTIONS`) always get a fresh one.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if (install_id := installed(data, decision)) is None:
        return
    repo = repo_ref(data)
    gate = GatePayload(
        delivery_id=event.delivery_id,
        installation_id=install_id,
        repo=repo,
        pr_number=get_id(data, "pull_request.number"),
        head_sha=get_str(data, "pull_request.head.sha", SHA_PATTERN),
        base_sha=get_str(data, "pull_request.base.sha", SHA_PATTERN),
        base_ref=get_str(data, "pull_request.base.ref", REF_PATTERN),
        head_repo=(get_str(data, "pull_request.head.repo.full_name", FULL_NAME_PATTERN)
                   if get_obj(data, "pull_request.head").get("repo") is not None else None),
        author=get_str(data, "pull_request.user.login", LOGIN_PATTERN),
        draft=get_obj(data, "pull_request").get("draft") is True,
    )
    if updated_at := _updated_at(data):  # when this head arrived (worker/gate/head_history.py)
        gate["updated_at"] = updated_at
    action = data.get("action", "")
    suffix = f"{action}:{event.delivery_id}" if action in FRESH_RUN_ACTIONS else ""
    job_id = gate_job_id(repo, gate["pr_number"], gate["head_sha"], suffix)
    # push A, push B, force-push A: A's run was superseded, so A needs a fresh one
    returned = "" if suffix else gate_job_id(repo, gate["pr_number"], gate["head_sha"],
                                             f"returned:{event.delivery_id}")
    decision.enqueue(JOB_GATE_PULL_REQUEST, gate, job_id, returned)
    decision.record_head(pr_head_key(repo, gate["pr_number"]),
                         pr_head_value(gate["head_sha"], gate["base_ref"], updated_at))


@router.register("pull_request", action="edited")
async def gate_retargeted(event: Event, decision: Decision) -> None:
    """Gate the PR again when its base branch changed (``changes.base``): the verdict and the
    comment were about the old base. Other edits (title, body) are ignored.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    changes = event.data.get("changes")
    if not isinstance(changes, dict) or "base" not in changes:
        decision.ignore("only a change of the base branch gates an edited pull request again")
        return
    await gate_pull_request(event, decision)


@router.register("pull_request", action="closed")
async def record_closed(event: Event, decision: Decision) -> None:
    """Record that the PR closed (merged or not): its queued or running job is cancelled.

    Answered ``recorded``; no job is planned.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    repo = repo_ref(data)
    decision.answer("recorded")
    decision.record_head(pr_head_key(repo, get_id(data, "pull_request.number")),
                         pr_closed_value(_updated_at(data)))


def _updated_at(data: dict[str, Any]) -> str:
    """Return the pull request's ``updated_at``, or "" when absent or malformed (the record
    is then written without one and any later delivery replaces it)."""
    return get_time(data, "pull_request.updated_at")
