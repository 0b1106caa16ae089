"""Pytest fixtures for the GitHub tests: a test App key pair, the fake GitHub, a real client.

Import the fixtures you use into a test module (``from tests.unit.github_fixtures import ...``).
Keys are generated at test time; none is committed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.fake_github import FakeGitHubServer, generate_app_keypair, running_fake_github
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient

APP_ID = "4242"
INSTALLATION_ID = 77
OWNER, REPO = "octo", "hello"
HEAD_SHA = "ce587453ced02b1526dfb4cb910479d431683101"
BASE_SHA = "e7fdf7640066d71ad16a86fbcbb9c6a10a18af4f"
#: Retries without the production backoff, so the tests stay fast.
FAST_RETRIES = (0.01, 0.01)


@pytest.fixture(scope="session")
def app_keys() -> tuple[str, str]:
    """A fresh RSA key pair for the test App: (private PEM, public PEM)."""
    return generate_app_keypair()


@pytest.fixture()
def creds(app_keys: tuple[str, str]) -> AppCredentials:
    """The test App's credentials."""
    return AppCredentials(APP_ID, app_keys[0])


@pytest.fixture(scope="session")
def fake_gh_server() -> Iterator[FakeGitHubServer]:
    """One fake GitHub on a free loopback port for the whole session."""
    with running_fake_github() as server:
        yield server


@pytest.fixture()
def fake_gh(fake_gh_server: FakeGitHubServer, app_keys: tuple[str, str]) -> FakeGitHubServer:
    """The fake GitHub, blank (no records, default config) but for the test App's key."""
    fake_gh_server.setup({"reset_config": True, "app_id": APP_ID, "public_key_pem": app_keys[1]})
    return fake_gh_server


@pytest.fixture()
async def session() -> AsyncIterator[httpx.AsyncClient]:
    """A real HTTP client."""
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


@pytest.fixture()
def client(session: httpx.AsyncClient, fake_gh: FakeGitHubServer,
           creds: AppCredentials) -> GitHubClient:
    """A GitHubClient for installation ``INSTALLATION_ID`` talking to the fake."""
    return GitHubClient(session, fake_gh.url, creds, InstallationTokenCache(creds),
                        INSTALLATION_ID, retry_delays_s=FAST_RETRIES)


def requests_for(state: dict[str, Any], operation: str) -> list[dict[str, Any]]:
    """The recorded requests of one operation id (e.g. ``checks/update``)."""
    return [r for r in state["requests"] if r["operation"] == operation]
