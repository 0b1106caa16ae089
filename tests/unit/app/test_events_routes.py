"""Re-runs, buttons, merge groups and installations through the real receiver (signed, real Redis).

Each delivery is a GitHub fixture (``tests/fixtures/github/webhooks``), edited where the test
says, signed and POSTed to ``/webhook``; the queued arq job is read back with arq's reader.
"""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from tests.unit.app_support import (
    encode,
    fixture_json,
    post,
    queued_jobs,
    running_app,
    set_fields,
    settings,
)
from worker.contract import MERGE_GROUP_DESTROYED, external_target, merge_group_key

CR_HEAD = "d6fde92930d4715a2b49857d24b940956b26d2d3"  # check_run.rerequested.json
SUITE_HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # check_suite.rerequested.json
HELLO = {"owner": "Codertocat", "name": "Hello-World",
         "clone_url": "https://github.com/Codertocat/Hello-World.git"}
GITHUB_HELLO = {"owner": "github", "name": "hello-world",  # the fixture's clone URL is http
                "clone_url": "http://github.com/github/hello-world.git"}


def _check_run(action: str = "rerequested", **changes: Any) -> dict[str, Any]:
    """``check_run.rerequested.json`` as llmgate's own check run (name, App id 4242)."""
    data = fixture_json("check_run.rerequested.json")
    data["action"] = action
    data["check_run"].update(name="llmgate", external_id="pr:12")
    data["check_run"]["app"]["id"] = 4242
    return set_fields(data, changes)


async def _deliver(redis_url: str, event: str, data: dict[str, Any],
                   delivery: str = "d-1") -> tuple[int, dict[str, Any]]:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, event, delivery, encode(data))
    return answer.status_code, answer.json()


@pytest.mark.parametrize(("external_id", "expected"), [
    ("pr:12", (12, "")), ("mg:" + "a" * 40, (None, "a" * 40)), ("pr:0", (None, "")),
    ("pr:12; rm -rf", (None, "")), ("mg:" + "A" * 40, (None, "")), ("", (None, "")),
    (None, (None, "")), (12, (None, ""))])
def test_external_target(external_id: Any, expected: tuple[int | None, str]) -> None:
    assert external_target(external_id) == expected


async def test_check_run_rerequested_queues_a_recheck_of_its_head(redis_url: str) -> None:
    data = _check_run()
    data["check_run"]["pull_requests"] = [
        {"number": 11, "base": {"repo": {"id": 526}}},
        {"number": 99, "base": {"repo": {"id": 1}}}]  # another repository's PR: not ours
    assert await _deliver(redis_url, "check_run", data, "rr-1") == (202, {"status": "queued"})
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id) == ("rerun_check",
                                          f"rerun:github/hello-world:{CR_HEAD}:rr-1")
    assert job.args == ({"delivery_id": "rr-1", "installation_id": 1, "repo": GITHUB_HELLO,
                         "head_sha": CR_HEAD, "pr_numbers": [11, 12], "merge_group_base": "",
                         "app_id": 4242, "requester": "octocat", "source": "check_run"},)


async def test_check_suite_rerequested_queues_a_recheck_of_its_pull_requests(
        redis_url: str) -> None:
    data = fixture_json("check_suite.rerequested.json")
    assert await _deliver(redis_url, "check_suite", data, "cs-1") == (202, {"status": "queued"})
    [job] = await queued_jobs(redis_url)
    assert job.job_id == f"rerun:Codertocat/Hello-World:{SUITE_HEAD}:cs-1"
    assert job.args == ({"delivery_id": "cs-1", "installation_id": 957387, "repo": HELLO,
                         "head_sha": SUITE_HEAD, "pr_numbers": [2], "merge_group_base": "",
                         "app_id": 29310, "requester": "octocoders-linter[bot]",
                         "source": "check_suite"},)


@pytest.mark.parametrize(("event", "data", "reason"), [
    ("check_run", fixture_json("check_run.rerequested.json"), "not an llmgate check run"),
    ("check_run", _check_run(installation=None),
     "payload has no installation.id, so the App cannot authenticate"),
    ("check_suite", {**fixture_json("check_suite.rerequested.json"), "action": "requested"},
     "no handler for this event and action"),
    ("check_run", _check_run("requested_action", requested_action={"identifier": "rerun"},
                             check_run__external_id=""), "not an llmgate check run"),
    ("check_run", _check_run("requested_action", requested_action={"identifier": "accept"},
                             check_run__external_id="mg:" + "b" * 40),
     "only a pull request's check run can be accepted"),
    ("check_run", _check_run("requested_action", requested_action={"identifier": "accept"},
                             sender__type="Bot"), "requested by a bot"),
    ("check_run", _check_run("requested_action", requested_action={"identifier": "reject"}),
     "unknown requested action"),
], ids=["other-check", "no-installation", "suite-requested", "button-no-external-id",
        "accept-merge-group", "bot-button", "unknown-button"])
