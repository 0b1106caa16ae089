"""Issue 30, part 5: an approval binds to what was reviewed, from signed deliveries to GitHub.

Field case: "``/llmgate approve`` without a SHA approved whatever the fork's head was when the
worker handled it: a push made after the writer's review ran unreviewed code with the
repository's keys." The writer comments ``/llmgate approve`` at T (head A), the fork pushes B at
T+1, the worker handles the comment at T+2: B must not run, and the reply says which commit the
comment approves and how to approve B. Deliveries go through the real receiver (signature,
routing, the arq queue in the test's Redis); an in-process arq worker then runs the jobs against
the schema-checking fake GitHub and a real git repository.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import worker_support
from tests.unit.app_support import encode, fixture_json, post, running_app, settings
from tests.unit.events_support import results, run_burst, worker_env
from worker.contract import approve_job_id
from worker.gate.trust import ApprovalStore

tiny_repo = worker_support.tiny_repo  # fixture
OWNER, NAME, NUMBER, FORK = "Codertocat", "Hello-World", 2, "forker/Hello-World"
WRITER = "writer"


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    with worker_env(monkeypatch, redis_url, tmp_path / "work") as server:
        yield server


def _time(minute: int) -> str:
    return f"2026-11-30T10:{minute:02d}:00Z"


class ForkPullRequest:
    """The fork's pull request: its pushes (the fake's state and a ``pull_request`` delivery
    each) and writers' comments, delivered to a running App."""

    def __init__(self, github: FakeGitHubServer, repo: Path, base_sha: str) -> None:
        self.github, self.clone_url, self.base_sha = github, repo.as_uri(), base_sha
        self.deliveries = 0

    async def _deliver(self, client: Any, event: str, data: dict[str, Any]) -> None:
        self.deliveries += 1
        answer = await post(client, event, f"binding-{self.deliveries}", encode(data))
        assert answer.json() == {"status": "queued"}, answer.json()

    async def push(self, client: Any, head_sha: str, minute: int,
                   action: str = "synchronize") -> None:
        """The fork's head becomes ``head_sha`` at ``minute`` (GitHub's ``updated_at``)."""
        self.github.fake.setup({"pulls": [{
            "owner": OWNER, "repo": NAME, "number": NUMBER, "head_sha": head_sha,
            "base_sha": self.base_sha, "base_ref": "main", "clone_url": self.clone_url,
            "head_repo_full_name": FORK, "head_clone_url": self.clone_url,
            "author": "forker"}]})
        data = fixture_json("pull_request.opened.from-fork.DERIVED.json")
        data["action"] = action
        data["repository"]["clone_url"] = self.clone_url
        pull = data["pull_request"]
        pull["updated_at"] = _time(minute)
        pull["head"]["sha"] = head_sha
        pull["base"].update(sha=self.base_sha, ref="main")
        await self._deliver(client, "pull_request", data)

    async def comment(self, client: Any, body: str, minute: int, comment_id: int) -> None:
        """A writer's comment ``body``, written at ``minute`` (``created_at``)."""
        data = fixture_json("issue_comment.created.on-pull-request.DERIVED.json")
        data["issue"]["number"] = NUMBER
        data["repository"]["clone_url"] = self.clone_url
        data["comment"].update(id=comment_id, body=body, created_at=_time(minute),
                               updated_at=_time(minute))
        data["comment"]["user"]["login"] = WRITER
        await self._deliver(client, "issue_comment", data)


def _conclusions(state: dict[str, Any], head_sha: str) -> list[str | None]:
    return [r["conclusion"] for r in state["check_runs"] if r["head_sha"] == head_sha]


def _replies(state: dict[str, Any]) -> list[str]:
    return [c["body"] for c in state["comments"] if c["issue_number"] == NUMBER
            and c["body"].startswith("`/llmgate approve")]


async def _approval_of(redis_url: str, head_sha: str) -> Any:
    redis = Redis.from_url(redis_url)
    try:
        return await ApprovalStore(redis).get(f"{OWNER}/{NAME}", NUMBER, head_sha)
    finally:
        await redis.aclose()


@pytest.mark.parametrize("push_handled_first", [False, True],
                         ids=["comment-handled-before-the-push", "push-handled-first"])
async def test_a_push_after_the_comment_is_not_run_on_its_approval(
        github, tiny_repo, redis_url, push_handled_first):
    repo, shas = tiny_repo
    reviewed, pushed = shas["pr/docs"], shas["pr/drop"]
    fork = ForkPullRequest(github, repo, shas["main"])
    async with running_app(settings(redis_url)) as client:
        await fork.push(client, reviewed, 0, "opened")
        await run_burst()
        assert _conclusions(github.state(), reviewed) == ["action_required"]

        if push_handled_first:  # the comment's delivery is the late one
            await fork.push(client, pushed, 2)
            await run_burst()
            await fork.comment(client, "/llmgate approve", 1, comment_id=701)
        else:  # the worker was busy: the push arrives before it takes up the comment
            await fork.comment(client, "/llmgate approve", 1, comment_id=701)
            await fork.push(client, pushed, 2)
        await run_burst()

    state = github.state()
    assert _conclusions(state, pushed) == ["action_required"]  # waiting, never run
    assert await _approval_of(redis_url, pushed) is None
    assert (await results([approve_job_id(
        {"owner": OWNER, "name": NAME, "clone_url": fork.clone_url}, NUMBER,
        comment_id=701)])) == {f"approve:{OWNER}/{NAME}#{NUMBER}:comment:701": {
            "status": "stale"}}
    assert _replies(state) == [
        f"`/llmgate approve` was written when the head was `{reviewed[:7]}`, so it approves "
        f"only that commit. The head is now `{pushed[:7]}`, pushed after the comment, and "
        "nothing ran: an approval covers the head its writer saw. To run "
        f"`{pushed[:7]}`, review it and comment `/llmgate approve` again, or "
        f"`/llmgate approve {pushed}`."]
    assert [(r["comment_id"], r["content"]) for r in state["reactions"]] == [(701, "confused")]
    assert state["violations"] == []


async def test_an_approval_written_after_the_push_runs_that_head(github, tiny_repo, redis_url):
    """The honest case, also the reply's advice: review the new head, approve it again."""
    repo, shas = tiny_repo
    first, second = shas["pr/docs"], shas["pr/drop"]
    fork = ForkPullRequest(github, repo, shas["main"])
    async with running_app(settings(redis_url)) as client:
        await fork.push(client, first, 0, "opened")
        await fork.push(client, second, 2)
        await run_burst()
        await fork.comment(client, "/llmgate approve\nreviewed the echo change", 3, 711)
        await run_burst()
        await fork.comment(client, f"/llmgate approve {second[:7]}", 4, 712)  # a duplicate
        await run_burst()

    state = github.state()
    assert "success" not in _conclusions(state, first)  # superseded by the push, or waiting
    assert _conclusions(state, second) == ["action_required", "failure"]  # it ran: 1.0 -> 0.75
    approval = await _approval_of(redis_url, second)
    assert approval is not None and (approval.approver, approval.source) == (WRITER, "comment")
    assert _replies(state) == []
    assert [(r["comment_id"], r["content"]) for r in state["reactions"]] == [
        (711, "+1"), (712, "+1")]
    assert state["violations"] == []
