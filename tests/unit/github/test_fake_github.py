"""The fake GitHub itself: it must refuse what GitHub refuses, and record it."""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import jwt
import pytest

from tests.fakes.fake_github import (
    EXP_PASSED,
    IAT_IN_FUTURE,
    FakeGitHubServer,
    generate_app_keypair,
    running_fake_github_process,
)
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import APP_ID, BASE_SHA, HEAD_SHA, OWNER, REPO
from worker.github.auth import AppCredentials, app_jwt

app_keys, fake_gh_server, fake_gh = fx.app_keys, fx.fake_gh_server, fx.fake_gh
UA = {"User-Agent": "llmgate-tests"}


def _token(fake: FakeGitHubServer, private_pem: str) -> str:
    jwt_ = app_jwt(AppCredentials(APP_ID, private_pem))
    resp = httpx.post(f"{fake.url}/app/installations/1/access_tokens", json={},
                      headers={**UA, "Authorization": f"Bearer {jwt_}"})
    assert resp.status_code == 201, resp.text
    token: str = resp.json()["token"]
    return token


def _auth(token: str) -> dict[str, str]:
    return {**UA, "Authorization": f"token {token}"}


def _kinds(fake: FakeGitHubServer) -> list[str]:
    return [v["kind"] for v in fake.state()["violations"]]


def test_invalid_body_gets_githubs_422(fake_gh: FakeGitHubServer,
                                       app_keys: tuple[str, str]) -> None:
    token = _token(fake_gh, app_keys[0])
    body = {"name": "llmgate", "head_sha": HEAD_SHA, "status": "done"}
    resp = httpx.post(f"{fake_gh.url}/repos/{OWNER}/{REPO}/check-runs", json=body,
                      headers=_auth(token))
    assert resp.status_code == 422
    answer = resp.json()
    assert answer["message"] == "Validation Failed"
    assert answer["documentation_url"].startswith("https://docs.github.com/")
    assert answer["errors"][0]["field"] == "body/status"
    assert "'done' is not one of" in answer["errors"][0]["message"]
    assert _kinds(fake_gh) == ["invalid_request"]
    assert fake_gh.state()["check_runs"] == []


def test_unknown_endpoints_are_404_violations(fake_gh: FakeGitHubServer) -> None:
    assert httpx.get(f"{fake_gh.url}/repos/{OWNER}/{REPO}/branches", headers=UA).status_code == 404
    assert httpx.delete(f"{fake_gh.url}/repos/{OWNER}/{REPO}/check-runs/1",
                        headers=UA).status_code == 404
    assert _kinds(fake_gh) == ["unknown_endpoint", "unknown_endpoint"]


def test_body_that_is_not_json_is_a_400(fake_gh: FakeGitHubServer,
                                        app_keys: tuple[str, str]) -> None:
    resp = httpx.post(f"{fake_gh.url}/repos/{OWNER}/{REPO}/issues/1/comments", content=b"{nope",
                      headers=_auth(_token(fake_gh, app_keys[0])))
    assert (resp.status_code, resp.json()["message"]) == (400, "Problems parsing JSON")
    assert _kinds(fake_gh) == ["invalid_json"]


def test_requests_without_user_agent_are_forbidden(fake_gh: FakeGitHubServer) -> None:
    resp = httpx.get(f"{fake_gh.url}/app", headers={"User-Agent": ""})
    assert resp.status_code == 403
    assert _kinds(fake_gh) == ["no_user_agent"]


def _jwt(private_pem: str, iat: int, exp: int, iss: object = APP_ID) -> str:
    return jwt.encode({"iat": iat, "exp": exp, "iss": str(iss)}, private_pem, algorithm="RS256")


def test_app_endpoints_verify_the_jwt(fake_gh: FakeGitHubServer,
                                      app_keys: tuple[str, str]) -> None:
    now = int(time.time())
    other_key, _ = generate_app_keypair(fresh=True)
    cases = {
        "no header": {},
        "installation token": {"Authorization": f"token {_token(fake_gh, app_keys[0])}"},
        "other key": {"Authorization": f"Bearer {_jwt(other_key, now - 60, now + 540)}"},
        "expired": {"Authorization": f"Bearer {_jwt(app_keys[0], now - 700, now - 100)}"},
        "too long": {"Authorization": f"Bearer {_jwt(app_keys[0], now - 60, now + 1200)}"},
        "wrong iss": {"Authorization": f"Bearer {_jwt(app_keys[0], now - 60, now + 540, 7)}"},
    }
    for name, headers in cases.items():
        resp = httpx.get(f"{fake_gh.url}/app", headers={**UA, **headers})
        assert resp.status_code == 401, name
    assert _kinds(fake_gh) == ["auth"] * len(cases)
    good = {"Authorization": f"Bearer {_jwt(app_keys[0], now - 60, now + 540)}"}
    assert httpx.get(f"{fake_gh.url}/app", headers={**UA, **good}).json()["id"] == int(APP_ID)


