"""``LLMGATE_REPORTS_REQUIRE_LOGIN``: a private repository's report is served to its readers only.

The worker stores each report with its repository (worker/report/store.py, `REPORT_REPO_SUFFIX`);
the web process (app/reports.py) asks `report_allowed` before serving it: a signed-out visitor
goes to ``/login`` and back, a signed-in user GitHub does not list the repository for gets the
404 of an unknown report, a report stored without its repository is refused. Real Redis, real
HTTP to the fake GitHub (which checks the OAuth flow and GitHub's schemas).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import httpx
import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from app.dashboard.auth import ClearRefusedSession, GitHubAccess, SignIn
from app.dashboard.session import AuthSettings
from app.reports import ReportPages
from tests.fakes.fake_github import FakeGitHubServer, running_fake_github
from worker.contract import REPORT_KEY_PREFIX, REPORT_REPO_SUFFIX
from worker.github.checks import CheckOutput
from worker.report.store import ReportSettings, ReportStore

SITE = "https://llmgate.test"
USERS = {"mona": {"id": 4242, "installations": {"11": ["acme/private-one"]}},
         "octo": {"id": 7, "installations": {"12": ["octo/own"]}}}
REPOS = {"acme/private-one": {"private": True}, "acme/public-one": {"private": False},
         "octo/own": {"private": True}}


@pytest.fixture(scope="module")
def gh() -> Iterator[FakeGitHubServer]:
    with running_fake_github() as server:
        yield server


def configure(gh: FakeGitHubServer, user: str) -> None:
    gh.setup({"reset_config": True, "oauth": {
        "client_id": "Iv23test", "client_secret": "client-secret-1",
        "callback_url": f"{SITE}/auth/callback", "authorize_as": user,
        "users": USERS, "repos": REPOS}})


@asynccontextmanager
async def browser(gh: FakeGitHubServer, redis: Redis,
                  require_login: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    access = GitHubAccess(AuthSettings(
        client_id="Iv23test", client_secret="client-secret-1", session_secret="s" * 40,
        github_url=gh.url, api_url=gh.url, reports_require_login=require_login))
    routes = [*SignIn(access).routes(),
              Route("/reports/{report_id}", ReportPages(lambda: redis, access).page)]
    app = Starlette(routes=routes, middleware=[Middleware(ClearRefusedSession)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url=SITE) as client:
        try:
            yield client
        finally:
            await access.aclose()


async def sign_in(client: httpx.AsyncClient) -> None:
    login = await client.get("/login", params={"next": "/"})
    async with httpx.AsyncClient() as github:
        consent = await github.get(login.headers["location"])
    back = urlsplit(consent.headers["location"])
    answer = await client.get(f"/auth/callback?{back.query}")
    assert answer.status_code == 303, answer.text


async def stored(redis: Redis, repo: str | None) -> str:
    """Store a report as the worker does; return its path."""
    store = ReportStore(redis, ReportSettings("https://llmgate.test", 3600))
    url = await store.store(CheckOutput("llmgate: 1 regression", "summary", "the full text"),
                            lambda: "<html><body>report of " + (repo or "?") + "</body></html>",
                            repo)
    return urlsplit(url).path


async def test_the_worker_stores_the_repository_beside_the_report_with_its_expiry(
        redis: Redis) -> None:
    path = await stored(redis, "acme/private-one")
    key = REPORT_KEY_PREFIX + path.rsplit("/", 1)[1]
    assert await redis.get(key + REPORT_REPO_SUFFIX) == b"acme/private-one"
    assert 3500 < await redis.ttl(key + REPORT_REPO_SUFFIX) <= 3600
    assert abs(await redis.ttl(key) - await redis.ttl(key + REPORT_REPO_SUFFIX)) <= 1


async def test_a_signed_out_visitor_is_sent_to_sign_in_and_a_reader_gets_the_report(
        gh: FakeGitHubServer, redis: Redis) -> None:
    configure(gh, "mona")
    path = await stored(redis, "acme/private-one")
    async with browser(gh, redis) as client:
        first = await client.get(path)
        assert first.status_code == 303
        assert first.headers["location"] == f"/login?next={path}"
        assert "report of" not in first.text
        await sign_in(client)
        page = await client.get(path)
        assert page.status_code == 200
        assert "report of acme/private-one" in page.text
    assert gh.state()["violations"] == []


async def test_a_signed_in_user_who_cannot_read_the_repository_gets_the_404_of_no_report(
        gh: FakeGitHubServer, redis: Redis) -> None:
    configure(gh, "octo")
    private, missing = await stored(redis, "acme/private-one"), "/reports/" + "0" * 32
    async with browser(gh, redis) as client:
        await sign_in(client)
        refused, unknown = await client.get(private), await client.get(missing)
    assert refused.status_code == unknown.status_code == 404
    assert refused.text == unknown.text
    assert "report of" not in refused.text


async def test_a_public_repositorys_report_stays_open_and_one_without_its_repository_is_refused(
        gh: FakeGitHubServer, redis: Redis) -> None:
    configure(gh, "octo")
    public, unrecorded = await stored(redis, "acme/public-one"), await stored(redis, None)
    async with browser(gh, redis) as client:
        assert (await client.get(public)).status_code == 200
        assert (await client.get(unrecorded)).status_code == 303  # fail closed: sign in first
        await sign_in(client)
        assert (await client.get(unrecorded)).status_code == 404


async def test_with_the_setting_off_the_link_alone_opens_the_report(
        gh: FakeGitHubServer, redis: Redis) -> None:
    configure(gh, "octo")
    path = await stored(redis, "acme/private-one")
    async with browser(gh, redis, require_login=False) as client:
        page = await client.get(path)
    assert page.status_code == 200 and "report of acme/private-one" in page.text
