"""``merge_group``: gate the merge queue's commit, so ``llmgate`` can be a required check there.

``checks_requested`` queues ``gate_merge_group``: an ``llmgate`` check run on the group's
``head_sha``, gated against its ``base_sha`` (the commit the group is built on), with no PR
comment. ``destroyed`` (merged, dequeued or invalidated) is recorded in Redis
(`worker.contract.merge_group_key`), so a run still gating the group stops: its result will
never be used (issue 31).
"""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.decision import Decision
from app.routes.payload import (
    REF_PATTERN,
    SHA_PATTERN,
    get_str,
    installed,
    repo_ref,
)
from worker.contract import (
    JOB_MERGE_GROUP,
    MERGE_GROUP_DESTROYED,
    MergeGroupPayload,
    event_job_id,
    merge_group_key,
)

router = Router()


@router.register("merge_group", action="checks_requested")
async def gate_merge_group(event: Event, decision: Decision) -> None:
    """Plan the gate of a merge group's head SHA; one job per head SHA.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if (install_id := installed(data, decision)) is None:
        return
    repo = repo_ref(data)
    group = MergeGroupPayload(
        delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
        head_sha=get_str(data, "merge_group.head_sha", SHA_PATTERN),
        base_sha=get_str(data, "merge_group.base_sha", SHA_PATTERN),
        base_ref=get_str(data, "merge_group.base_ref", REF_PATTERN),
        head_ref=get_str(data, "merge_group.head_ref", REF_PATTERN))
    decision.enqueue(JOB_MERGE_GROUP, group, event_job_id("merge_group", repo, group["head_sha"]))


@router.register("merge_group", action="destroyed")
async def merge_group_destroyed(event: Event, decision: Decision) -> None:
    """Record a merge group that is gone, so a run of it stops; answered ``recorded``.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    head_sha = get_str(data, "merge_group.head_sha", SHA_PATTERN)
    decision.answer("recorded")
    decision.record_head(merge_group_key(repo_ref(data), head_sha), MERGE_GROUP_DESTROYED)