async def test_check_events_that_queue_nothing(redis_url: str, event: str, data: dict[str, Any],
                                               reason: str) -> None:
    assert await _deliver(redis_url, event, data) == (200, {"status": "ignored",
                                                            "reason": reason})
    assert await queued_jobs(redis_url) == []


async def test_rerun_button_queues_a_recheck_of_its_pull_request(redis_url: str) -> None:
    data = _check_run("requested_action", requested_action={"identifier": "rerun"})
    assert await _deliver(redis_url, "check_run", data, "b-1") == (202, {"status": "queued"})
    [job] = await queued_jobs(redis_url)
    assert job.function == "rerun_check"
    assert job.args[0]["pr_numbers"] == [12] and job.args[0]["source"] == "button"


async def test_accept_button_queues_one_job_per_presser(redis_url: str) -> None:
    data = _check_run("requested_action", requested_action={"identifier": "accept"})
    async with running_app(settings(redis_url)) as client:
        first = await post(client, "check_run", "a-1", encode(data))
        data["sender"]["id"] += 1  # a new body: the same person pressing again
        again = await post(client, "check_run", "a-2", encode(data))
        data["sender"]["login"] = "reader"
        other = await post(client, "check_run", "a-3", encode(data))
    assert [first.json(), again.json(), other.json()] == [
        {"status": "queued"}, {"status": "already_queued"}, {"status": "queued"}]
    jobs = sorted(await queued_jobs(redis_url), key=lambda j: j.job_id)
    assert [j.job_id for j in jobs] == ["accept:github/hello-world:4:octocat",
                                        "accept:github/hello-world:4:reader"]
    assert jobs[0].args == ({"delivery_id": "a-1", "installation_id": 1, "repo": GITHUB_HELLO,
                             "pr_number": 12, "check_run_id": 4, "head_sha": CR_HEAD,
                             "accepter": "octocat"},)


async def test_merge_group_checks_requested_queues_a_gate_of_the_group_head(
        redis_url: str) -> None:
    data = fixture_json("merge_group.checks_requested.DERIVED.json")
    group = data["merge_group"]
    assert await _deliver(redis_url, "merge_group", data, "mg-1") == (202, {"status": "queued"})
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id) == (
        "gate_merge_group", f"merge_group:Codertocat/Hello-World:{group['head_sha']}")
    assert job.args == ({"delivery_id": "mg-1", "installation_id": 1, "repo": HELLO,
                         "head_sha": group["head_sha"], "base_sha": group["base_sha"],
                         "base_ref": "refs/heads/master",
                         "head_ref": group["head_ref"]},)


async def test_merge_group_destroyed_is_recorded_for_a_run_of_it_to_stop(
        redis_url: str) -> None:
    """Issue 31: a run gating a destroyed merge group stops (`worker.gate.supersede`)."""
    data = fixture_json("merge_group.destroyed.DERIVED.json")
    assert await _deliver(redis_url, "merge_group", data) == (200, {"status": "recorded"})
    assert await queued_jobs(redis_url) == []
    client = Redis.from_url(redis_url)
    try:
        key = merge_group_key(HELLO, data["merge_group"]["head_sha"])
        assert await client.get(key) == MERGE_GROUP_DESTROYED.encode()
    finally:
        await client.aclose()


async def test_merge_group_with_a_malformed_sha_is_refused(redis_url: str) -> None:
    data = fixture_json("merge_group.checks_requested.DERIVED.json")
    data["merge_group"]["head_sha"] = "--upload-pack=evil"
    status, answer = await _deliver(redis_url, "merge_group", data)
    assert (status, answer) == (400, {"error": "delivery d-1: payload field "
                                               "merge_group.head_sha is malformed"})
    assert await queued_jobs(redis_url) == []


@pytest.mark.parametrize(("event", "name", "action", "added", "removed"), [
    ("installation", "installation.deleted.json", "deleted", [], []),
    ("installation", "installation.created.json", "created", [], []),
    ("installation_repositories", "installation_repositories.removed.json", "removed", [],
     ["octocat/Hello-World"]),
    ("installation_repositories", "installation_repositories.added.json", "added",
     ["Codertocat/Space"], []),
])
async def test_installation_events_queue_a_record(redis_url: str, event: str, name: str,
                                                  action: str, added: list[str],
                                                  removed: list[str]) -> None:
    data = fixture_json(name)
    assert await _deliver(redis_url, event, data, "i-1") == (202, {"status": "queued"})
    [job] = await queued_jobs(redis_url)
    install_id = data["installation"]["id"]
    assert (job.function, job.job_id) == ("installation_changed",
                                          f"installation:-:{install_id}:i-1")
    assert job.args == ({"delivery_id": "i-1", "installation_id": install_id, "event": event,
                         "action": action, "repos_added": added, "repos_removed": removed},)


async def test_installation_action_without_access_change_is_ignored(redis_url: str) -> None:
    data = {**fixture_json("installation.created.json"), "action": "new_permissions_accepted"}
    assert await _deliver(redis_url, "installation", data) == (
        200, {"status": "ignored", "reason": "installation action changes no access"})
