"""Creates are idempotent (issue 14): a POST that failed where GitHub may have performed it is
sent again only after looking for what it made, against the fake GitHub's ``after`` faults (a
gateway's 502 once GitHub created the check run or the comment)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import FAST_RETRIES, HEAD_SHA, OWNER, REPO, requests_for
from worker.github.client import GitHubClient, GitHubOutcomeUnknown
from worker.github.comments import upsert_sticky_comment
from worker.github.courtesy import reply

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh

RUNNING = {"title": "llmgate: running", "summary": "Running the eval suites."}
BOT = "llmgate[bot]"


def _statuses(state: dict[str, Any], operation: str) -> list[int]:
    return [r["status"] for r in requests_for(state, operation)]


async def _create(client: GitHubClient) -> int:
    return await client.create_check_run(OWNER, REPO, HEAD_SHA, output=RUNNING,
                                         external_id="pr:7")


@pytest.mark.parametrize("status", [502, 504, 500])
async def test_a_check_run_created_behind_a_5xx_is_adopted(
        client: GitHubClient, fake_gh: FakeGitHubServer, status: int) -> None:
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": status, "after": True}]})
    check_run_id = await _create(client)
    state = fake_gh.state()
    assert [r["id"] for r in state["check_runs"]] == [check_run_id]
    assert _statuses(state, "checks/create") == [status]  # not sent again
    assert _statuses(state, "checks/list-for-ref") == [200]  # looked for first
    assert state["violations"] == []


async def test_a_create_refused_before_acting_is_sent_again(client: GitHubClient,
                                                            fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 502}]})
    check_run_id = await _create(client)
    state = fake_gh.state()
    assert [r["id"] for r in state["check_runs"]] == [check_run_id]
    assert _statuses(state, "checks/create") == [502, 201]
    assert _statuses(state, "checks/list-for-ref") == [200]


async def test_another_tries_running_check_run_is_never_adopted(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    """Same name, head SHA and external_id, still in progress: only the nonce tells them apart."""
    earlier = await _create(client)
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 502}]})
    fresh = await _create(client)
    assert fresh != earlier
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 502, "after": True}]})
    third = await _create(client)
    assert [r["id"] for r in fake_gh.state()["check_runs"]] == [earlier, fresh, third]


async def test_a_create_unknown_after_every_retry_raises(client: GitHubClient,
                                                         fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 503, "times": None}]})
    with pytest.raises(GitHubOutcomeUnknown, match="may have been performed"):
        await _create(client)
    state = fake_gh.state()
    assert len(requests_for(state, "checks/create")) == 1 + len(FAST_RETRIES)
    assert state["check_runs"] == []


async def test_a_sticky_comment_created_behind_a_502_is_adopted(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"bot_login": BOT, "faults": [
        {"operation": "issues/create-comment", "status": 502, "after": True}]})
    comment_id = await upsert_sticky_comment(client, OWNER, REPO, 7, "pass", bot_login=BOT)
    second = await upsert_sticky_comment(client, OWNER, REPO, 7, "fail", bot_login=BOT)
    state = fake_gh.state()
    assert second == comment_id and [c["id"] for c in state["comments"]] == [comment_id]
    assert state["comments"][0]["body"].endswith("fail")
    assert _statuses(state, "issues/create-comment") == [502]


async def test_a_reply_created_behind_a_502_is_adopted(client: GitHubClient,
                                                       fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"bot_login": BOT, "faults": [
        {"operation": "issues/create-comment", "status": 502, "after": True}]})
    comment_id = await reply(client, OWNER, REPO, 7, "Commands: ...")
    state = fake_gh.state()
    assert [c["id"] for c in state["comments"]] == [comment_id]
