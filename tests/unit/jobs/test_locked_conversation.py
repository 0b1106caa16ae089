"""A locked conversation: refused comments and reactions are logged and never stop a run.

Field case: on a pull request whose conversation a maintainer had locked, ``/llmgate rerun``
ended at its ``+1`` reaction (GitHub refuses reactions on a locked conversation) and never ran,
and ``/llmgate approve`` stored the approval and then failed on its reaction, so the head could
never run (every later approval was a ``duplicate``). The jobs run in a real arq worker
against the schema-checking fake GitHub, which answers a locked conversation as GitHub does: a
comment 403 "Unable to create comment because issue is locked.", a reaction 422.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import events_support, worker_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, WRITER, gate_payload
from worker.gate.head_history import HeadHistory

github, tiny_repo = events_support.github, worker_support.tiny_repo  # fixtures

COMMAND_COMMENT = 555
LOCKED = {"owner": OWNER, "repo": REPO, "issue_number": 1, "comment_ids": [COMMAND_COMMENT]}
REPO_REF = {"owner": OWNER, "name": REPO}


def _setup(github: FakeGitHubServer, repo: Path, head: str, base: str, **pull: Any) -> None:
    github.setup({"locked": [LOCKED], "pulls": [{
        "owner": OWNER, "repo": REPO, "number": 1, "head_sha": head, "base_sha": base,
        "clone_url": str(repo), "author": WRITER, **pull}]})


def _refusals(state: dict[str, Any]) -> list[tuple[str | None, int]]:
    return [(r["operation"], r["status"]) for r in state["requests"] if r["status"] >= 400]


def _only_run(state: dict[str, Any]) -> dict[str, Any]:
    [run] = state["check_runs"]
    assert run["status"] == "completed"
    return run


async def test_a_gate_run_on_a_locked_pull_request_concludes_without_its_comment(
        github, tiny_repo, caplog):
    repo, shas = tiny_repo
    _setup(github, repo, shas["pr/drop"], shas["main"])
    caplog.set_level(logging.WARNING, "llmgate.worker")
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr/drop"], shas["main"])])
    state = github.state()
    assert _only_run(state)["conclusion"] == "failure"
    assert (state["comments"], _refusals(state)) == ([], [("issues/create-comment", 403)])
    assert "Unable to create comment because issue is locked." in caplog.text
    assert state["violations"] == []


async def test_rerun_runs_although_its_reaction_is_refused(github, tiny_repo, caplog):
    repo, shas = tiny_repo
    _setup(github, repo, shas["pr/docs"], shas["main"])
    caplog.set_level(logging.WARNING, "llmgate.worker")
    payload = {"delivery_id": "r-1", "installation_id": INSTALLATION_ID,
               "repo": {**REPO_REF, "clone_url": str(repo)}, "pr_number": 1,
               "comment_id": COMMAND_COMMENT, "commenter": WRITER}
    [result] = (await run_burst([("rerun_from_comment", payload, "rerun-1")])).values()
    assert result == {"conclusion": "success", "head_sha": shas["pr/docs"]}
    state = github.state()
    assert _only_run(state)["conclusion"] == "success"
    assert _refusals(state) == [("reactions/create-for-issue-comment", 422),
                                ("issues/create-comment", 403)]
    assert state["reactions"] == [] and state["comments"] == []
    assert "reaction +1 to comment 555 not added" in caplog.text
    assert state["violations"] == []


async def test_an_approved_fork_head_runs_although_the_reaction_is_refused(github, tiny_repo,
                                                                          redis_url):
    repo, shas = tiny_repo
    _setup(github, repo, shas["pr/docs"], shas["main"], author="mallory",
           head_repo_full_name="mallory/tiny", head_clone_url=str(repo))
    redis = Redis.from_url(redis_url)
    try:  # the head's synchronize delivery, before the comment was written
        await HeadHistory(redis).record(f"{OWNER}/{REPO}", 1, shas["pr/docs"],
                                        "2026-11-30T10:00:00Z")
    finally:
        await redis.aclose()
    payload = {"delivery_id": "a-1", "installation_id": INSTALLATION_ID,
               "repo": {**REPO_REF, "clone_url": str(repo)}, "pr_number": 1,
               "approver": WRITER, "source": "comment", "head_sha": "",
               "comment_id": COMMAND_COMMENT, "comment_created_at": "2026-11-30T10:05:00Z"}
    [result] = (await run_burst([("approve_pull_request", payload, "approve-1")])).values()
    assert result == {"conclusion": "success", "head_sha": shas["pr/docs"]}
    state = github.state()
    assert _only_run(state)["conclusion"] == "success"
    assert ("reactions/create-for-issue-comment", 422) in _refusals(state)
    assert state["violations"] == []


async def test_rerun_on_a_closed_locked_pull_request_ends_quietly(github, tiny_repo):
    repo, shas = tiny_repo
    _setup(github, repo, shas["pr/docs"], shas["main"], state="closed")
    payload = {"delivery_id": "r-2", "installation_id": INSTALLATION_ID,
               "repo": {**REPO_REF, "clone_url": str(repo)}, "pr_number": 1,
               "comment_id": COMMAND_COMMENT, "commenter": WRITER}
    [result] = (await run_burst([("rerun_from_comment", payload, "rerun-2")])).values()
    assert result == {"status": "closed"}
    state = github.state()
    assert _refusals(state) == [("reactions/create-for-issue-comment", 422),
                                ("issues/create-comment", 403)]
    assert state["check_runs"] == [] and state["violations"] == []


async def test_a_refused_command_reply_is_a_status_not_an_error(github):
    payload = {"delivery_id": "c-1", "installation_id": INSTALLATION_ID,
               "repo": {**REPO_REF, "clone_url": "https://example.test/acme/tiny.git"},
               "pr_number": 1, "comment_id": COMMAND_COMMENT, "commenter": WRITER,
               "command": "/llmgate help", "kind": "help"}
    github.setup({"locked": [LOCKED]})
    [result] = (await run_burst([("reply_to_command", payload, "reply-1")])).values()
    assert result == {"status": "refused"}
    assert _refusals(github.state()) == [("issues/create-comment", 403)]


async def test_accept_passes_the_check_although_the_comment_refuses_its_audit_line(
        github, tiny_repo):
    repo, shas = tiny_repo
    github.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                             "head_sha": shas["pr/drop"], "base_sha": shas["main"]}]})
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr/drop"], shas["main"])])
    [run] = github.state()["check_runs"]
    github.setup({"faults": [{"operation": "issues/update-comment", "status": 422, "body": {
        "message": "Unable to update comment because issue is locked.",
        "documentation_url": "https://docs.github.com/rest"}}]})
    payload = {"delivery_id": "a-2", "installation_id": INSTALLATION_ID,
               "repo": {**REPO_REF, "clone_url": str(repo)}, "pr_number": 1,
               "check_run_id": run["id"], "head_sha": run["head_sha"], "accepter": WRITER}
    [result] = (await run_burst([("accept_regression", payload, "accept-2")])).values()
    assert result == {"status": "accepted", "head_sha": shas["pr/drop"]}
    state = github.state()
    assert _only_run(state)["conclusion"] == "success"
    assert _only_run(state)["output"]["summary"].startswith("**Regression accepted** by `writer`")
    assert _refusals(state) == [("issues/update-comment", 422)]
