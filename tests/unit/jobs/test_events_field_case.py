"""The case from the field, with its exact values, from signed deliveries to GitHub's state.

"PR 11 (base `main`) and PR 12 (base `release`) share one head SHA. `/llmgate rerun` on PR 12
uses `release` as base and edits only PR 12's comment; a `check_run` `rerequested` for that SHA
re-gates each PR against its own base and posts to each separately."

Deliveries go through the real receiver (signature, routing, the arq queue in the test's
Redis); an in-process arq worker then runs the jobs against the fake GitHub and a real git
repository whose ``main`` and ``release`` give the shared head different verdicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.app_support import encode, fixture_json, post, running_app, settings
from tests.unit.events_support import build_two_base_repo, only, run_burst, worker_env
from worker.contract import COMMENT_MARKER

OWNER, NAME = "Codertocat", "Hello-World"  # the fixtures' repository


@pytest.fixture()
def shas(tmp_path: Path) -> dict[str, str]:
    return build_two_base_repo(tmp_path / "repo")


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str, tmp_path: Path,
           shas: dict[str, str]) -> Iterator[FakeGitHubServer]:
    with worker_env(monkeypatch, redis_url, tmp_path / "work") as server:
        old = f"{COMMENT_MARKER}\nllmgate: an earlier run"
        server.fake.setup({
            "pulls": [{"owner": OWNER, "repo": NAME, "number": number, "head_sha": shas["head"],
                       "base_sha": shas[base], "base_ref": base, "author": "Codertocat"}
                      for number, base in ((11, "main"), (12, "release"))],
            "comments": [{"owner": OWNER, "repo": NAME, "issue_number": number, "body": old,
                          "user_login": "llmgate[bot]", "user_type": "Bot"}
                         for number in (11, 12)]})
        yield server


def _repository(clone_url: str) -> dict[str, Any]:
    """The fixtures' repository, cloned from the local test repository instead of github.com."""
    repository: dict[str, Any] = fixture_json("pull_request.synchronize.json")["repository"]
    repository["clone_url"] = clone_url
    return repository


def _rerun_comment(clone_url: str) -> dict[str, Any]:
    data = fixture_json("issue_comment.created.on-pull-request.DERIVED.json")
    data["issue"]["number"] = 12
    data["comment"]["body"] = "/llmgate rerun"
    data["repository"] = _repository(clone_url)
    return data


def _rerequested(clone_url: str, head: str, check_run_id: int) -> dict[str, Any]:
    data = fixture_json("check_run.rerequested.json")
    repository = _repository(clone_url)
    pulls = [{"number": n, "base": {"repo": {"id": repository["id"]}}} for n in (11, 12)]
    data["check_run"].update(id=check_run_id, name="llmgate", head_sha=head,
                             external_id="pr:12", pull_requests=pulls)
    data["check_run"]["app"]["id"] = 4242
    data["repository"] = repository
    return data


def _comment(state: dict[str, Any], number: int) -> dict[str, Any]:
    comment: dict[str, Any] = only(state["comments"], issue_number=number)
    return comment


async def test_shared_head_with_two_bases(github, shas, redis_url, tmp_path):
    clone_url = (tmp_path / "repo").as_uri()
    head, main, release = shas["head"], shas["main"], shas["release"]
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "field-1", encode(_rerun_comment(clone_url)))
    assert answer.json() == {"status": "queued"}
    await run_burst()

    state = github.state()
    [run] = state["check_runs"]
    assert (run["head_sha"], run["external_id"], run["conclusion"]) == (head, "pr:12", "success")
    pr11, pr12 = _comment(state, 11), _comment(state, 12)
    assert len(pr11["history"]) == 1  # PR 11's comment is untouched
    assert len(pr12["history"]) == 2
    assert f"**base** `{release[:7]}`" in pr12["body"] and "llmgate: pass" in pr12["body"]
    assert [(r["comment_id"], r["content"]) for r in state["reactions"]] == [
        (fixture_json("issue_comment.created.on-pull-request.DERIVED.json")["comment"]["id"],
         "+1")]

    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "check_run", "field-2",
                            encode(_rerequested(clone_url, head, run["id"])))
    assert answer.json() == {"status": "queued"}
    await run_burst()

    state = github.state()
    assert len(state["comments"]) == 2  # edited in place, none added
    new_runs = {r["external_id"]: r for r in state["check_runs"][1:]}
    assert sorted(new_runs) == ["pr:11", "pr:12"] and len(state["check_runs"]) == 3
    assert new_runs["pr:11"]["conclusion"] == "failure"  # 1.0 at main -> 0.75
    # PR 12's own verdict (0.75 at release -> 0.75) passes, but the commit's one llmgate
    # check shows the most blocking verdict of its open PRs (worker/gate/shared_head.py): before,
    # whichever ran last decided for both, and PR 11 could pass main's required check
    assert (new_runs["pr:12"]["conclusion"], new_runs["pr:12"]["output"]["title"]) == (
        "failure", "llmgate: blocked: this commit is also the head of #11 into main, which "
                   "failed")
    assert "| #12 | `release` | success | llmgate: pass" in new_runs["pr:12"]["output"]["summary"]
    assert all(r["head_sha"] == head for r in new_runs.values())
    pr11 = _comment(state, 11)
    assert len(pr11["history"]) == 2
    assert f"**base** `{main[:7]}`" in pr11["body"] and "llmgate: fail" in pr11["body"]
    assert f"**base** `{release[:7]}`" in _comment(state, 12)["body"]
    assert state["violations"] == []


async def test_rerun_on_a_closed_pull_request_runs_nothing(github, shas, redis_url, tmp_path):
    """Case from the field: PR 11 is open and PR 12 closed at the same head; `/llmgate rerun`
    on PR 12 must not create a check run on that commit (a `cancelled` one there would become
    the commit's newest `llmgate` check and block PR 11)."""
    github.fake.setup({"pulls": [
        {"owner": OWNER, "repo": NAME, "number": number, "head_sha": shas["head"],
         "base_sha": shas[base], "base_ref": base, "author": "Codertocat", "state": state}
        for number, base, state in ((11, "main", "open"), (12, "release", "closed"))]})
    clone_url = (tmp_path / "repo").as_uri()
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "closed-1",
                            encode(_rerun_comment(clone_url)))
    assert answer.json() == {"status": "queued"}
    await run_burst()

    state = github.state()
    assert state["check_runs"] == []
    assert [r["content"] for r in state["reactions"]] == ["confused"]
    [reply] = [c for c in state["comments"] if c["issue_number"] == 12 and len(c["history"]) == 1
               and COMMENT_MARKER not in c["body"]]
    assert reply["body"] == ("llmgate runs nothing on a closed pull request: reopen it to gate "
                             "its head again.")
    assert len(_comment(state, 11)["history"]) == 1 and state["violations"] == []
