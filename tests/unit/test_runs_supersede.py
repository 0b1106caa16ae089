"""The supersede decision and watch, with a real Redis and the schema-checking fake GitHub."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.runs_support import (
    BASE_SHA,
    HEAD_SHA,
    NEW_SHA,
    fake_github_server,
    github_client,
    pull,
)
from tests.unit.worker_support import OWNER, REPO
from worker.contract import RepoRef, pr_head_key
from worker.gate_request import GateRequest
from worker.github.client import GitHubClient
from worker.supersede import CLOSED_REASON, Supersede, Superseded, pushed_reason, supervise

REPO_REF = RepoRef(owner=OWNER, name=REPO, clone_url="https://example.test/acme/tiny.git")
REQUEST = GateRequest(REPO_REF, 1, HEAD_SHA, BASE_SHA)
KEY = pr_head_key(REPO_REF, 1)


@pytest.fixture()
def fake_gh() -> Iterator[FakeGitHubServer]:
    with fake_github_server() as server:
        yield server


@pytest.fixture()
async def gh(fake_gh: FakeGitHubServer) -> AsyncIterator[GitHubClient]:
    async with github_client(fake_gh) as client:
        yield client


@pytest.fixture()
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


def _pull_requests(server: FakeGitHubServer) -> int:
    return sum(r["operation"] == "pulls/get" for r in server.state()["requests"])


async def test_no_record_or_own_head_is_not_superseded_and_asks_github_nothing(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    watch = Supersede(redis, gh, REQUEST)
    assert await watch.reason() is None
    await redis.set(KEY, HEAD_SHA)
    assert await watch.reason() is None
    assert await Supersede(redis, gh, GateRequest(REPO_REF, 0, HEAD_SHA, BASE_SHA)).reason() \
        is None  # no pull request (a merge group)
    assert _pull_requests(fake_gh) == 0


@pytest.mark.parametrize(("recorded", "github_pull", "expected"), [
    (NEW_SHA, pull(head_sha=NEW_SHA), "Superseded by a push of ccccccc."),
    ("closed", pull(state="closed"), CLOSED_REASON),
    (NEW_SHA, pull(head_sha="e" * 40), "Superseded by a push of eeeeeee."),  # GitHub knows best
])
async def test_a_newer_push_or_a_close_supersedes_once_github_agrees(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer, recorded: str,
        github_pull: dict[str, object], expected: str) -> None:
    fake_gh.setup({"pulls": [github_pull]})
    await redis.set(KEY, recorded)
    assert await Supersede(redis, gh, REQUEST).reason() == expected
    assert pushed_reason(NEW_SHA) == "Superseded by a push of ccccccc."


async def test_a_record_github_contradicts_is_ignored_from_then_on(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"pulls": [pull(head_sha=HEAD_SHA)]})  # an out-of-order delivery
    await redis.set(KEY, NEW_SHA)
    watch = Supersede(redis, gh, REQUEST)
    assert await watch.reason() is None
    assert await watch.reason() is None
    assert _pull_requests(fake_gh) == 1
    await redis.set(KEY, "closed")  # a new record is confirmed again
    fake_gh.setup({"pulls": [pull(state="closed")]})
    assert await watch.reason() == CLOSED_REASON


async def test_supervise_cancels_superseded_work_within_the_poll(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"pulls": [pull(head_sha=NEW_SHA)]})
    cancelled = asyncio.Event()

    async def work() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "finished"

    async def push_later() -> None:
        await asyncio.sleep(0.2)
        await redis.set(KEY, NEW_SHA)

    pusher = asyncio.create_task(push_later())
    started = time.monotonic()
    with pytest.raises(Superseded) as caught:
        await supervise(work(), Supersede(redis, gh, REQUEST), interval_s=0.05)
    await pusher
    assert caught.value.reason == "Superseded by a push of ccccccc."
    assert cancelled.is_set()
    assert time.monotonic() - started < 1.0


async def test_supervise_returns_the_result_and_passes_a_callers_cancel_through(
        redis: Redis, gh: GitHubClient) -> None:
    async def quick() -> str:
        return "done"

    assert await supervise(quick(), Supersede(redis, gh, REQUEST), interval_s=0.05) == "done"
    task = asyncio.create_task(supervise(asyncio.sleep(30), Supersede(redis, gh, REQUEST),
                                         interval_s=0.05))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_supervise_passes_the_works_own_error_through(redis: Redis,
                                                            gh: GitHubClient) -> None:
    async def broken() -> str:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await supervise(broken(), Supersede(redis, gh, REQUEST), interval_s=0.05)
