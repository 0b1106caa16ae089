"""GitHubClient against the fake GitHub over real loopback HTTP."""

from __future__ import annotations

import logging
import re
import time

import httpx
import pytest

from tests.conftest import free_port
from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import (
    BASE_SHA,
    FAST_RETRIES,
    HEAD_SHA,
    INSTALLATION_ID,
    OWNER,
    REPO,
    requests_for,
)
from worker.contract import CHECK_NAME
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import (
    GitHubClient,
    GitHubError,
    GitHubRateLimited,
    GitHubUnavailable,
    PullInfo,
)

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh

MINT = "apps/create-installation-access-token"
PERMISSION = "repos/get-collaborator-permission-level"
PULL = {"owner": OWNER, "repo": REPO, "number": 7, "head_sha": HEAD_SHA, "base_sha": BASE_SHA,
        "base_ref": "main", "head_ref": "feature", "clone_url": "https://example.test/o/r.git"}


async def test_enterprise_api_root_keeps_its_prefix(session: httpx.AsyncClient,
                                                    fake_gh: FakeGitHubServer,
                                                    creds: AppCredentials) -> None:
    gh = GitHubClient(session, fake_gh.enterprise_url + "/", creds,
                      InstallationTokenCache(creds), INSTALLATION_ID)
    check_run_id = await gh.create_check_run(OWNER, REPO, HEAD_SHA)
    state = fake_gh.state()
    assert [r["raw_path"] for r in state["requests"]] == [
        f"/api/v3/app/installations/{INSTALLATION_ID}/access_tokens",
        f"/api/v3/repos/{OWNER}/{REPO}/check-runs",
    ]
    assert state["check_runs"][0]["id"] == check_run_id
    assert state["violations"] == []


async def test_create_check_run_uses_the_contract_name(client: GitHubClient,
                                                       fake_gh: FakeGitHubServer) -> None:
    check_run_id = await client.create_check_run(
        OWNER, REPO, HEAD_SHA, output={"title": "llmgate", "summary": "running"})
    run = fake_gh.state()["check_runs"][0]
    assert (run["id"], run["name"], run["head_sha"]) == (check_run_id, CHECK_NAME, HEAD_SHA)
    assert run["status"] == "in_progress"  # the summary, then the create's hidden nonce line
    assert re.fullmatch(r"running\n\n<!-- llmgate:create [0-9a-f]{16} -->",
                        run["output"]["summary"])
    await client.update_check_run(OWNER, REPO, check_run_id,
                                  {"status": "completed", "conclusion": "neutral"})
    run = fake_gh.state()["check_runs"][0]
    assert (run["status"], run["conclusion"]) == ("completed", "neutral")
    assert fake_gh.state()["violations"] == []


async def test_get_pull(client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"pulls": [PULL, {**PULL, "number": 8, "head_repo_full_name": "fork/hello",
                                    "head_clone_url": "https://example.test/fork.git"}]})
    assert await client.get_pull(OWNER, REPO, 7) == PullInfo(
        head_sha=HEAD_SHA, base_sha=BASE_SHA, base_ref="main",
        head_repo_full_name=f"{OWNER}/{REPO}", clone_url="https://example.test/o/r.git",
        state="open", head_clone_url="https://example.test/o/r.git",
        author_login="octocat")  # the REST example's author, as the fake answers by default
    fork = await client.get_pull(OWNER, REPO, 8)
    assert (fork.head_repo_full_name, fork.head_clone_url) == (
        "fork/hello", "https://example.test/fork.git")
    assert fork.clone_url == "https://example.test/o/r.git"
    assert fake_gh.state()["violations"] == []


async def test_get_pull_of_a_deleted_fork(client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"pulls": [{**PULL, "head_repo_full_name": None}]})
    pull = await client.get_pull(OWNER, REPO, 7)
    assert (pull.head_repo_full_name, pull.head_clone_url) == (None, None)
    # GitHub's REST schema says head.repo is never null; the fake reports its own answer
    assert [v["kind"] for v in fake_gh.state()["violations"]] == ["invalid_response"]


