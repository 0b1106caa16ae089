"""`worker.gate.untrusted` against the schema-checking fake GitHub, real git and a real Redis."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import BASE_SHA, HEAD_SHA, OWNER, REPO, requests_for
from worker.checkout import Checkouts
from worker.contract import ApprovePayload
from worker.gate import untrusted
from worker.gate.head_history import HeadHistory
from worker.gate.trust import ApprovalStore, PullFacts, Verdict
from worker.github.client import GitHubClient, PullInfo

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh

PULL = {"owner": OWNER, "repo": REPO, "number": 9, "head_sha": HEAD_SHA, "base_sha": BASE_SHA,
        "clone_url": "https://example.test/o/r.git", "head_repo_full_name": "mallory/hello",
        "author": "mallory"}
REPO_REF = {"owner": OWNER, "name": REPO, "clone_url": "https://example.test/o/r.git"}


@pytest.fixture()
async def store(redis_url: str) -> AsyncIterator[ApprovalStore]:
    redis = Redis.from_url(redis_url)
    yield ApprovalStore(redis)
    await redis.aclose()


@pytest.fixture()
async def heads(redis_url: str) -> AsyncIterator[HeadHistory]:
    redis = Redis.from_url(redis_url)
    yield HeadHistory(redis)
    await redis.aclose()


def _approval(approver: str, head_sha: str, comment_id: int = 0,
              written: str = "2026-11-30T10:05:00Z") -> ApprovePayload:
    payload = ApprovePayload(delivery_id="d", installation_id=fx.INSTALLATION_ID, repo=REPO_REF,
                             pr_number=9, approver=approver,
                             source="comment" if comment_id else "button", head_sha=head_sha,
                             comment_id=comment_id)
    if comment_id:
        payload["comment_created_at"] = written
    return payload


async def test_record_approval_statuses(client: GitHubClient, fake_gh: FakeGitHubServer,
                                        store: ApprovalStore, heads: HeadHistory) -> None:
    fake_gh.setup({"pulls": [PULL], "collaborators": {"ann": "maintain", "bob": "triage"}})
    await heads.record(f"{OWNER}/{REPO}", 9, HEAD_SHA, "2026-11-30T10:00:00Z")

    async def record(payload: ApprovePayload) -> tuple[str, PullInfo | None]:
        outcome = await untrusted.record_approval(client, store, heads, payload)
        return outcome.status, outcome.pull

    assert await record(_approval("bob", HEAD_SHA)) == ("refused", None)
    assert await record(_approval("ann", "f" * 40)) == (
        "stale", None)  # the button of an older head's check run
    assert await record(_approval("ann", "abcdef1", 31)) == (
        "stale", None)  # a pinned SHA that is not the head
    status, pull = await record(_approval("ann", HEAD_SHA[:7], 32))
    assert status == "approved" and pull is not None and pull.head_sha == HEAD_SHA
    assert await record(_approval("ann", HEAD_SHA)) == ("duplicate", None)
    reactions = [(r["comment_id"], r["content"]) for r in fake_gh.state()["reactions"]]
    assert reactions == [(31, "confused"), (32, "+1")]
    approval = await store.get(f"{OWNER}/{REPO}", 9, HEAD_SHA)
    assert approval is not None and approval.approver == "ann"
    assert fake_gh.state()["violations"] == []


async def test_a_pinned_prefix_approves_only_the_head_it_was_written_for(
        client: GitHubClient, fake_gh: FakeGitHubServer, store: ApprovalStore,
        heads: HeadHistory) -> None:
    """A fork that grinds a commit whose SHA starts with the 7 hex a writer named (2^28 tries)
    and pushes it after the comment gets nothing; a full SHA names one commit by itself."""
    reviewed, ground = "ab12cd3" + "0" * 33, "ab12cd3" + "f" * 33
    fake_gh.setup({"pulls": [{**PULL, "head_sha": ground}], "collaborators": {"ann": "write"}})
    await heads.record(f"{OWNER}/{REPO}", 9, reviewed, "2026-11-30T10:00:00Z")
    await heads.record(f"{OWNER}/{REPO}", 9, ground, "2026-11-30T10:06:00Z")
    outcome = await untrusted.record_approval(client, store, heads, _approval("ann", "ab12cd3", 41))
    assert (outcome.status, outcome.pull) == ("stale", None)
    assert outcome.reply.startswith("`/llmgate approve ab12cd3` was written when the head was "
                                    "`ab12cd3`, so it approves only that commit. The head is now "
                                    "`ab12cd3`, pushed after the comment")
    assert await store.get(f"{OWNER}/{REPO}", 9, ground) is None
    outcome = await untrusted.record_approval(client, store, heads, _approval("ann", ground, 42))
    assert outcome.status == "approved"  # named in full: written after the push, by necessity


async def test_an_untimed_comment_approves_only_a_full_sha(
        client: GitHubClient, fake_gh: FakeGitHubServer, store: ApprovalStore,
        heads: HeadHistory) -> None:
    fake_gh.setup({"pulls": [PULL], "collaborators": {"ann": "write"}})
    await heads.record(f"{OWNER}/{REPO}", 9, HEAD_SHA, "2026-11-30T10:00:00Z")
    untimed = _approval("ann", "", 51)
    del untimed["comment_created_at"]  # an older web process
    outcome = await untrusted.record_approval(client, store, heads, untimed)
    assert outcome.status == "stale"
    assert outcome.reply == (
        "llmgate cannot tell which head this pull request had when `/llmgate approve` was "
        "written (its delivery did not say when it was written), so nothing ran. To run "
        f"`{HEAD_SHA[:7]}`, review it and comment `/llmgate approve {HEAD_SHA}` (the full SHA).")
    assert (await untrusted.record_approval(client, store, heads, _approval(
        "ann", HEAD_SHA, 52, written="not a time"))).status == "approved"


async def test_verdict_and_waiting_check_run(client: GitHubClient, fake_gh: FakeGitHubServer,
                                             store: ApprovalStore, tmp_path: Path) -> None:
    fake_gh.setup({"pulls": [PULL], "collaborators": {"ann": "write"}})
    checkouts = Checkouts(tmp_path / "work")
    same_repo = PullFacts(f"{OWNER}/{REPO}", f"{OWNER}/{REPO}", "ann")
    verdict = await untrusted.verdict_for(client, checkouts, store, REPO_REF, 9, HEAD_SHA,
                                          BASE_SHA, same_repo)
    assert verdict == Verdict("run", True)  # no git needed: a writer's own branch
    check_run_id = await client.create_check_run(OWNER, REPO, HEAD_SHA)
    waiting = Verdict("wait", False, "it comes from the fork `mallory/hello`", "approve")
    await untrusted.conclude_waiting(client, REPO_REF, check_run_id, 9, HEAD_SHA, waiting)
    [run] = fake_gh.state()["check_runs"]
    assert (run["conclusion"], run["external_id"]) == ("action_required", "pr:9")
    [patch] = requests_for(fake_gh.state(), "checks/update")
    assert patch["body"]["actions"][0]["identifier"] == "approve"
    assert fake_gh.state()["violations"] == []


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c",
                           "user.email=t@example.com", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.parametrize(("config", "policy"), [
    ("version: 1\nuntrusted: never\nsuites: []\n", "never"),
    ("version: 1\nuntrusted: run\n", "run"),
    ("version: 1\nsuites: []\n", "approve"),
    (None, "approve"),
])
async def test_policy_is_read_from_the_base_commit(tmp_path: Path, config: str | None,
                                                   policy: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / ("README.md" if config is None else ".llmgate.yml")).write_text(config or "hi\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    ref = {"owner": "acme", "name": "repo", "clone_url": repo.as_uri()}
    assert await untrusted.read_base_policy(Checkouts(tmp_path / "work"), ref, base,
                                            None) == policy
    missing = "0" * 40
    assert await untrusted.read_base_policy(Checkouts(tmp_path / "work"), ref, missing,
                                            None) == "approve"  # git fails: the safe default
