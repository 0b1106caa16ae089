"""One head commit in several open pull requests: the ``llmgate`` check shows the worst verdict.

Field case (tester, issue 12): the author pushes X1 (a regression) and X2 on top, points
branch ``stack`` at X1 and opens PR 1 X2 -> main (failure) and PR 2 X2 -> stack (no change
against X1: success). Both check runs are ``llmgate`` on commit X2 and GitHub's required check
reads the newest, so PR 1 became mergeable once PR 2's run was the newest (before: the newest
was ``success``). Through the real arq worker, real Redis and git, and the schema-checking fake
GitHub; the pure combination of verdicts without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import worker_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import (
    INSTALLATION_ID,
    OWNER,
    REPO,
    WRITER,
    build_tiny_repo,
    gate_payload,
    git,
)
from worker.contract import gate_job_id, pr_closed_value, pr_head_key
from worker.gate import shared_head
from worker.gate.shared_head import Entry
from worker.github.checks import CheckOutput

github = worker_support.github  # fixture
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")

#: What PR 2's check run must say while PR 1 into main is failing.
BLOCKED_BY_1 = "llmgate: blocked: this commit is also the head of #1 into main, which failed"


@pytest.fixture(scope="module")
def stacked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The tiny repository plus X2 (a README-only commit) on top of ``pr/drop`` (X1, where
    ``bravo`` breaks: 3 of 4, a drop of 0.25 > max_drop 0.05): branch -> SHA, and ``x2``."""
    repo = tmp_path_factory.mktemp("stacked") / "tiny"
    shas = build_tiny_repo(repo)
    git(repo, "switch", "-q", "-c", "x", shas["pr/drop"])
    (repo / "NOTES.md").write_text("tidy\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-q", "-m", "X2: tidy")
    shas["x2"] = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "main")
    return repo, shas


def _pull(number: int, head: str, base_sha: str, base_ref: str, url: str,
          state: str = "open") -> dict[str, Any]:
    return {"owner": OWNER, "repo": REPO, "number": number, "head_sha": head,
            "base_sha": base_sha, "base_ref": base_ref, "head_ref": "x", "clone_url": url,
            "state": state, "author": WRITER}


def _setup(github: FakeGitHubServer, repo: Path, shas: dict[str, str],
           pr1_state: str = "open") -> dict[int, tuple[str, Any, str]]:
    """Open PR 1 (X2 -> main) and PR 2 (X2 -> stack, at X1); return their gate jobs."""
    url, head = repo.as_uri(), shas["x2"]
    github.setup({"pulls": [_pull(1, head, shas["main"], "main", url, pr1_state),
                            _pull(2, head, shas["pr/drop"], "stack", url)]})
    jobs = {}
    for number, base, ref in ((1, shas["main"], "main"), (2, shas["pr/drop"], "stack")):
        payload = gate_payload(url, head, base, number=number)
        payload["base_ref"] = ref
        jobs[number] = ("gate_pull_request", payload,
                        gate_job_id(payload["repo"], number, head))
    return jobs


def _runs(github: FakeGitHubServer, head: str) -> dict[str, dict[str, Any]]:
    """The newest ``llmgate`` check run of each pull request on ``head``, by external id, and
    ``"newest"``: the newest of all (what GitHub's required check reads)."""
    runs = sorted((r for r in github.state()["check_runs"]
                   if r["head_sha"] == head and r["name"] == "llmgate"), key=lambda r: r["id"])
    return {**{r["external_id"]: r for r in runs}, "newest": runs[-1]}


@pytest.mark.parametrize("order", [(1, 2), (2, 1)], ids=["pr2-last", "pr1-last"])
async def test_a_second_pr_with_the_same_head_cannot_turn_main_green(github, stacked, order):
    repo, shas = stacked
    jobs = _setup(github, repo, shas)
    for number in order:
        last = await run_burst([jobs[number]])
    runs = _runs(github, shas["x2"])
    assert runs["newest"]["conclusion"] == "failure"  # before: success when PR 2 ran last
    assert (runs["pr:1"]["conclusion"], runs["pr:2"]["conclusion"]) == ("failure", "failure")
    assert runs["pr:1"]["output"]["title"].startswith("llmgate: fail, 1 regression")
    assert runs["pr:2"]["output"]["title"] == BLOCKED_BY_1
    for run in (runs["pr:1"], runs["pr:2"]):
        summary = run["output"]["summary"]
        assert "**This commit is the head of 2 open pull requests.**" in summary
        assert "| #1 | `main` | failure | llmgate: fail, 1 regression" in summary
        assert "| #2 | `stack` | success | llmgate: pass" in summary
    assert [r["conclusion"] for r in last.values()] == ["failure"]  # what the last job shows
    assert github.state()["violations"] == []