async def test_unknown_pull_is_a_404(client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    with pytest.raises(GitHubError) as info:
        await client.get_pull(OWNER, REPO, 99)
    assert info.value.status_code == 404


@pytest.mark.parametrize(("role", "permission"), [
    ("admin", "admin"), ("maintain", "write"), ("write", "write"), ("triage", "read"),
    ("read", "read"), (None, "none"),
])
async def test_permission_maps_roles_to_legacy_levels(client: GitHubClient,
                                                      fake_gh: FakeGitHubServer,
                                                      role: str | None, permission: str) -> None:
    fake_gh.setup({"collaborators": {"alice": role}})
    assert await client.get_permission(OWNER, REPO, "alice") == permission
    assert await client.get_permission(OWNER, REPO, "stranger") == "none"


async def test_reaction_twice_is_one_reaction(client: GitHubClient,
                                              fake_gh: FakeGitHubServer) -> None:
    await client.add_reaction(OWNER, REPO, 555, "eyes")
    await client.add_reaction(OWNER, REPO, 555, "eyes")
    state = fake_gh.state()
    assert [(r["comment_id"], r["content"]) for r in state["reactions"]] == [(555, "eyes")]
    assert [r["status"] for r in requests_for(state, "reactions/create-for-issue-comment")] == [
        201, 200]
    with pytest.raises(ValueError, match="unknown reaction"):
        await client.add_reaction(OWNER, REPO, 555, "thumbsup")
    assert len(fake_gh.state()["requests"]) == len(state["requests"])


async def test_list_issue_comments_follows_every_page(client: GitHubClient,
                                                      fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"comments": [{"owner": OWNER, "repo": REPO, "issue_number": 7,
                                 "body": f"comment {i}"} for i in range(250)]})
    bodies = [c.body async for c in client.list_issue_comments(OWNER, REPO, 7)]
    assert bodies == [f"comment {i}" for i in range(250)]
    pages = requests_for(fake_gh.state(), "issues/list-comments")
    assert [r["path"].split("?")[1] for r in pages] == [
        "per_page=100", "per_page=100&page=2", "per_page=100&page=3"]


async def test_5xx_is_retried_then_succeeds(client: GitHubClient,
                                            fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 502, "times": 2}]})
    check_run_id = await client.create_check_run(OWNER, REPO, HEAD_SHA)
    creates = requests_for(fake_gh.state(), "checks/create")
    assert [r["status"] for r in creates] == [502, 502, 201]
    assert fake_gh.state()["check_runs"][0]["id"] == check_run_id


async def test_5xx_after_every_retry_is_unavailable(client: GitHubClient,
                                                    fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"faults": [{"operation": "pulls/get", "status": 503, "times": 10}]})
    with pytest.raises(GitHubUnavailable) as info:
        await client.get_pull(OWNER, REPO, 7)
    assert info.value.status_code == 503
    assert len(requests_for(fake_gh.state(), "pulls/get")) == 1 + len(FAST_RETRIES)


async def test_connection_refused_is_unavailable(session: httpx.AsyncClient,
                                                 creds: AppCredentials) -> None:
    gh = GitHubClient(session, f"http://127.0.0.1:{free_port()}", creds,
                      InstallationTokenCache(creds), INSTALLATION_ID, retry_delays_s=FAST_RETRIES)
    with pytest.raises(GitHubUnavailable, match="ConnectError"):
        await gh.get_permission(OWNER, REPO, "alice")


async def test_rate_limit_is_a_typed_error_with_the_reset_time(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"faults": [{"operation": "issues/create-comment",
                               "rate_limit_reset_in_s": 120}]})
    with pytest.raises(GitHubRateLimited) as info:
        await client.create_issue_comment(OWNER, REPO, 7, "hello")
    assert 100 <= info.value.reset_at.timestamp() - time.time() <= 121
    assert 100 <= info.value.retry_after_s() <= 121
    assert len(requests_for(fake_gh.state(), "issues/create-comment")) == 1


async def test_secondary_rate_limit_uses_retry_after(client: GitHubClient,
                                                     fake_gh: FakeGitHubServer) -> None:
    # longer than the 60 s the client sleeps at most: raised for the job to defer, not sent
    fake_gh.setup({"faults": [{"operation": "issues/update-comment", "status": 429,
                               "headers": {"Retry-After": "90"}}]})
    with pytest.raises(GitHubRateLimited) as info:
        await client.update_issue_comment(OWNER, REPO, 1, "x")
    assert 85 <= info.value.retry_after_s() <= 90
    assert info.value.status_code == 429
    assert len(requests_for(fake_gh.state(), "issues/update-comment")) == 1


async def test_a_revoked_token_is_replaced_and_the_call_sent_again_once(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    first = await client.installation_token()
    fake_gh.setup({"reset": True})  # the fake forgets every token it issued: 401 for `first`
    assert await client.get_permission(OWNER, REPO, "alice") == "none"
    assert await client.installation_token() != first
    calls = [(r["operation"], r["status"]) for r in fake_gh.state()["requests"]]
    assert calls == [(PERMISSION, 401), (MINT, 201), (PERMISSION, 200)]


async def test_a_token_refused_twice_is_an_error(client: GitHubClient,
                                                 fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"faults": [{"operation": PERMISSION, "status": 401, "times": 2,
                               "body": {"message": "Bad credentials"}}]})
    with pytest.raises(GitHubError) as info:
        await client.get_permission(OWNER, REPO, "alice")
    assert info.value.status_code == 401
    assert [r["operation"] for r in fake_gh.state()["requests"]] == [MINT, PERMISSION, MINT,
                                                                    PERMISSION]


async def test_tokens_never_reach_the_logs(client: GitHubClient, fake_gh: FakeGitHubServer,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_gh.setup({"faults": [{"operation": "issues/create-comment", "status": 500}]})
    comment_id = await client.create_issue_comment(OWNER, REPO, 7, "hello")
    token = await client.installation_token()
    assert "retry 1" in caplog.text
    assert token not in caplog.text
    assert [c["id"] for c in fake_gh.state()["comments"]] == [comment_id]
