"""The supersede decision and watch, with a real Redis and the schema-checking fake GitHub."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import runs_support
from tests.unit.runs_support import (
    BASE_SHA,
    HEAD_SHA,
    NEW_SHA,
    pull,
)
from tests.unit.worker_support import OWNER, REPO
from worker.contract import PR_CLOSED, RepoRef, pr_head_key, pr_head_value, split_pr_head
from worker.gate import supersede
from worker.gate.request import GateRequest
from worker.gate.supersede import (
    CLOSED_REASON,
    Supersede,
    Superseded,
    base_changed_reason,
    confirmed_reason,
    names_run,
    pushed_reason,
    supervise,
)
from worker.github.client import GitHubClient, PullInfo

REPO_REF = RepoRef(owner=OWNER, name=REPO, clone_url="https://example.test/acme/tiny.git")
REQUEST = GateRequest(REPO_REF, 1, HEAD_SHA, BASE_SHA)
#: A run that knows its base branch (every pull request run does; `REQUEST` stands for one
#: that does not).
ON_MAIN = GateRequest(REPO_REF, 1, HEAD_SHA, BASE_SHA, base_ref="main")
KEY = pr_head_key(REPO_REF, 1)

fake_gh, gh = runs_support.fake_gh, runs_support.gh  # fixtures


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
    assert time.monotonic() - started < 3.0  # far before the work's 30 s; slack for a busy CI


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


def test_the_record_is_head_at_base_and_splits_at_the_first_at_sign() -> None:
    assert pr_head_value(HEAD_SHA, "main") == f"{HEAD_SHA}@main"
    assert split_pr_head(f"{HEAD_SHA}@main") == (HEAD_SHA, "main")
    assert split_pr_head(f"{HEAD_SHA}@rel@2") == (HEAD_SHA, "rel@2")  # git allows "@" in refs
    assert split_pr_head(HEAD_SHA) == (HEAD_SHA, "")  # an older web process: a bare SHA
    assert split_pr_head(PR_CLOSED) == (PR_CLOSED, "")
    stamped = pr_head_value(HEAD_SHA, "rel@2", "2026-11-30T10:05:00Z")
    assert stamped == f"{HEAD_SHA}@rel@2 2026-11-30T10:05:00Z"  # updated_at orders records
    assert split_pr_head(stamped) == (HEAD_SHA, "rel@2")
    assert names_run(stamped, HEAD_SHA, "rel@2")
    assert not names_run(f"{PR_CLOSED} 2026-11-30T10:05:00Z", HEAD_SHA, "main")


@pytest.mark.parametrize(("recorded", "base_ref", "own"), [
    (f"{HEAD_SHA}@main", "main", True),  # its own head and base: a /llmgate rerun too
    (f"{HEAD_SHA}@release", "main", False),  # retargeted to release
    (f"{NEW_SHA}@main", "main", False),  # a newer push
    (f"{HEAD_SHA}@rel@2", "rel", False),
    (HEAD_SHA, "main", True),  # a bare SHA (older web process): the heads only
    (NEW_SHA, "main", False),
    (f"{HEAD_SHA}@release", "", True),  # a run without a base: the heads only
    (f"{NEW_SHA}@release", "", False),
    (PR_CLOSED, "main", False),
    (PR_CLOSED, "", False),
])
def test_names_run_compares_head_and_base_when_both_sides_know_the_base(
        recorded: str, base_ref: str, own: bool) -> None:
    assert names_run(recorded, HEAD_SHA, base_ref) is own


def _pull_info(head_sha: str = HEAD_SHA, base_ref: str = "main",
               state: str = "open") -> PullInfo:
    return PullInfo(head_sha, BASE_SHA, base_ref, f"{OWNER}/{REPO}",
                    "https://example.test/acme/tiny.git", state)


@pytest.mark.parametrize(("pull_info", "base_ref", "expected"), [
    (_pull_info(), "main", None),
    (_pull_info(base_ref="release"), "main",
     "Superseded: the pull request's base changed to release."),
    (_pull_info(base_ref="release"), "", None),  # a run without a base: the heads only
    (_pull_info(head_sha=NEW_SHA, base_ref="release"), "main",
     "Superseded by a push of ccccccc."),  # a new head says so, whatever the base
    (_pull_info(base_ref="release", state="closed"), "main", CLOSED_REASON),
])
def test_confirmed_reason_reads_state_head_and_base_of_the_pull(
        pull_info: PullInfo, base_ref: str, expected: str | None) -> None:
    assert confirmed_reason(pull_info, HEAD_SHA, base_ref) == expected


async def test_a_new_base_of_the_same_head_supersedes_once_github_agrees(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    await redis.set(KEY, pr_head_value(HEAD_SHA, "main"))
    assert await Supersede(redis, gh, ON_MAIN).reason() is None  # its own head and base
    await redis.set(KEY, HEAD_SHA)  # a bare SHA of an older web process: the heads only
    assert await Supersede(redis, gh, ON_MAIN).reason() is None
    await redis.set(KEY, pr_head_value(HEAD_SHA, "release"))
    assert await Supersede(redis, gh, REQUEST).reason() is None  # no base: the heads only
    assert _pull_requests(fake_gh) == 0
    fake_gh.setup({"pulls": [pull() | {"base_ref": "release"}]})
    watch = Supersede(redis, gh, ON_MAIN)
    assert await watch.reason() == base_changed_reason("release") == (
        "Superseded: the pull request's base changed to release.")
    assert watch.same_head
    await redis.set(KEY, pr_head_value(NEW_SHA, "release"))
    fake_gh.setup({"pulls": [pull(head_sha=NEW_SHA) | {"base_ref": "release"}]})
    pushed = Supersede(redis, gh, ON_MAIN)
    assert await pushed.reason() == "Superseded by a push of ccccccc."
    assert not pushed.same_head
    assert _pull_requests(fake_gh) == 2


async def test_github_is_asked_again_once_a_contradiction_is_old(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Field case (tester): the ``edited`` delivery of a retarget came before GitHub's API
    showed the new base; once it does, the old-base run is superseded, not kept for good."""
    fake_gh.setup({"pulls": [pull()]})  # GitHub still says main
    await redis.set(KEY, pr_head_value(HEAD_SHA, "release"))
    watch = Supersede(redis, gh, ON_MAIN)
    assert await watch.reason() is None
    fake_gh.setup({"pulls": [{**pull(), "base_ref": "release"}]})  # GitHub catches up
    assert await watch.reason() is None  # within CONTRADICTED_TTL_S: not asked again
    assert _pull_requests(fake_gh) == 1
    monkeypatch.setattr(supersede, "CONTRADICTED_TTL_S", 0.0)
    assert await watch.reason() == base_changed_reason("release")
    assert _pull_requests(fake_gh) == 2


