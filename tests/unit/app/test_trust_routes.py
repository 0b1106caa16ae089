"""Approvals through the real receiver: strict ``/llmgate approve`` parsing and the button."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from app.routes.approval import parse_approve
from tests.budget import examples
from tests.unit.app_support import (
    encode,
    fixture_json,
    post,
    queued_jobs,
    running_app,
    set_fields,
    settings,
)

HEAD = "d6fde92930d4715a2b49857d24b940956b26d2d3"
REPO = {"owner": "Codertocat", "name": "Hello-World",
        "clone_url": "https://github.com/Codertocat/Hello-World.git"}


@pytest.mark.parametrize(("body", "sha"), [
    ("/llmgate approve", ""),
    ("  /llmgate approve  \n", ""),
    ("/llmgate approve\r\nLGTM, reviewed the prompt change", ""),
    ("/llmgate approve 1a2b3c4", "1a2b3c4"),
    (f"/llmgate approve {HEAD}", HEAD),
    ("/llmgate approve please", None),
    ("/llmgate approve 1A2B3C4", None),
    ("/llmgate approve 1a2b3c", None),
    ("/llmgate approved", None),
    ("/llmgate  approve", None),
    ("> /llmgate approve", None),
    ("please /llmgate approve", None),
    ("```\n/llmgate approve\n```", None),
    ("/llmgate approve <img src=x onerror=alert(1)>", None),
    ("/llmgate approve @org/team", None),
    ("LGTM\n/llmgate approve", None),
    ("", None),
])
def test_approve_command_is_parsed_strictly(body: str, sha: str | None) -> None:
    assert parse_approve(body) == sha


def _comment(body: str, **user: str) -> bytes:
    data = fixture_json("issue_comment.created.on-pull-request.DERIVED.json")
    data["comment"]["body"] = body
    data["comment"]["user"].update(user)
    return encode(data)


async def test_approve_comment_enqueues_an_approval_job(redis_url: str) -> None:
    body = _comment("/llmgate approve 1a2b3c4\nreviewed", login="maintainer", type="User")
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "approve-1", body)
        # The same signed body again under a new id is a replay (body-hash dedupe); an edited
        # copy of the same comment (new updated_at) reaches arq, whose job id dedupes it.
        replay = await post(client, "issue_comment", "approve-2", body)
        edited = json.loads(body)
        edited["comment"]["updated_at"] = "2030-01-01T00:00:00Z"
        again = await post(client, "issue_comment", "approve-3", encode(edited))
    assert (answer.status_code, answer.json()) == (202, {"status": "queued"})
    assert replay.json() == {"status": "duplicate"}
    assert again.json() == {"status": "already_queued"}
    [job] = await queued_jobs(redis_url)
    data = fixture_json("issue_comment.created.on-pull-request.DERIVED.json")
    number, comment_id = data["issue"]["number"], data["comment"]["id"]
    assert (job.function, job.job_id) == (
        "approve_pull_request", f"approve:Codertocat/Hello-World#{number}:comment:{comment_id}")
    assert job.args == ({"delivery_id": "approve-1", "installation_id": 1, "repo": REPO,
                         "pr_number": number, "approver": "maintainer", "source": "comment",
                         "head_sha": "1a2b3c4", "comment_id": comment_id,
                         "comment_created_at": data["comment"]["created_at"]},)


@pytest.mark.parametrize("created_at", [None, "yesterday", 1557933621])
async def test_an_approve_comment_without_a_readable_time_goes_without_one(
        redis_url: str, created_at: Any) -> None:
    """The worker then binds it to no head (only a full SHA approves): fail closed."""
    data = json.loads(_comment("/llmgate approve", login="maintainer", type="User"))
    if created_at is None:
        del data["comment"]["created_at"]
    else:
        data["comment"]["created_at"] = created_at
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "approve-untimed", encode(data))
    assert answer.json() == {"status": "queued"}
    [job] = await queued_jobs(redis_url)
    assert "comment_created_at" not in job.args[0] and job.args[0]["head_sha"] == ""


async def test_approve_by_a_bot_is_ignored(redis_url: str) -> None:
    body = _comment("/llmgate approve", login="llmgate[bot]", type="Bot")
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "approve-bot", body)
    assert answer.json() == {"status": "ignored", "reason": "comment is by a bot"}
    assert await queued_jobs(redis_url) == []


def _button(**changes: Any) -> dict[str, Any]:
    data = fixture_json("check_run.rerequested.json")
    data["action"] = "requested_action"
    data["requested_action"] = {"identifier": "approve"}
    data["check_run"].update(name="llmgate", external_id="pr:12", head_sha=HEAD)
    data["repository"].update(name="Hello-World", clone_url=REPO["clone_url"])
    data["repository"]["owner"]["login"] = "Codertocat"
    return set_fields(data, changes)


async def test_button_enqueues_an_approval_of_the_check_runs_head(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "check_run", "button-1", encode(_button()))
    assert answer.status_code == 202
    [job] = await queued_jobs(redis_url)
    sender = fixture_json("check_run.rerequested.json")["sender"]["login"]
    assert job.job_id == f"approve:Codertocat/Hello-World#12@{HEAD}:{sender}"
    assert job.args == ({"delivery_id": "button-1", "installation_id": 1, "repo": REPO,
                         "pr_number": 12, "approver": sender, "source": "button",
                         "head_sha": HEAD, "comment_id": 0},)


@pytest.mark.parametrize(("changes", "reason"), [
    ({"requested_action__identifier": "fix"}, "unknown requested action"),
    ({"check_run__name": "other-ci"}, "not an llmgate check run waiting for approval"),
    ({"check_run__external_id": ""}, "not an llmgate check run waiting for approval"),
    ({"check_run__external_id": "pr:12; rm -rf"}, "not an llmgate check run waiting for approval"),
    ({"sender__type": "Bot"}, "requested by a bot"),
], ids=["identifier", "name", "no-external-id", "bad-external-id", "bot"])
async def test_buttons_that_approve_nothing(redis_url: str, changes: dict[str, Any],
                                            reason: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "check_run", "button-x", encode(_button(**changes)))
    assert answer.json() == {"status": "ignored", "reason": reason}
    assert await queued_jobs(redis_url) == []


async def test_malformed_button_payload_is_a_400(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "check_run", "button-bad",
                            encode(_button(check_run__head_sha="not-a-sha")))
        other = await post(client, "check_run", "button-bad2",
                           encode(_button(check_run=["not", "an", "object"])))
    assert answer.status_code == 400 and "check_run.head_sha is malformed" in answer.text
    assert other.status_code == 400


BUTTON_PATHS = ["check_run", "check_run__external_id", "check_run__name", "check_run__head_sha",
                "requested_action", "requested_action__identifier", "sender", "sender__type",
                "sender__login", "installation", "repository__owner__login"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.just("pr:3"),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=2),
    max_leaves=5)


async def test_button_payloads_with_any_field_broken_never_give_5xx(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        @given(path=st.sampled_from(BUTTON_PATHS), value=json_values)
        @hyp_settings(max_examples=examples(300), deadline=None,
                      suppress_health_check=[HealthCheck.too_slow,
                                             HealthCheck.function_scoped_fixture])
        def one(path: str, value: Any) -> None:
            bodies.append(encode(_button(**{path: value})))

        bodies: list[bytes] = []
        one()
        for number, body in enumerate(bodies):
            answer = await post(client, "check_run", f"fuzz-{number}", body)
            assert answer.status_code < 500, answer.text