def test_repo_endpoints_need_a_live_installation_token(fake_gh: FakeGitHubServer,
                                                       app_keys: tuple[str, str]) -> None:
    url = f"{fake_gh.url}/repos/{OWNER}/{REPO}/collaborators/alice/permission"
    now = int(time.time())
    app_token = _jwt(app_keys[0], now - 60, now + 540)
    for headers in ({}, {"Authorization": "token ghs_made_up"},
                    {"Authorization": f"Bearer {app_token}"}):
        assert httpx.get(url, headers={**UA, **headers}).status_code == 401
    token = _token(fake_gh, app_keys[0])
    for scheme in ("token", "Bearer"):
        resp = httpx.get(url, headers={**UA, "Authorization": f"{scheme} {token}"})
        assert resp.status_code == 200
    fake_gh.setup({"token_ttl_s": -1})
    expired = _token(fake_gh, app_keys[0])
    assert httpx.get(url, headers=_auth(expired)).status_code == 401
    assert _kinds(fake_gh) == ["auth"] * 4


def test_comment_pages_carry_githubs_link_header(fake_gh: FakeGitHubServer,
                                                 app_keys: tuple[str, str]) -> None:
    fake_gh.setup({"comments": [{"owner": OWNER, "repo": REPO, "issue_number": 3,
                                 "body": str(i)} for i in range(5)]})
    headers = _auth(_token(fake_gh, app_keys[0]))
    url = f"{fake_gh.enterprise_url}/repos/{OWNER}/{REPO}/issues/3/comments"
    first = httpx.get(url, params={"per_page": 2}, headers=headers)
    assert [c["body"] for c in first.json()] == ["0", "1"]
    assert first.links["next"]["url"] == f"{url}?per_page=2&page=2"
    assert first.links["last"]["url"] == f"{url}?per_page=2&page=3"
    last = httpx.get(first.links["last"]["url"], headers=headers)
    assert [c["body"] for c in last.json()] == ["4"]
    assert set(last.links) == {"prev", "first"}
    assert httpx.get(url, params={"per_page": 101}, headers=headers).status_code == 422


def test_check_runs_for_ref_keep_the_latest_per_name(fake_gh: FakeGitHubServer,
                                                     app_keys: tuple[str, str]) -> None:
    fake_gh.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1, "head_sha": HEAD_SHA,
                              "base_sha": BASE_SHA, "head_ref": "feature"}]})
    headers = _auth(_token(fake_gh, app_keys[0]))
    runs_url = f"{fake_gh.url}/repos/{OWNER}/{REPO}/check-runs"
    ids = [httpx.post(runs_url, json={"name": "llmgate", "head_sha": HEAD_SHA},
                      headers=headers).json()["id"] for _ in range(2)]
    listing = f"{fake_gh.url}/repos/{OWNER}/{REPO}/commits/feature/check-runs"
    latest = httpx.get(listing, headers=headers).json()
    assert (latest["total_count"], latest["check_runs"][0]["id"]) == (1, ids[1])
    assert latest["check_runs"][0]["pull_requests"][0]["number"] == 1
    every = httpx.get(listing, params={"filter": "all"}, headers=headers).json()
    assert [r["id"] for r in every["check_runs"]] == ids[::-1]
    assert fake_gh.state()["violations"] == []


def test_other_endpoints_answer_in_the_specs_shape(fake_gh: FakeGitHubServer,
                                                   app_keys: tuple[str, str]) -> None:
    fake_gh.setup({"contents": {f"{OWNER}/{REPO}": {".llmgate.yml": "suites: []\n"}},
                   "pulls": [{"owner": OWNER, "repo": REPO, "number": 2, "head_sha": HEAD_SHA,
                              "base_sha": BASE_SHA, "files": ["a.py", "b.py"]}]})
    headers = _auth(_token(fake_gh, app_keys[0]))
    repo_url = f"{fake_gh.url}/repos/{OWNER}/{REPO}"
    raw = httpx.get(f"{repo_url}/contents/.llmgate.yml",
                    headers={**headers, "Accept": "application/vnd.github.raw"})
    assert raw.text == "suites: []\n"
    assert httpx.get(f"{repo_url}/contents/.llmgate.yml", headers=headers).json()["size"] == 11
    assert httpx.get(f"{repo_url}/contents/missing.yml", headers=headers).status_code == 404
    files = httpx.get(f"{repo_url}/pulls/2/files", headers=headers).json()
    assert [f["filename"] for f in files] == ["a.py", "b.py"]
    assert httpx.post(f"{repo_url}/check-suites/5/rerequest", headers=headers).status_code == 201
    now = int(time.time())
    app_headers = {**UA, "Authorization": f"Bearer {_jwt(app_keys[0], now - 60, now + 540)}"}
    installation = httpx.get(f"{repo_url}/installation", headers=app_headers).json()
    assert installation["account"]["login"] == OWNER
    assert fake_gh.state()["violations"] == []


def test_setup_refuses_an_incomplete_pull(fake_gh: FakeGitHubServer) -> None:
    resp = httpx.post(f"{fake_gh.url}/_fake/setup",
                      json={"pulls": [{"owner": OWNER, "repo": REPO, "number": 1}]})
    assert resp.status_code == 400 and "head_sha" in resp.json()["message"]


