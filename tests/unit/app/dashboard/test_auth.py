"""Sign in with GitHub and who reads what (issue 35), over real HTTP to the fake GitHub.

The browser is an httpx client on the app (ASGI); the app's own client talks to the fake GitHub
over HTTP, and the fake checks the OAuth flow by GitHub's documented rules (PKCE included) and
every REST request and answer against GitHub's schemas (``violations`` must stay empty).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.dashboard.auth import ClearRefusedSession, GitHubAccess, SignIn, report_allowed
from app.dashboard.session import (
    FLOW_COOKIE,
    SESSION_COOKIE,
    AuthSettings,
    SessionCodec,
    code_challenge,
    safe_next,
)
from app.settings import SettingsError
from tests.fakes.fake_github import FakeGitHubServer, running_fake_github

SITE = "https://llmgate.test"
SECRET = "s" * 40
USERS = {"mona": {"id": 4242, "installations": {"11": ["acme/private-one", "acme/public-one"],
                                                "12": ["mona/tools"]}},
         "octo": {"id": 7, "installations": {}}}
REPOS = {"acme/private-one": {"private": True}, "acme/public-one": {"private": False},
         "acme/secret": {"private": True}, "mona/tools": {"private": True},
         "other/open": {"private": False}}


@pytest.fixture(scope="module")
def gh() -> Iterator[FakeGitHubServer]:
    with running_fake_github() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(gh: FakeGitHubServer) -> None:
    gh.setup({"reset_config": True, "oauth": {
        "client_id": "Iv23test", "client_secret": "client-secret-1",
        "callback_url": f"{SITE}/auth/callback", "authorize_as": "mona",
        "users": USERS, "repos": REPOS}})


def auth_settings(gh: FakeGitHubServer, **overrides: Any) -> AuthSettings:
    values: dict[str, Any] = {"client_id": "Iv23test", "client_secret": "client-secret-1",
                              "session_secret": SECRET, "github_url": gh.url,
                              "api_url": gh.url}
    return AuthSettings(**(values | overrides))


def build_app(access: GitHubAccess) -> Starlette:
    """The sign-in routes, and a probe that answers what ``access`` says of a repository."""

    async def probe(request: Request) -> Response:
        repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
        user = access.user(request)
        return JSONResponse({"readable": await access.readable(request, repo),
                             "report": await report_allowed(access, request, repo),
                             "login": None if user is None else user.login})

    async def many(request: Request) -> Response:
        wanted = request.query_params.getlist("repo")
        return JSONResponse(await access.readable_repos(request, wanted))

    routes = [*SignIn(access).routes(), Route("/probe/{owner}/{repo}", probe),
              Route("/many", many)]
    return Starlette(routes=routes, middleware=[Middleware(ClearRefusedSession)])


@asynccontextmanager
async def browser(access: GitHubAccess) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build_app(access))
    async with httpx.AsyncClient(transport=transport, base_url=SITE) as client:
        try:
            yield client
        finally:
            await access.aclose()


async def sign_in(client: httpx.AsyncClient, next_path: str = "/repos") -> httpx.Response:
    """Run the whole flow; return the callback's answer."""
    login = await client.get("/login", params={"next": next_path})
    assert login.status_code == 302, login.text
    async with httpx.AsyncClient() as github:  # the browser at GitHub: real HTTP
        consent = await github.get(login.headers["location"])
    assert consent.status_code == 302, consent.text
    back = urlsplit(consent.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == f"{SITE}/auth/callback"
    return await client.get(f"/auth/callback?{back.query}")


async def probe(client: httpx.AsyncClient, repo: str) -> dict[str, Any]:
    response = await client.get(f"/probe/{repo}")
    assert response.status_code == 200
    data: dict[str, Any] = response.json()
    return data


def set_cookie_headers(response: httpx.Response, name: str) -> list[str]:
    return [h for h in response.headers.get_list("set-cookie") if h.startswith(name + "=")]


async def test_sign_in_with_pkce_sets_a_sealed_session(gh: FakeGitHubServer,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        login = await client.get("/login", params={"next": "/repos/acme"})
        query = parse_qs(urlsplit(login.headers["location"]).query)
        assert login.headers["location"].startswith(f"{gh.url}/login/oauth/authorize?")
        assert query["client_id"] == ["Iv23test"]
        assert query["redirect_uri"] == [f"{SITE}/auth/callback"]
        assert query["code_challenge_method"] == ["S256"]
        assert len(query["state"][0]) >= 43 and len(query["code_challenge"][0]) == 43
        flow_cookie = set_cookie_headers(login, FLOW_COOKIE)[0].lower()
        for attribute in ("httponly", "secure", "samesite=lax", "path=/auth", "max-age=600"):
            assert attribute in flow_cookie
        client.cookies.clear()
        done = await sign_in(client, "/repos/acme")
        assert done.status_code == 303 and done.headers["location"] == "/repos/acme"
        session = set_cookie_headers(done, SESSION_COOKIE)[0]
        for attribute in ("httponly", "secure", "samesite=lax", "path=/", "max-age=28800"):
            assert attribute in session.lower()
        assert any("max-age=0" in h.lower() for h in set_cookie_headers(done, FLOW_COOKIE))
        assert (await probe(client, "acme/private-one"))["login"] == "mona"

    state = gh.state()
    token = state["oauth"]["tokens"][0]["token"]
    assert token.startswith("ghu_") and token not in session
    exchange = [r for r in state["requests"] if r["operation"] == "oauth/access_token"]
    assert [r["status"] for r in exchange] == [200]
    assert exchange[0]["body"]["code_verifier"] == "***"  # sent, and checked by the fake
    assert state["violations"] == []
    assert state["oauth"]["codes"][0]["used"] is True
    assert any(r.name.startswith(("httpx", "httpcore")) for r in caplog.records)
    for record in caplog.records:
        assert token not in record.getMessage() and token not in repr(record.args)


async def test_the_fake_refuses_a_wrong_pkce_verifier(gh: FakeGitHubServer) -> None:
    verifier = "v" * 43
    async with httpx.AsyncClient() as github:
        consent = await github.get(f"{gh.url}/login/oauth/authorize", params={
            "client_id": "Iv23test", "redirect_uri": f"{SITE}/auth/callback", "state": "x",
            "code_challenge": code_challenge(verifier), "code_challenge_method": "S256"})
        code = parse_qs(urlsplit(consent.headers["location"]).query)["code"][0]
        form = {"client_id": "Iv23test", "client_secret": "client-secret-1", "code": code,
                "redirect_uri": f"{SITE}/auth/callback"}
        accept = {"Accept": "application/json"}
        wrong = await github.post(f"{gh.url}/login/oauth/access_token",
                                  data=form | {"code_verifier": "w" * 43}, headers=accept)
        right = await github.post(f"{gh.url}/login/oauth/access_token",
                                  data=form | {"code_verifier": verifier}, headers=accept)
    assert wrong.json()["error"] == "bad_verification_code"
    assert right.json()["access_token"].startswith("ghu_")
    assert [v["kind"] for v in gh.state()["violations"]] == ["oauth"]


async def test_a_wrong_or_missing_state_is_refused_without_a_session(
        gh: FakeGitHubServer) -> None:
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        login = await client.get("/login")
        async with httpx.AsyncClient() as github:
            consent = await github.get(login.headers["location"])
        query = parse_qs(urlsplit(consent.headers["location"]).query)
        forged = await client.get("/auth/callback",
                                  params={"code": query["code"][0], "state": "forged"})
        assert forged.status_code == 400
        assert not set_cookie_headers(forged, SESSION_COOKIE)
        client.cookies.clear()  # another browser: no sign-in cookie at all
        stray = await client.get("/auth/callback",
                                 params={"code": query["code"][0], "state": query["state"][0]})
        assert stray.status_code == 400 and not set_cookie_headers(stray, SESSION_COOKIE)
        assert (await probe(client, "acme/private-one"))["login"] is None
    assert not any(r["operation"] == "oauth/access_token" for r in gh.state()["requests"])


async def test_a_tampered_or_expired_cookie_signs_out(gh: FakeGitHubServer) -> None:
    access = GitHubAccess(auth_settings(gh))
    codec = SessionCodec(SECRET)
    async with browser(access) as client:
        await sign_in(client)
        good = client.cookies[SESSION_COOKIE]
        version, body, mac = good.split(".")
        flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
        for bad in (f"{version}.{flipped}.{mac}", good[:-3] + "xyz", "v1..", "garbage",
                    codec.seal_session(4242, "mona", "ghu_x", ttl_s=60, now=time.time() - 61),
                    SessionCodec("t" * 40).seal_session(4242, "mona", "ghu_x")):
            client.cookies.set(SESSION_COOKIE, bad)
            assert await probe(client, "acme/private-one") == {
                "readable": False, "report": True, "login": None}


async def test_readable_follows_the_users_installations(gh: FakeGitHubServer) -> None:
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        await sign_in(client)
        assert (await probe(client, "acme/private-one"))["readable"] is True
        assert (await probe(client, "ACME/Private-One"))["readable"] is True
        assert (await probe(client, "mona/tools"))["readable"] is True
        assert (await probe(client, "acme/secret"))["readable"] is False
        assert (await probe(client, "other/open"))["readable"] is False  # PUBLIC is off
        many = await client.get("/many", params={"repo": ["acme/secret", "mona/tools",
                                                          "acme/private-one"]})
        assert many.json() == ["mona/tools", "acme/private-one"]
    state = gh.state()
    listed = [r["operation"] for r in state["requests"]
              if r["operation"] and r["operation"].startswith("apps/")]
    assert listed == ["apps/list-installations-for-authenticated-user",
                      "apps/list-installation-repos-for-authenticated-user",
                      "apps/list-installation-repos-for-authenticated-user"]  # cached after
    assert state["violations"] == []


async def test_public_repositories_open_without_sign_in_only_when_turned_on(
        gh: FakeGitHubServer) -> None:
    async with browser(GitHubAccess(auth_settings(gh, dashboard_public=True))) as client:
        assert (await probe(client, "other/open"))["readable"] is True
        assert (await probe(client, "acme/public-one"))["readable"] is True
        assert (await probe(client, "acme/secret"))["readable"] is False
        assert (await probe(client, "acme/private-one"))["readable"] is False
        assert (await probe(client, "nobody/there"))["readable"] is False
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        assert (await probe(client, "other/open"))["readable"] is False
    repo_gets = [r for r in gh.state()["requests"] if r["operation"] == "repos/get"]
    assert {r["auth"] for r in repo_gets} == {"none"}
    assert gh.state()["violations"] == []


async def test_signed_in_with_public_on_asks_with_the_users_token(gh: FakeGitHubServer) -> None:
    async with browser(GitHubAccess(auth_settings(gh, dashboard_public=True))) as client:
        await sign_in(client)
        assert (await probe(client, "other/open"))["readable"] is True
        assert (await probe(client, "acme/secret"))["readable"] is False
        assert (await probe(client, "acme/private-one"))["readable"] is True
    repo_gets = [r for r in gh.state()["requests"] if r["operation"] == "repos/get"]
    assert [r["auth"] for r in repo_gets] == ["user", "user"]
    assert gh.state()["violations"] == []


@pytest.mark.parametrize("status", [500, 502, 403])
async def test_github_errors_fail_closed(gh: FakeGitHubServer, status: int,
                                         caplog: pytest.LogCaptureFixture) -> None:
    async with browser(GitHubAccess(auth_settings(gh, dashboard_public=True))) as client:
        await sign_in(client)
        gh.setup({"faults": [
            {"operation": "apps/list-installation-repos-for-authenticated-user",
             "status": status, "times": None},
            {"operation": "repos/get", "status": status, "times": None}]})
        with caplog.at_level(logging.WARNING, logger="app.dashboard.auth"):
            assert (await probe(client, "acme/private-one"))["readable"] is False
            assert (await probe(client, "other/open"))["readable"] is False
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings and all(f"status {status}" in w for w in warnings)
        assert (await probe(client, "acme/private-one"))["login"] == "mona"  # still signed in


async def test_a_github_that_does_not_answer_fails_closed(gh: FakeGitHubServer) -> None:
    silent = socket.socket()  # accepts connections (backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        api = f"http://127.0.0.1:{silent.getsockname()[1]}"
        settings = auth_settings(gh, api_url=api, dashboard_public=True)
        access = GitHubAccess(settings, httpx.AsyncClient(timeout=0.3))
        codec = SessionCodec(SECRET)
        async with browser(access) as client:
            client.cookies.set(SESSION_COOKIE, codec.seal_session(4242, "mona", "ghu_x"))
            started = time.monotonic()
            assert (await probe(client, "acme/private-one"))["readable"] is False
            assert time.monotonic() - started < 3
    finally:
        silent.close()


async def test_a_token_github_refuses_ends_the_session(gh: FakeGitHubServer) -> None:
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        await sign_in(client)
        old = client.cookies[SESSION_COOKIE]
        gh.setup({"faults": [{"operation": "apps/list-installations-for-authenticated-user",
                              "status": 401, "body": {"message": "Bad credentials"}}]})
        refused = await client.get("/probe/acme/private-one")
        assert refused.json()["readable"] is False
        assert any("max-age=0" in h.lower() for h in set_cookie_headers(refused, SESSION_COOKIE))
        client.cookies.set(SESSION_COOKIE, old)  # replayed: this process refuses it
        assert (await probe(client, "acme/private-one"))["login"] is None


@pytest.mark.parametrize("target", ["//evil.example/x", "/\\evil.example", "\\\\evil.example",
                                    "https://evil.example/", "javascript:alert(1)",
                                    "/%0d%0aSet-Cookie:x", "/ok\nLocation: x", "evil", ""])
async def test_next_never_leaves_the_site(gh: FakeGitHubServer, target: str) -> None:
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        done = await sign_in(client, target)
        location = done.headers["location"]
        # fresh user: "/" is a 404 of the web process; a refused or missing next lands on the
        # dashboard
        assert location == (target if target == "/%0d%0aSet-Cookie:x" else "/dashboard")
        assert urlsplit(location).netloc == ""


def test_safe_next_keeps_paths_of_this_site() -> None:
    assert safe_next("/repos/acme/x?tab=runs#top") == "/repos/acme/x?tab=runs#top"
    for bad in ("//a", "/\\a", "http://a", "a", "/\x00", "/" + "a" * 2001, None):
        assert safe_next(bad) == "/"


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_logout_clears_the_session(gh: FakeGitHubServer, method: str) -> None:
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        await sign_in(client)
        old = client.cookies[SESSION_COOKIE]
        out = await client.request(method, "/logout", params={"next": "//evil.example"})
        assert out.status_code == 303  # on the dashboard, never sent to sign in again
        assert out.headers["location"] == "/dashboard?signed_out=1"
        cleared = set_cookie_headers(out, SESSION_COOKIE)[0].lower()
        assert "max-age=0" in cleared and "secure" in cleared and "path=/" in cleared
        assert (await probe(client, "acme/private-one"))["login"] is None
        client.cookies.set(SESSION_COOKIE, old)
        assert (await probe(client, "acme/private-one"))["login"] is None


async def test_reports_of_private_repositories_need_a_reader_when_turned_on(
        gh: FakeGitHubServer) -> None:
    async with browser(GitHubAccess(auth_settings(gh, reports_require_login=True))) as client:
        assert (await probe(client, "acme/private-one"))["report"] is False
        assert (await probe(client, "other/open"))["report"] is True  # public: link works
        await sign_in(client)
        assert (await probe(client, "acme/private-one"))["report"] is True
        assert (await probe(client, "acme/secret"))["report"] is False
    async with browser(GitHubAccess(auth_settings(gh))) as client:
        assert (await probe(client, "acme/secret"))["report"] is True  # off: today's links


def test_settings_from_the_environment() -> None:
    assert AuthSettings.from_env({}) is None
    env = {"LLMGATE_GITHUB_CLIENT_ID": "Iv23x", "LLMGATE_GITHUB_CLIENT_SECRET": "s",
           "LLMGATE_SESSION_SECRET": SECRET, "GITHUB_API_URL": "https://ghe.example/api/v3",
           "LLMGATE_DASHBOARD_PUBLIC": "true"}
    settings = AuthSettings.from_env(env)
    assert settings is not None and settings.dashboard_public
    assert not settings.reports_require_login
    assert settings.github_url == "https://ghe.example"
    assert "s" * 40 not in repr(settings) and "'s'" not in repr(settings)
    for broken in ({"LLMGATE_GITHUB_CLIENT_ID": "Iv23x"},
                   env | {"LLMGATE_SESSION_SECRET": "short"},
                   env | {"LLMGATE_DASHBOARD_PUBLIC": "maybe"},
                   {"LLMGATE_REPORTS_REQUIRE_LOGIN": "1"}):
        with pytest.raises(SettingsError):
            AuthSettings.from_env(broken)


def test_dashboard_public_without_sign_in_is_refused_as_a_setting_that_would_do_nothing() -> None:
    """Fresh user: LLMGATE_DASHBOARD_PUBLIC=1 without sign-in started and did nothing."""
    with pytest.raises(SettingsError, match="LLMGATE_DASHBOARD_PUBLIC is on but sign-in"):
        AuthSettings.from_env({"LLMGATE_DASHBOARD_PUBLIC": "1"})
    assert AuthSettings.from_env({}) is None