async def test_accepting_pr1_lets_its_verdict_count_as_accepted(github, stacked):
    repo, shas = stacked
    jobs = _setup(github, repo, shas)
    await run_burst([jobs[1]])
    await run_burst([jobs[2]])
    pr1 = _runs(github, shas["x2"])["pr:1"]
    accept = {"delivery_id": "a-1", "installation_id": INSTALLATION_ID,
              "repo": {"owner": OWNER, "name": REPO, "clone_url": repo.as_uri()},
              "pr_number": 1, "check_run_id": pr1["id"], "head_sha": shas["x2"],
              "accepter": WRITER}
    result = await run_burst([("accept_regression", accept, f"accept:{pr1['id']}")])
    assert list(result.values()) == [{"status": "accepted", "head_sha": shas["x2"]}]
    runs = _runs(github, shas["x2"])
    assert runs["pr:1"]["conclusion"] == runs["pr:2"]["conclusion"] == "success"
    assert runs["pr:1"]["output"]["title"] == "llmgate: pass (regression accepted by writer)"
    assert runs["pr:2"]["output"]["title"].startswith("llmgate: pass")
    assert "**Regression accepted** by `writer`" in runs["pr:1"]["output"]["summary"]
    assert "| #1 | `main` | success | llmgate: pass (regression accepted by writer) |" in \
        runs["pr:2"]["output"]["summary"]
    assert github.state()["violations"] == []


async def test_a_run_still_going_blocks_the_others_until_it_concludes(github, stacked, redis):
    repo, shas = stacked
    jobs = _setup(github, repo, shas)
    repo_ref = jobs[1][1]["repo"]
    await shared_head.record(redis, repo_ref, shas["x2"], Entry(1, shared_head.PENDING, "main"))
    await run_burst([jobs[2]])  # PR 1's run has opened (what run_gate records) but not ended
    pr2 = _runs(github, shas["x2"])["pr:2"]
    assert (pr2["conclusion"], pr2["output"]["title"]) == (
        "action_required", "llmgate: blocked: this commit is also the head of #1 into main, "
                           "whose run has not finished")
    await run_burst([jobs[1]])
    runs = _runs(github, shas["x2"])
    assert (runs["pr:2"]["conclusion"], runs["pr:2"]["output"]["title"]) == (
        "failure", BLOCKED_BY_1)  # brought up to date when PR 1 concluded
    assert runs["newest"]["conclusion"] == "failure"


async def test_a_closed_pull_request_no_longer_counts(github, stacked, redis):
    repo, shas = stacked
    jobs = _setup(github, repo, shas)
    await run_burst([jobs[1]])
    repo_ref = jobs[1][1]["repo"]
    await redis.set(pr_head_key(repo_ref, 1), pr_closed_value())  # as the web process does
    _setup(github, repo, shas, pr1_state="closed")
    await run_burst([jobs[2]])
    pr2 = _runs(github, shas["x2"])["pr:2"]
    assert pr2["conclusion"] == "success"
    assert "open pull requests" not in pr2["output"]["summary"]
    assert await redis.hkeys(shared_head.head_key(repo_ref, shas["x2"])) == [b"2"]


async def test_an_unreadable_record_fails_the_job_and_passes_nothing(github, stacked, redis,
                                                                     monkeypatch):
    monkeypatch.setenv("LLMGATE_JOB_MAX_TRIES", "1")
    repo, shas = stacked
    jobs = _setup(github, repo, shas)
    await redis.set(shared_head.head_key(jobs[2][1]["repo"], shas["x2"]), "not a hash")
    result = await run_burst([jobs[2]])
    assert [type(r).__name__ for r in result.values()] == ["ResponseError"]  # WRONGTYPE
    assert all(r["conclusion"] != "success" for r in github.state()["check_runs"])


# ---------------------------------------------------------------- the combination, pure

def _entry(number: int, conclusion: str, base: str = "main") -> Entry:
    return Entry(number, conclusion, base, f"llmgate: {conclusion}", number * 10)


@pytest.mark.parametrize(("others", "shown", "decided_by"), [
    (["success"], "success", 1),
    (["neutral"], "neutral", 2),
    (["neutral", "action_required"], "action_required", 3),
    (["timed_out", "failure", "action_required"], "failure", 3),
    (["cancelled"], "cancelled", 2),
    ([shared_head.PENDING], "action_required", 2),
    (["stale-or-unknown"], "failure", 2),  # an unknown value blocks as failure
])
def test_the_most_blocking_verdict_is_shown(others, shown, decided_by):
    own = _entry(1, "success")
    entries = [own, *(_entry(n, c) for n, c in enumerate(others, start=2))]
    conclusion, output = shared_head.shared_output(own, entries, CheckOutput("own", "body"))
    assert conclusion == shown
    assert (output.title == "own") == (decided_by == 1)
    if decided_by != 1:
        assert output.title.startswith(f"llmgate: blocked: this commit is also the head of "
                                       f"#{decided_by} into main, ")
    assert output.summary.endswith("\n\nbody")


def test_own_verdict_decides_among_equals_and_a_single_pr_is_unchanged():
    own = _entry(2, "failure")
    conclusion, output = shared_head.shared_output(own, [_entry(1, "failure"), own],
                                                   CheckOutput("own", "body", "text"))
    assert (conclusion, output.title, output.text) == ("failure", "own", "text")
    again = shared_head.shared_output(own, [_entry(1, "success"), own], output)[1]
    assert again.summary.count("open pull requests") == 1  # replaced, not stacked
    assert "| #1 | `main` | success |" in again.summary
    alone = shared_head.shared_output(own, [own], again)
    assert alone == ("failure", CheckOutput("own", "body", "text"))


async def test_an_unreadable_entry_counts_as_a_failure(redis: Redis):
    ref = {"owner": OWNER, "name": REPO, "clone_url": ""}
    await redis.hset(shared_head.head_key(ref, "a" * 40), "3", "{not json")
    [entry] = await shared_head.entries(redis, None, ref, "a" * 40)  # type: ignore[arg-type]
    assert (entry.pr_number, entry.conclusion) == (3, "failure")
