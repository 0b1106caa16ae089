"""``pull_request`` events: gate a PR head when it is opened, pushed to, or reopened."""

from __future__ import annotations

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
    installation_id,
    repo_ref,
)
from worker.contract import JOB_GATE_PULL_REQUEST, GatePayload, gate_job_id

router = Router()


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="reopened")
async def gate_pull_request(event: Event, decision: Decision) -> None:
    """Plan a gate run of the PR's head SHA against its base.

    The job id depends on the PR head only, so an ``opened`` and a ``synchronize`` for the same
    head SHA (different deliveries) start one job.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    install_id = installation_id(data)
    if install_id is None:
        decision.ignore("payload has no installation.id, so the App cannot authenticate")
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
    )
    job_id = gate_job_id(repo, gate["pr_number"], gate["head_sha"])
    decision.enqueue(JOB_GATE_PULL_REQUEST, gate, job_id)