async def test_a_new_base_record_github_contradicts_is_ignored_from_then_on(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    """A late ``edited`` record: GitHub says the pull request is back on ``main``."""
    fake_gh.setup({"pulls": [pull()]})
    await redis.set(KEY, pr_head_value(HEAD_SHA, "release"))
    watch = Supersede(redis, gh, ON_MAIN)
    assert await watch.reason() is None
    assert await watch.reason() is None
    assert _pull_requests(fake_gh) == 1


async def test_a_record_of_two_retargets_in_one_second_is_confirmed_even_when_it_names_the_run(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Field case: retargets main -> release -> next within one second (one ``updated_at``
    stamp), delivered swapped. The web process could not order them and marks the record
    (``~``); the release run it names asks GitHub (base ``next``) and is superseded, while the
    next run, which the record does not name, is confirmed by GitHub and goes on."""
    fake_gh.setup({"pulls": [pull() | {"base_ref": "next"}]})
    await redis.set(KEY, pr_head_value(HEAD_SHA, "release", "2026-11-30T10:07:00Z") + "~")
    on_release = GateRequest(REPO_REF, 1, HEAD_SHA, BASE_SHA, base_ref="release")
    watch = Supersede(redis, gh, on_release)
    assert await watch.reason() == base_changed_reason("next")
    assert watch.same_head
    on_next = Supersede(redis, gh, GateRequest(REPO_REF, 1, HEAD_SHA, BASE_SHA, base_ref="next"))
    assert await on_next.reason() is None
    assert await on_next.reason() is None  # within CONTRADICTED_TTL_S: not asked again
    assert _pull_requests(fake_gh) == 2
    # in order, the record names the next run: GitHub agrees once, and that stands (no GET per
    # poll for the rest of the run, however long), until the record changes
    await redis.set(KEY, pr_head_value(HEAD_SHA, "next", "2026-11-30T10:07:00Z") + "~")
    monkeypatch.setattr(supersede, "CONTRADICTED_TTL_S", 0.0)
    for _ in range(3):
        assert await on_next.reason() is None
    assert _pull_requests(fake_gh) == 3
    await redis.set(KEY, pr_head_value(HEAD_SHA, "next", "2026-11-30T10:08:00Z"))  # unmarked
    assert await Supersede(redis, gh, GateRequest(
        REPO_REF, 1, HEAD_SHA, BASE_SHA, base_ref="next")).reason() is None
    assert _pull_requests(fake_gh) == 3  # a record that names the run is trusted again


async def test_a_fresh_question_forgets_what_github_said_earlier_in_the_run(
        redis: Redis, gh: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    """Issue 30, the field case: main -> loose -> main, the ``edited`` to loose delivered last.
    Its run on loose asked GitHub at its start, and GitHub's API, a moment behind, said loose:
    the polls that follow trust that for `CONTRADICTED_TTL_S`. Right before the run publishes
    it asks afresh, and GitHub now says main: it is superseded, by a new base of its own head."""
    on_loose = GateRequest(REPO_REF, 1, HEAD_SHA, BASE_SHA, base_ref="loose")
    fake_gh.setup({"pulls": [pull() | {"base_ref": "loose"}]})  # lagging
    await redis.set(KEY, pr_head_value(HEAD_SHA, "main", "2026-11-30T10:00:02Z"))
    watch = Supersede(redis, gh, on_loose)
    assert await watch.reason() is None
    fake_gh.setup({"pulls": [pull()]})  # GitHub catches up: main
    assert await watch.reason() is None  # a poll: not asked again
    assert _pull_requests(fake_gh) == 1
    assert await watch.reason(fresh=True) == base_changed_reason("main")
    assert watch.same_head and watch.pull is not None and watch.pull.base_ref == "main"
    assert _pull_requests(fake_gh) == 2
    # a record that names the run unmarked is trusted, fresh or not: no question
    on_main = Supersede(redis, gh, ON_MAIN)
    assert await on_main.reason(fresh=True) is None and on_main.pull is None
    assert _pull_requests(fake_gh) == 2
    # an unordered record (`~`) GitHub confirmed once is confirmed again when fresh
    await redis.set(KEY, pr_head_value(HEAD_SHA, "main", "2026-11-30T10:00:02Z") + "~")
    assert await on_main.reason() is None and await on_main.reason() is None
    assert _pull_requests(fake_gh) == 3
    assert await on_main.reason(fresh=True) is None
    assert _pull_requests(fake_gh) == 4
