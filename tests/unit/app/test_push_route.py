"""``push`` deliveries through the real receiver into the real arq queue.

Only a push that moves the default branch to a commit plans a baseline job; the others are
acknowledged with the reason. The payloads are GitHub's own examples (``push.json``: a push to
``master``, the default branch; ``push.tag-deleted.json``) or ``push.json`` with one field
changed in the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.app_support import (
    encode,
    fixture_bytes,
    fixture_json,
    post,
    queued_jobs,
    running_app,
    settings,
)

AFTER = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
REPO = {"owner": "Codertocat", "name": "Hello-World",
        "clone_url": "https://github.com/Codertocat/Hello-World.git"}


async def test_a_push_to_the_default_branch_plans_one_baseline_job(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "push", "push-1", fixture_bytes("push.json"))
        edited = fixture_json("push.json")
        edited["head_commit"] = {"id": AFTER}  # a redelivery under a new id, same commit
        again = await post(client, "push", "push-2", encode(edited))
    assert (answer.status_code, answer.json()) == (202, {"status": "queued"})
    assert again.json() == {"status": "already_queued"}
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id) == ("store_baseline",
                                          f"baseline:Codertocat/Hello-World@{AFTER}")
    assert job.args == ({"delivery_id": "push-1", "installation_id": 1, "repo": REPO,
                         "branch": "master", "sha": AFTER, "pushed_at": 1557933657},)


def _edited(**changes: Any) -> bytes:
    data = fixture_json("push.json")
    data.update(changes)
    return encode(data)


@pytest.mark.parametrize(("body", "reason"), [
    (_edited(ref="refs/heads/feature"),
     "push to refs/heads/feature, not to the default branch master: no baseline"),
    (_edited(deleted=True, after="0" * 40), "push deleted master: no commit to run"),
    (_edited(after="0" * 40), "push deleted master: no commit to run"),
    (fixture_bytes("push.tag-deleted.json"),
     "push to refs/tags/simple-tag, not to the default branch master: no baseline"),
    (_edited(installation=None),
     "payload has no installation.id, so the App cannot authenticate"),
])
async def test_other_pushes_are_acknowledged_with_the_reason(redis_url: str, body: bytes,
                                                             reason: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "push", "push-x", body)
    assert (answer.status_code, answer.json()) == (200, {"status": "ignored", "reason": reason})
    assert await queued_jobs(redis_url) == []


@pytest.mark.parametrize("changes", [{"after": "not-a-sha"}, {"ref": 5}])
async def test_a_malformed_push_is_refused(redis_url: str, changes: dict[str, Any]) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "push", "push-bad", _edited(**changes))
    assert answer.status_code == 400
    assert await queued_jobs(redis_url) == []
