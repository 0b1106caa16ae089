"""``push`` events: a push to the default branch stores that commit's results as its baseline.

Only a push that moves the repository's default branch (``repository.default_branch``) to a
commit (not a deletion, not a tag, not another branch) is planned; every other push is
acknowledged and ignored with the reason. One job per (repository, pushed SHA): a redelivery or
a second push of the same commit is answered "already queued".
"""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.decision import Decision
from app.routes.payload import (
    REF_PATTERN,
    SHA_PATTERN,
    field,
    get_str,
    installed,
    repo_ref,
)
from worker.contract import JOB_STORE_BASELINE, PushPayload, baseline_job_id

router = Router()

#: ``after`` of a push that deleted its ref.
ZERO_SHA = "0" * 40


@router.register("push")
async def store_baseline(event: Event, decision: Decision) -> None:
    """Plan a baseline run of the pushed commit when the push moved the default branch.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if (install_id := installed(data, decision)) is None:
        return
    ref = get_str(data, "ref")
    default = get_str(data, "repository.default_branch", REF_PATTERN)
    if ref != f"refs/heads/{default}":
        decision.ignore(f"push to {ref}, not to the default branch {default}: no baseline")
        return
    if field(data, "deleted") is True or get_str(data, "after") == ZERO_SHA:
        decision.ignore(f"push deleted {default}: no commit to run")
        return
    repo = repo_ref(data)
    push = PushPayload(
        delivery_id=event.delivery_id, installation_id=install_id, repo=repo, branch=default,
        sha=get_str(data, "after", SHA_PATTERN), pushed_at=_pushed_at(data))
    decision.enqueue(JOB_STORE_BASELINE, push, baseline_job_id(repo, push["sha"]))


def _pushed_at(data: object) -> int:
    """``repository.pushed_at`` (Unix seconds in push events), 0 when absent or not a number."""
    repository = data.get("repository") if isinstance(data, dict) else None
    value = repository.get("pushed_at") if isinstance(repository, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
