"""The fake GitHub's faults (before or after performing a request, by rate and path) and its
enforcement of GitHub's documented secondary rate limits."""

from __future__ import annotations

import httpx

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_github_faults import (
    CONTENT_PER_HOUR,
    CONTENT_PER_MINUTE,
    ENDPOINT_POINTS_PER_MINUTE,
    SecondaryLimits,
)
from tests.unit import github_fixtures as fx
from tests.unit.github.test_fake_github import _auth, _token
from tests.unit.github_fixtures import HEAD_SHA, OWNER, REPO
from worker.github.ratelimit import rate_limit_wait_s

app_keys, fake_gh_server, fake_gh = fx.app_keys, fx.fake_gh_server, fx.fake_gh
CHECKS = f"/repos/{OWNER}/{REPO}/check-runs"
COMMENTS = f"/repos/{OWNER}/{REPO}/issues/3/comments"


def _create_check(fake: FakeGitHubServer, token: str) -> httpx.Response:
    return httpx.post(f"{fake.url}{CHECKS}", headers=_auth(token),
                      json={"name": "llmgate", "head_sha": HEAD_SHA, "status": "in_progress"})


def test_a_502_after_the_post_has_created_the_check_run(fake_gh: FakeGitHubServer,
                                                        app_keys: tuple[str, str]) -> None:
    token = _token(fake_gh, app_keys[0])
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 502, "after": True}]})
    first, second = _create_check(fake_gh, token), _create_check(fake_gh, token)
    assert (first.status_code, second.status_code) == (502, 201)
    state = fake_gh.state()
    assert len(state["check_runs"]) == 2  # the 502 hid a success: a naive retry duplicates
    posts = [r for r in state["requests"] if r["operation"] == "checks/create"]
    assert [(r["status"], r["fault"], r.get("fault_after")) for r in posts] == [
        (502, True, True), (201, False, None)]
    assert state["violations"] == []


def test_a_fault_before_the_post_creates_nothing(fake_gh: FakeGitHubServer,
                                                 app_keys: tuple[str, str]) -> None:
    token = _token(fake_gh, app_keys[0])
    fake_gh.setup({"faults": [{"path_glob": "/repos/*/check-runs", "status": 503}]})
    assert _create_check(fake_gh, token).status_code == 503
    assert fake_gh.state()["check_runs"] == []
    fake_gh.setup({"faults": [{"operation": "checks/create", "status": 500, "times": None}]})
    fake_gh.setup({"clear_faults": True})
    assert _create_check(fake_gh, token).status_code == 201


def _statuses_at_rate(fake: FakeGitHubServer, private_pem: str) -> list[int]:
    fake.setup({"reset": True, "faults": [{"method": "POST", "status": 500, "rate": 0.5,
                                           "path_glob": "/repos/*/issues/*/comments",
                                           "seed": 7, "times": None, "after": True}]})
    token = _token(fake, private_pem)
    return [httpx.post(f"{fake.url}{COMMENTS}", json={"body": f"c{i}"},
                       headers=_auth(token)).status_code for i in range(20)]


def test_a_rate_fault_answers_a_seeded_fraction_and_repeats(fake_gh: FakeGitHubServer,
                                                            app_keys: tuple[str, str]) -> None:
    first = _statuses_at_rate(fake_gh, app_keys[0])
    assert set(first) == {201, 500} and 4 <= first.count(500) <= 16
    assert len(fake_gh.state()["comments"]) == 20  # every one was performed (after: true)
    assert _statuses_at_rate(fake_gh, app_keys[0]) == first  # same seed, same answers
    reads = httpx.get(f"{fake_gh.url}{COMMENTS}", headers=_auth(_token(fake_gh, app_keys[0])))
    assert reads.status_code == 200  # the fault names POST only
    assert fake_gh.state()["faults"][0]["seen"] == 20


def test_writes_over_the_per_minute_limit_are_refused_with_retry_after(
        fake_gh: FakeGitHubServer, app_keys: tuple[str, str]) -> None:
    token = _token(fake_gh, app_keys[0])
    fake_gh.setup({"secondary_limits": {"per_minute": 3}})
    answers = [_create_check(fake_gh, token) for _ in range(4)]
    assert [a.status_code for a in answers] == [201, 201, 201, 403]
    refused = answers[-1]
    wait_s = rate_limit_wait_s(403, refused.headers, refused.content)
    assert wait_s is not None and 55 <= wait_s <= 60  # the worker reads it as a rate limit
    assert "secondary rate limit" in refused.json()["message"]
    state = fake_gh.state()
    assert len(state["check_runs"]) == 3  # the refused one was not performed
    assert [(v["kind"], v["detail"]) for v in state["violations"]] == [
        ("secondary_rate_limit", "3 content-generating requests per minute")]


def test_limits_are_off_by_default_and_never_count_app_jwt_requests() -> None:
    assert SecondaryLimits().check("1", "POST", "checks/create", 0.0) is None
    limits = SecondaryLimits()
    limits.configure({})
    assert all(limits.check(None, "POST", "apps/create-installation-access-token", 0.0) is None
               for _ in range(CONTENT_PER_MINUTE + 1))


def test_documented_per_minute_limit() -> None:
    limits = SecondaryLimits()
    limits.configure({})
    for i in range(CONTENT_PER_MINUTE):
        assert limits.check("1", "POST" if i % 2 else "PATCH", f"op{i % 9}", i * 0.5) is None
    refused = limits.check("1", "POST", "checks/create", 40.0)
    assert refused == ("80 content-generating requests per minute", 20.0)  # first at t=0
    assert limits.check("2", "POST", "checks/create", 40.0) is None  # another installation
    assert limits.check("1", "POST", "checks/create", 60.5) is None  # the first two expired


def test_documented_per_hour_limit() -> None:
    limits = SecondaryLimits()
    limits.configure({})
    for i in range(CONTENT_PER_HOUR):  # one every 7 s: 9 a minute, far under 80
        assert limits.check("1", "POST", "issues/create-comment", i * 7.0) is None
    assert limits.check("1", "POST", "checks/create", 3500.0) == (
        "500 content-generating requests per hour", 100.0)
    assert limits.check("1", "GET", "checks/list-for-ref", 3500.0) is None  # reads still go
    assert limits.check("1", "POST", "checks/create", 3600.5) is None


def test_documented_points_per_endpoint_per_minute() -> None:
    limits = SecondaryLimits()
    limits.configure({})
    for i in range(ENDPOINT_POINTS_PER_MINUTE):  # GETs cost 1 point
        assert limits.check("1", "GET", "pulls/get", i * 0.05) is None
    assert limits.check("1", "GET", "pulls/get", 50.0) == ("900 points per minute on pulls/get",
                                                            10.0)
    assert limits.check("1", "GET", "issues/list-comments", 50.0) is None  # another endpoint
