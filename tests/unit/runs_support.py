"""Helpers for the run lifecycle tests: the fake GitHub, a client on it, arq results.

Fixtures (import them as ``fake_gh, gh = runs_support.fake_gh, runs_support.gh``): `fake_gh`,
a fresh `fake_github_server` per test, and `gh`, a `github_client` on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from arq.constants import result_key_prefix
from arq.jobs import serialize_result
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer, generate_app_keypair, running_fake_github
from tests.unit.worker_support import APP_ID, INSTALLATION_ID, OWNER, REPO, WRITER
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient

PRIVATE_PEM, PUBLIC_PEM = generate_app_keypair()
HEAD_SHA, NEW_SHA, BASE_SHA = "a" * 40, "c" * 40, "b" * 40
COMMENT_HINT = "\n\nComment `/llmgate rerun` to try again."


def pull(number: int = 1, head_sha: str = HEAD_SHA, state: str = "open",
         clone_url: str = "https://example.test/acme/tiny.git") -> dict[str, Any]:
    """A pull request of the fake GitHub's ``pulls`` setup."""
    return {"owner": OWNER, "repo": REPO, "number": number, "head_sha": head_sha,
            "base_sha": BASE_SHA, "base_ref": "main", "head_ref": "feature",
            "clone_url": clone_url, "state": state, "author": WRITER}


@contextmanager
def fake_github_server() -> Iterator[FakeGitHubServer]:
    """The schema-checking fake GitHub on loopback, with installation 7 and one writer."""
    with running_fake_github({"app_id": APP_ID, "public_key_pem": PUBLIC_PEM,
                              "installations": [INSTALLATION_ID],
                              "collaborators": {WRITER: "write"}}) as server:
        yield server


@asynccontextmanager
async def github_client(server: FakeGitHubServer) -> AsyncIterator[GitHubClient]:
    """A client of installation 7 on ``server``, retrying a 5xx after 10 ms only."""
    creds = AppCredentials(APP_ID, PRIVATE_PEM)
    async with httpx.AsyncClient(timeout=10) as session:
        yield GitHubClient(session, server.url, creds, InstallationTokenCache(creds),
                           INSTALLATION_ID, retry_delays_s=(0.01,))


@pytest.fixture()
def fake_gh() -> Iterator[FakeGitHubServer]:
    """A fresh `fake_github_server` for one test."""
    with fake_github_server() as server:
        yield server


@pytest.fixture()
async def gh(fake_gh: FakeGitHubServer) -> AsyncIterator[GitHubClient]:
    """A `github_client` of installation 7 on `fake_gh`."""
    async with github_client(fake_gh) as client:
        yield client


async def store_result(redis: Redis, job_id: str, *, success: bool, result: Any,
                       job_try: int = 1) -> None:
    """Store an arq job result exactly as arq's worker does (its own serializer)."""
    data = serialize_result("gate_pull_request", ({},), {}, job_try, 0, success, result, 0, 1,
                            f"{job_id}:gate_pull_request", "arq:queue", job_id=job_id)
    assert data is not None
    await redis.set(result_key_prefix + job_id, data)


def check_run(server: FakeGitHubServer, check_run_id: int) -> dict[str, Any]:
    """The fake's record of one check run."""
    [run] = [r for r in server.state()["check_runs"] if r["id"] == check_run_id]
    return run
