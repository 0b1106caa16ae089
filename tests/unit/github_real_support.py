"""Helpers for the tests of issue 31, "GitHub as it really is": one pull request gated from a
signed ``pull_request`` delivery through the real receiver, the arq queue in the test's Redis
and an in-process worker, against the schema-checking fake GitHub.

- `TicketsPullRequest`: a git repository whose ``tickets`` suite passes on ``main`` and fails
  on the pull request's head, with any example inputs; `TicketsPullRequest.gate` delivers the
  push and runs the worker until the queue is empty.
- `only_run`, `only_sticky`: the pull request's one check run and one sticky comment.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.app_support import encode, fixture_json, post, running_app, settings
from tests.unit.events_support import run_burst
from tests.unit.worker_support import commit, git, write_tickets_tree
from worker.contract import COMMENT_MARKER

OWNER, NAME, NUMBER = "Codertocat", "Hello-World", 2  # the fixtures' repository and PR
#: The target at base: answers every example right (its input, as expected).
GOOD_BOT = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""
#: The target at head: answers every example wrong, with a verdict mark and the input reversed.
BAD_BOT = GOOD_BOT.replace('{"output": example["input"]}',
                           '{"output": "\\u274c " + example["input"][::-1]}')
#: The suite fails when its pass rate drops by more than 5 points (every example does here).
GATE = "      pass_rate:\n        max_drop: 0.05\n"


class TicketsPullRequest:
    """Pull request `NUMBER` of ``Codertocat/Hello-World``: ``main`` answers ``rows`` right;
    its head changes ``head_files`` (by default `BAD_BOT`, which answers them all wrong)."""

    def __init__(self, root: Path, rows: list[dict[str, Any]],
                 head_files: Mapping[str, str | None] | None = None) -> None:
        """Create the repository under ``root / "repo"``."""
        self.repo = write_tickets_tree(root / "repo", rows, GOOD_BOT, GATE)
        git(self.repo, "init", "-q", "-b", "main")
        self.base_sha = commit(self.repo, "main", {}, "tickets")
        self.head_sha = commit(self.repo, "pr/head",
                               {"bot.py": BAD_BOT} if head_files is None else dict(head_files))
        self.clone_url = self.repo.as_uri()

    def configure(self, github: FakeGitHubServer) -> None:
        """Tell the fake about the pull request (its head, base and author)."""
        github.setup({"pulls": [{"owner": OWNER, "repo": NAME, "number": NUMBER,
                                 "head_sha": self.head_sha, "base_sha": self.base_sha,
                                 "base_ref": "main", "clone_url": self.clone_url,
                                 "author": "Codertocat"}]})

    def delivery(self) -> dict[str, Any]:
        """The ``pull_request`` ``synchronize`` delivery of the head."""
        data = fixture_json("pull_request.synchronize.json")
        data["repository"]["clone_url"] = self.clone_url
        pull = data["pull_request"]
        pull["head"]["sha"] = self.head_sha
        pull["head"]["repo"]["clone_url"] = self.clone_url
        pull["base"].update(sha=self.base_sha, ref="main")
        return data

    async def gate(self, github: FakeGitHubServer, redis_url: str) -> dict[str, Any]:
        """Deliver the head's push to a running App, run the worker until the queue is empty;
        return the fake's state."""
        self.configure(github)
        async with running_app(settings(redis_url)) as client:
            answer = await post(client, "pull_request", "real-1", encode(self.delivery()))
        assert answer.json() == {"status": "queued"}, answer.json()
        await run_burst()
        return github.state()


def only_run(state: dict[str, Any]) -> dict[str, Any]:
    """The one check run in the fake's ``state``."""
    runs: list[dict[str, Any]] = state["check_runs"]
    assert len(runs) == 1, [(r["name"], r["status"], r["conclusion"]) for r in runs]
    return runs[0]


def only_sticky(state: dict[str, Any]) -> dict[str, Any]:
    """The one sticky comment (the marker's) in the fake's ``state``."""
    found = [c for c in state["comments"] if COMMENT_MARKER in c["body"]]
    assert len(found) == 1, [c["body"][:80] for c in state["comments"]]
    comment: dict[str, Any] = found[0]
    return comment


def refusals(state: dict[str, Any]) -> list[tuple[str | None, int]]:
    """``(operation, status)`` of every request the fake answered with an error."""
    return [(r["operation"], r["status"]) for r in state["requests"] if r["status"] >= 400]


__all__ = ["BAD_BOT", "GOOD_BOT", "NAME", "NUMBER", "OWNER", "TicketsPullRequest", "only_run",
           "only_sticky", "refusals"]
