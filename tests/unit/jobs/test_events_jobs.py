"""Event jobs in a real in-process arq worker: re-runs, merge groups and command replies.

Real Redis, real git (a local repository), the schema-checking fake GitHub on loopback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit import events_support, worker_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, gate_payload
from worker.contract import gate_job_id
from worker.gate import commands
from worker.gate.accept import ACCEPT_BUTTON, RERUN_BUTTON

github, tiny_repo = events_support.github, worker_support.tiny_repo  # fixtures


def _repo(repo: Path) -> dict[str, str]:
    return {"owner": OWNER, "name": REPO, "clone_url": repo.as_uri()}


def _pull(number: int, head: str, base: str, **extra: Any) -> dict[str, Any]:
    return {"owner": OWNER, "repo": REPO, "number": number, "head_sha": head, "base_sha": base,
            "author": "writer", **extra}


def _recheck(repo: Path, head: str, *, numbers: list[int], source: str = "check_run",
             app_id: int = 4242, requester: str = "writer",
             delivery: str = "rr-1") -> tuple[str, dict[str, Any], str]:
    payload = {"delivery_id": delivery, "installation_id": INSTALLATION_ID, "repo": _repo(repo),
               "head_sha": head, "pr_numbers": numbers, "merge_group_base": "",
               "app_id": app_id, "requester": requester, "source": source}
    return "rerun_check", payload, f"rerun:{OWNER}/{REPO}:{head}:{delivery}"


def _last_actions(run: dict[str, Any]) -> list[dict[str, str]]:
    return [h["body"]["actions"] for h in run["history"] if "actions" in h["body"]][-1]


async def test_rerequested_check_run_gates_the_head_afresh(github, tiny_repo):
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    github.fake.setup({"pulls": [_pull(1, head, base)]})
    first = gate_payload(repo.as_uri(), head, base, number=1)
    await run_burst([("gate_pull_request", first, gate_job_id(first["repo"], 1, head))])
    [run] = github.state()["check_runs"]
    assert (run["external_id"], run["conclusion"]) == ("pr:1", "failure")
    assert _last_actions(run) == [RERUN_BUTTON, ACCEPT_BUTTON]
    # GitHub's Re-run: the payload names no pull request (as for a fork); the run's
    # external_id leads to PR 1, which is gated again as a new job with a new check run
    result = await run_burst([_recheck(repo, head, numbers=[])])
    assert list(result.values()) == [{"status": "queued", "pulls": "1", "merge_group": "no"}]
    state = github.state()
    first_run, second = state["check_runs"]
    assert first_run["id"] == run["id"] and second["id"] > run["id"]
    assert (second["head_sha"], second["external_id"], second["status"],
            second["conclusion"]) == (head, "pr:1", "completed", "failure")
    assert len(state["comments"]) == 1  # the sticky comment, not a second one
    listed = [r for r in state["requests"] if r["operation"] == "checks/list-for-ref"]
    assert [r["path"].split("?")[1] for r in listed] == [
        "check_name=llmgate&filter=all&per_page=100"]
    assert state["violations"] == []


async def test_recheck_skips_moved_and_closed_pulls_and_other_apps(github, tiny_repo):
    repo, shas = tiny_repo
    head, base = shas["pr/docs"], shas["main"]
    github.fake.setup({"pulls": [_pull(2, shas["pr/drop"], base),  # moved on
                                 _pull(3, head, base, state="closed")]})
    result = await run_burst([_recheck(repo, head, numbers=[2, 3, 4]),  # 4: no such PR
                              _recheck(repo, head, numbers=[2], app_id=999, delivery="rr-2")])
    assert sorted(result.values(), key=str) == [
        {"status": "ignored", "reason": "check of App 999"},
        {"status": "queued", "pulls": "", "merge_group": "no"}]
    state = github.state()
    assert state["check_runs"] == [] and state["comments"] == []
    assert state["violations"] == [v for v in state["violations"] if v["kind"] == "not_found"]


async def test_rerun_button_needs_write_access(github, tiny_repo):
    repo, shas = tiny_repo
    head, base = shas["pr/docs"], shas["main"]
    github.fake.setup({"pulls": [_pull(5, head, base)]})
    result = await run_burst([
        _recheck(repo, head, numbers=[5], source="button", requester="reader", delivery="b-1"),
        _recheck(repo, head, numbers=[5], source="button", requester="maintainer",
                 delivery="b-2")])
    assert sorted(result.values(), key=str) == [
        {"status": "queued", "pulls": "5", "merge_group": "no"},
        {"status": "refused", "permission": "read"}]
    [run] = github.state()["check_runs"]
    assert (run["external_id"], run["conclusion"]) == ("pr:5", "success")
    assert _last_actions(run) == [RERUN_BUTTON]  # a passing gate has nothing to accept


async def test_merge_group_gets_a_check_on_its_head_and_no_comment(github, tiny_repo):
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    group = {"delivery_id": "mg-1", "installation_id": INSTALLATION_ID, "repo": _repo(repo),
             "head_sha": head, "base_sha": base, "base_ref": "refs/heads/main",
             "head_ref": f"refs/heads/gh-readonly-queue/main/pr-1-{base}"}
    result = await run_burst([("gate_merge_group", group, f"merge_group:{OWNER}/{REPO}:{head}")])
    assert list(result.values()) == [{"conclusion": "failure", "head_sha": head}]
    state = github.state()
    [run] = state["check_runs"]
    assert (run["name"], run["head_sha"], run["external_id"], run["conclusion"]) == (
        "llmgate", head, f"mg:{base}", "failure")
    assert run["output"]["title"].startswith("llmgate: fail")
    assert _last_actions(run) == [RERUN_BUTTON]
    assert state["comments"] == []
    operations = {r["operation"] for r in state["requests"]}
    assert operations == {"apps/create-installation-access-token", "checks/create",
                          "checks/update"}  # trusted: no pull request, no permission lookup
    # GitHub's Re-run on that check run gates the group's head against the same base again
    again = await run_burst([_recheck(repo, head, numbers=[], delivery="rr-mg")])
    assert list(again.values()) == [{"status": "queued", "pulls": "", "merge_group": "yes"}]
    runs = github.state()["check_runs"]
    assert [(r["external_id"], r["conclusion"]) for r in runs] == [
        (f"mg:{base}", "failure"), (f"mg:{base}", "failure")]
    assert github.state()["violations"] == []


async def test_help_replies_are_posted_and_limited_per_pull_request(github, tiny_repo):
    repo, _ = tiny_repo

    def reply(comment_id: int, kind: str, command: str) -> tuple[str, dict[str, Any], str]:
        payload = {"delivery_id": f"c-{comment_id}", "installation_id": INSTALLATION_ID,
                   "repo": _repo(repo), "pr_number": 8, "comment_id": comment_id,
                   "commenter": "someone", "command": command, "kind": kind}
        return "reply_to_command", payload, f"command:{OWNER}/{REPO}:comment:{comment_id}"

    jobs = [reply(1, "help", ""), reply(2, "unknown", "/llmgate rerun please"),
            reply(3, "help", ""), reply(4, "unknown", "/llmgate x")]
    result = await run_burst(jobs)
    statuses = [result[job_id]["status"] for _, _, job_id in jobs]
    assert sorted(statuses) == ["limited", "replied", "replied", "replied"]
    comments = github.state()["comments"]
    assert len(comments) == 3
    assert {c["issue_number"] for c in comments} == {8}
    assert {c["user"]["login"] for c in comments} == {"llmgate[bot]"}
    bodies = {c["body"] for c in comments}
    assert bodies <= {commands.reply_body("help", ""),
                      commands.reply_body("unknown", "/llmgate rerun please"),
                      commands.reply_body("unknown", "/llmgate x")}
    assert github.state()["violations"] == []