def test_runs_as_a_separate_process(tmp_path: Path, app_keys: tuple[str, str]) -> None:
    config = {"app_id": APP_ID, "public_key_pem": app_keys[1],
              "collaborators": {"alice": "maintain"}}
    with running_fake_github_process(tmp_path, config) as remote:
        jwt_ = app_jwt(AppCredentials(APP_ID, app_keys[0]))
        token = httpx.post(f"{remote.url}/app/installations/9/access_tokens", json={},
                           headers={**UA, "Authorization": f"Bearer {jwt_}"}).json()["token"]
        resp = httpx.get(f"{remote.url}/repos/{OWNER}/{REPO}/collaborators/alice/permission",
                         headers=_auth(token))
        assert resp.json()["permission"] == "write"
        state = remote.state()
        assert [r["status"] for r in state["requests"]] == [201, 200]
        on_disk = json.loads((tmp_path / "fake-github-state.json").read_text())
        assert on_disk["requests"] == state["requests"]
        remote.reset()
        assert remote.state()["requests"] == []
    assert remote.process is not None and remote.process.returncode is not None


@pytest.mark.parametrize("prefix", ["", "/api/v3"])
def test_served_at_the_root_and_under_api_v3(fake_gh: FakeGitHubServer,
                                             app_keys: tuple[str, str], prefix: str) -> None:
    token = _token(fake_gh, app_keys[0])
    resp = httpx.post(f"{fake_gh.url}{prefix}/repos/{OWNER}/{REPO}/issues/4/comments",
                      json={"body": "hi"}, headers=_auth(token))
    assert resp.status_code == 201
    assert resp.json()["url"].startswith(f"{fake_gh.url}{prefix}/repos/{OWNER}/{REPO}/")
    assert resp.json()["user"]["type"] == "Bot"


def test_jwt_times_are_checked_by_the_fakes_clock_in_githubs_words(
        fake_gh: FakeGitHubServer, app_keys: tuple[str, str]) -> None:
    fake_gh.setup({"clock_offset_s": -300})  # GitHub's clock 5 minutes behind this machine's
    now = int(time.time())
    answers = {}
    for name, (iat, exp) in {"ours": (now - 60, now + 540), "github's": (now - 360, now + 240),
                             "passed": (now - 700, now - 400)}.items():
        resp = httpx.get(f"{fake_gh.url}/app",
                         headers={**UA, "Authorization": f"Bearer {_jwt(app_keys[0], iat, exp)}"})
        answers[name] = (resp.status_code, resp.json().get("message"))
        server_s = parsedate_to_datetime(resp.headers["date"]).timestamp()
        assert abs(server_s - (time.time() - 300)) < 3 and len(resp.headers.get_list("date")) == 1
    assert answers == {"ours": (401, IAT_IN_FUTURE), "github's": (200, None),
                       "passed": (401, EXP_PASSED)}


def test_texts_over_githubs_limits_in_bytes_get_its_422(fake_gh: FakeGitHubServer,
                                                        app_keys: tuple[str, str]) -> None:
    headers = _auth(_token(fake_gh, app_keys[0]))
    body = {"name": "llmgate", "head_sha": HEAD_SHA,
            "output": {"title": "t", "summary": "検" * 30000}}  # 30000 characters, 90000 bytes
    resp = httpx.post(f"{fake_gh.url}/repos/{OWNER}/{REPO}/check-runs", json=body,
                      headers=headers)
    assert (resp.status_code, resp.json()["errors"]) == (422, [{
        "resource": "CheckRun", "code": "custom", "field": "summary",
        "message": "summary exceeds a maximum bytesize of 65535"}])
    resp = httpx.post(f"{fake_gh.url}/repos/{OWNER}/{REPO}/issues/7/comments",
                      json={"body": "🚦" * 20000}, headers=headers)
    assert resp.status_code == 422 and resp.json()["errors"][0]["field"] == "body"
    assert _kinds(fake_gh) == ["too_long"] * 2
    assert fake_gh.state()["check_runs"] == [] and fake_gh.state()["comments"] == []


def test_a_fault_revokes_the_token_it_refuses(fake_gh: FakeGitHubServer,
                                              app_keys: tuple[str, str]) -> None:
    url = f"{fake_gh.url}/repos/{OWNER}/{REPO}/collaborators/alice/permission"
    fake_gh.setup({"faults": [{"operation": "repos/get-collaborator-permission-level",
                               "revoke_token": True}]})
    token = _token(fake_gh, app_keys[0])
    first = httpx.get(url, headers=_auth(token))
    assert (first.status_code, first.json()["message"]) == (401, "Bad credentials")
    assert httpx.get(url, headers=_auth(token)).status_code == 401  # refused for good
    assert httpx.get(url, headers=_auth(_token(fake_gh, app_keys[0]))).status_code == 200
    assert [t.get("revoked", False) for t in fake_gh.state()["tokens"]] == [True, False]
