"""Installation tokens shared by worker processes: encrypted in Redis, minted once, dropped on 401.

Each "process" is its own `InstallationTokenCache` with its own Redis connection; GitHub is the
fake over loopback HTTP and Redis is real.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import FAST_RETRIES, INSTALLATION_ID, OWNER, REPO, requests_for
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient
from worker.github.token_store import SharedTokenStore
from worker.security.secretbox import KEYS_VARIABLE, SecretBox

app_keys, creds, session = fx.app_keys, fx.creds, fx.session
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh

MINT = "apps/create-installation-access-token"
STORED_KEY = f"llmgate:secret:installation-token:{INSTALLATION_ID}"


class Worker:
    """One worker process's view: its Redis connection, token cache and GitHub client."""

    def __init__(self, redis_url: str, box: SecretBox, session: httpx.AsyncClient,
                 fake_gh: FakeGitHubServer, creds: AppCredentials, clock: list[float]) -> None:
        self.redis = Redis.from_url(redis_url)
        self.cache = InstallationTokenCache(creds, clock=lambda: clock[0],
                                            shared=SharedTokenStore(self.redis, box))
        self.gh = GitHubClient(session, fake_gh.url, creds, self.cache, INSTALLATION_ID,
                               retry_delays_s=FAST_RETRIES)


@pytest.fixture()
def box() -> SecretBox:
    return SecretBox([SecretBox.generate_key()])


@pytest.fixture()
async def workers(redis_url: str, box: SecretBox, session: httpx.AsyncClient,
                  fake_gh: FakeGitHubServer, creds: AppCredentials,
                  ) -> AsyncIterator[tuple[list[float], list[Worker]]]:
    clock = [time.time()]
    made = [Worker(redis_url, box, session, fake_gh, creds, clock) for _ in range(3)]
    yield clock, made
    for w in made:
        await w.redis.aclose()


async def test_workers_share_one_mint(workers: tuple[list[float], list[Worker]],
                                      fake_gh: FakeGitHubServer) -> None:
    _, (a, b, c) = workers
    tokens = await asyncio.gather(*(w.gh.installation_token() for w in (a, b, c, a, b, c)))
    assert len(set(tokens)) == 1
    assert len(requests_for(fake_gh.state(), MINT)) == 1  # one mint at a time, then shared
    assert await c.gh.get_permission(OWNER, REPO, "alice") == "none"


async def test_the_stored_token_is_encrypted_and_expires_when_due(
        workers: tuple[list[float], list[Worker]], box: SecretBox) -> None:
    _, (a, *_) = workers
    token = await a.gh.installation_token()
    raw = await a.redis.get(STORED_KEY)
    assert raw is not None and token.encode() not in raw
    stored = json.loads(box.decrypt(raw))
    assert stored["token"] == token
    # the fake's tokens live 3600 s; the copy in Redis goes 300 s before they expire
    assert 3600 - 300 - 10 < await a.redis.ttl(STORED_KEY) <= 3600 - 300
    assert abs(stored["expires_at"] - (time.time() + 3600)) < 10
    assert token not in repr(a.cache) and token not in repr(a.cache._shared)


async def test_a_stale_token_is_replaced_once_for_everyone(
        workers: tuple[list[float], list[Worker]], fake_gh: FakeGitHubServer) -> None:
    clock, (a, b, _) = workers
    first = await a.gh.installation_token()
    assert await b.gh.installation_token() == first
    clock[0] += 3600 - 300 + 1  # inside the last 5 minutes of the token's hour
    fake_gh.setup({"token_ttl_s": 7200})  # new tokens outlive the jump of the workers' clock
    second = await a.gh.installation_token()
    assert second != first
    assert await b.gh.installation_token() == second  # b adopts a's fresh token
    assert len(requests_for(fake_gh.state(), MINT)) == 2


async def test_a_401_drops_the_token_for_every_worker(
        workers: tuple[list[float], list[Worker]], fake_gh: FakeGitHubServer) -> None:
    _, (a, b, _) = workers
    revoked = await a.gh.installation_token()
    assert await b.gh.installation_token() == revoked
    fake_gh.setup({"reset": True})  # GitHub forgets every token it issued
    # a's call is refused, drops the token for every worker, mints a fresh one and goes again
    assert await a.gh.get_permission(OWNER, REPO, "alice") == "none"
    fresh = await a.gh.installation_token()
    assert fresh != revoked
    # b still holds the revoked token in memory; its 401 must not drop a's fresh one: b adopts it
    assert await b.gh.get_permission(OWNER, REPO, "alice") == "none"
    assert await b.gh.installation_token() == fresh
    assert len(requests_for(fake_gh.state(), MINT)) == 1


async def test_a_token_no_key_can_open_is_minted_again(
        redis_url: str, session: httpx.AsyncClient, fake_gh: FakeGitHubServer,
        creds: AppCredentials, box: SecretBox) -> None:
    clock = [time.time()]
    old = Worker(redis_url, box, session, fake_gh, creds, clock)
    rotated = Worker(redis_url, SecretBox([SecretBox.generate_key()]), session, fake_gh, creds,
                     clock)
    try:
        first = await old.gh.installation_token()
        assert await rotated.gh.installation_token() != first
        assert len(requests_for(fake_gh.state(), MINT)) == 2
    finally:
        await old.redis.aclose()
        await rotated.redis.aclose()


async def test_without_keys_tokens_stay_in_process(redis_url: str, session: httpx.AsyncClient,
                                                   fake_gh: FakeGitHubServer,
                                                   creds: AppCredentials,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    redis = Redis.from_url(redis_url)
    try:
        assert SharedTokenStore.from_env(redis, {KEYS_VARIABLE: ""}) is None
        assert "cached in each worker process only" in caplog.text
        shared = SharedTokenStore.from_env(redis, {KEYS_VARIABLE: SecretBox.generate_key()})
        assert isinstance(shared, SharedTokenStore)
        gh = GitHubClient(session, fake_gh.url, creds, InstallationTokenCache(creds),
                          INSTALLATION_ID)
        token = await gh.installation_token()
        assert await redis.keys("*") == []  # nothing in Redis without a shared store
        assert token not in caplog.text
    finally:
        await redis.aclose()
