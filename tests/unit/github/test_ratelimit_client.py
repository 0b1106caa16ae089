"""The GitHub client honours rate limits and retries 5xx, against the fake GitHub over HTTP."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import (
    BASE_SHA,
    FAST_RETRIES,
    HEAD_SHA,
    INSTALLATION_ID,
    OWNER,
    REPO,
)
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import (
    GitHubClient,
    GitHubError,
    GitHubRateLimited,
    GitHubUnavailable,
)
from worker.github.ratelimit import WRITE_BURST, GitHubLimiter, GitHubLimits, RedisLimitStore

app_keys, creds, session = fx.app_keys, fx.creds, fx.session
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh

SECONDARY = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes "
                        "before you try again.",
             "documentation_url": "https://docs.github.com/rest/using-the-rest-api/"
                                  "rate-limits-for-the-rest-api"}


def make_client(session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials,
                limits: GitHubLimits | None = None, redis: Redis | None = None) -> GitHubClient:
    store = RedisLimitStore(redis) if redis is not None else None
    return GitHubClient(session, fake_gh.url, creds, InstallationTokenCache(creds),
                        INSTALLATION_ID, retry_delays_s=FAST_RETRIES,
                        limiter=GitHubLimiter(store, limits))


def api_requests(fake_gh: FakeGitHubServer, operation: str) -> list[dict[str, Any]]:
    return [r for r in fake_gh.state()["requests"] if r["operation"] == operation]


async def test_403_retry_after_is_slept_then_the_request_succeeds(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials,
        caplog: pytest.LogCaptureFixture) -> None:
    client = make_client(session, fake_gh, creds)
    token = await client.installation_token()
    fake_gh.setup({"faults": [{"operation": "issues/create-comment", "status": 403,
                               "headers": {"Retry-After": "1"}, "body": SECONDARY}]})
    comment_id = await client.create_issue_comment(OWNER, REPO, 7, "hello")
    first, second = api_requests(fake_gh, "issues/create-comment")
    assert (first["status"], first["fault"], second["status"]) == (403, True, 201)
    assert second["at"] - first["at"] >= 1.0
    assert [c["id"] for c in fake_gh.state()["comments"]] == [comment_id]
    assert "rate limited (HTTP 403): installation:77 paused for 1.0 s" in caplog.text
    assert token not in caplog.text


async def test_a_permission_403_is_not_retried_and_pauses_nothing(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = make_client(session, fake_gh, creds)
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 403, "body": {
        "message": "Resource not accessible by integration"}}]})
    with pytest.raises(GitHubError) as info:
        await client.create_check_run(OWNER, REPO, HEAD_SHA)
    assert type(info.value) is GitHubError and info.value.status_code == 403
    assert "Resource not accessible by integration" in str(info.value)
    assert info.value.retry_after_s() is None
    await client.create_check_run(OWNER, REPO, HEAD_SHA)  # at once: nothing is paused
    assert [r["status"] for r in api_requests(fake_gh, "checks/create")] == [403, 201]


async def test_a_secondary_limit_without_a_time_waits_a_minute(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = make_client(session, fake_gh, creds, GitHubLimits(max_wait_s=5))
    fake_gh.setup({"faults": [{"operation": "issues/update-comment", "status": 403,
                               "body": SECONDARY}]})
    with pytest.raises(GitHubRateLimited) as info:
        await client.update_issue_comment(OWNER, REPO, 1, "x")
    assert 59 <= info.value.retry_after_s() <= 60 and info.value.status_code == 403
    with pytest.raises(GitHubRateLimited):  # the whole installation waits, even reads
        await client.get_permission(OWNER, REPO, "alice")
    assert len(api_requests(fake_gh, "issues/update-comment")) == 1
    assert api_requests(fake_gh, "repos/get-collaborator-permission-level") == []


async def test_a_primary_limit_waits_until_the_reset(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = make_client(session, fake_gh, creds)
    await client.installation_token()
    fake_gh.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 7, "head_sha": HEAD_SHA,
                              "base_sha": BASE_SHA}],
                   "faults": [{"operation": "pulls/get", "rate_limit_reset_in_s": 1}]})
    assert (await client.get_pull(OWNER, REPO, 7)).head_sha == HEAD_SHA
    limited, answered = api_requests(fake_gh, "pulls/get")
    reset = int(limited["at"] + 1)  # the fake's x-ratelimit-reset
    assert (limited["status"], answered["status"]) == (403, 200) and answered["at"] >= reset
    assert fake_gh.state()["violations"] == []


async def test_rate_limit_retries_are_bounded(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = make_client(session, fake_gh, creds)
    fake_gh.setup({"faults": [{"operation": "reactions/create-for-issue-comment", "status": 429,
                               "headers": {"Retry-After": "0"}, "times": 5}]})
    with pytest.raises(GitHubRateLimited, match="still rate limited after 2 waits") as info:
        await client.add_reaction(OWNER, REPO, 5, "eyes")
    assert info.value.status_code == 429
    assert len(api_requests(fake_gh, "reactions/create-for-issue-comment")) == 3


async def test_a_5xx_retry_after_is_honoured(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = make_client(session, fake_gh, creds)
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 503,
                               "headers": {"Retry-After": "1"}}]})
    await client.create_check_run(OWNER, REPO, HEAD_SHA)
    failed, created = api_requests(fake_gh, "checks/create")
    assert (failed["status"], created["status"]) == (503, 201)
    assert created["at"] - failed["at"] >= 1.0


async def test_a_5xx_asking_for_a_long_wait_is_unavailable_with_the_time(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = make_client(session, fake_gh, creds)
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 503,
                               "headers": {"Retry-After": "120"}}]})
    with pytest.raises(GitHubUnavailable) as info:
        await client.create_check_run(OWNER, REPO, HEAD_SHA)
    assert info.value.status_code == 503
    assert 115 <= (info.value.retry_after_s() or 0) <= 120
    assert len(api_requests(fake_gh, "checks/create")) == 1


async def test_writes_are_paced_after_a_burst_and_reads_are_not(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials,
        redis: Redis) -> None:
    interval = 0.5
    client = make_client(session, fake_gh, creds, GitHubLimits(write_interval_s=interval), redis)
    await client.installation_token()
    started = time.time()  # before the first write reserves its slot (same clock as Redis TIME)
    await asyncio.gather(*(client.create_issue_comment(OWNER, REPO, 7, f"c{i}")
                           for i in range(WRITE_BURST + 2)),
                         *(client.get_permission(OWNER, REPO, "alice") for _ in range(3)))
    writes = sorted(r["at"] for r in api_requests(fake_gh, "issues/create-comment"))
    reads = [r["at"] for r in api_requests(fake_gh, "repos/get-collaborator-permission-level")]
    assert len(writes) == WRITE_BURST + 2 and len(reads) == 3
    # GCRA slots count from the burst's first reservation, not from its last write: the k-th
    # write after the burst may not start before `started + k * interval`, and a request
    # arrives after it starts. So these lower bounds hold however slow the machine is. (A gap
    # between the last burst write and the first paced one is not one: a slow serial burst
    # leaves a short one, as CI saw at 0.027 s.) 10 ms covers Redis TIME's whole milliseconds.
    assert writes[WRITE_BURST] - started >= interval - 0.01  # the first after the burst
    assert writes[WRITE_BURST + 1] - started >= 2 * interval - 0.01  # the next its own slot
    assert max(reads) < writes[WRITE_BURST]  # reads do not queue behind the paced writes


async def test_a_pause_set_by_one_worker_holds_back_another(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials,
        redis_url: str, redis: Redis) -> None:
    first = make_client(session, fake_gh, creds, redis=redis)
    other_redis = Redis.from_url(redis_url)
    try:
        second = make_client(session, fake_gh, creds, GitHubLimits(max_wait_s=0), other_redis)
        fake_gh.setup({"faults": [{"operation": "checks/create", "status": 429,
                                   "headers": {"Retry-After": "2"}}]})
        task = asyncio.create_task(first.create_check_run(OWNER, REPO, HEAD_SHA))
        while not api_requests(fake_gh, "checks/create"):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the 429 has been answered and the pause stored
        with pytest.raises(GitHubRateLimited) as info:
            await second.get_permission(OWNER, REPO, "alice")
        assert 1.0 < info.value.retry_after_s() <= 2.0 and info.value.status_code is None
        await task
    finally:
        await other_redis.aclose()
    assert api_requests(fake_gh, "repos/get-collaborator-permission-level") == []
    assert [r["status"] for r in api_requests(fake_gh, "checks/create")] == [429, 201]


async def test_5xx_backoff_is_exponential_with_full_jitter(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    client = GitHubClient(session, fake_gh.url, creds, InstallationTokenCache(creds),
                          INSTALLATION_ID)  # the production backoff: ceilings of 1, 2 and 4 s
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    client._gh.sleep = record  # type: ignore[method-assign]
    fake_gh.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 7, "head_sha": HEAD_SHA,
                              "base_sha": BASE_SHA}],
                   "faults": [{"operation": "pulls/get", "status": 502, "times": 3}]})
    assert (await client.get_pull(OWNER, REPO, 7)).base_sha == BASE_SHA
    assert [r["status"] for r in api_requests(fake_gh, "pulls/get")] == [502, 502, 502, 200]
    assert len(slept) == 3
    assert all(0.0 <= s <= ceiling for s, ceiling in zip(slept, (1.0, 2.0, 4.0), strict=True))
    assert len(set(slept)) == 3  # drawn, not fixed
