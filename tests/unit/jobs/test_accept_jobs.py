"""Accept regression: the button's job against the fake GitHub, real Redis, real git and arq."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import events_support, worker_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, gate_payload
from worker.contract import COMMENT_MARKER, gate_job_id
from worker.gate import accept
from worker.gate.accept import ACCEPT_BUTTON, RERUN_BUTTON

RULE = "echo pass_rate max_drop 0.05"
github, tiny_repo = events_support.github, worker_support.tiny_repo  # fixtures


async def _failed_gate(github: FakeGitHubServer, repo: Path, head: str, base: str,
                       number: int = 1, suffix: str = "") -> dict[str, Any]:
    """Gate PR ``number`` (head against base) and return its (newest) check run."""
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": number,
                                  "head_sha": head, "base_sha": base, "author": "writer"}]})
    payload = gate_payload(repo.as_uri(), head, base, number=number)
    await run_burst([("gate_pull_request", payload,
                      gate_job_id(payload["repo"], number, head, suffix))])
    run: dict[str, Any] = github.state()["check_runs"][-1]
    return run


def _accept(repo: Path, run: dict[str, Any], who: str,
            number: int = 1) -> tuple[str, dict[str, Any], str]:
    payload = {"delivery_id": f"a-{who}", "installation_id": INSTALLATION_ID,
               "repo": {"owner": OWNER, "name": REPO, "clone_url": repo.as_uri()},
               "pr_number": number, "check_run_id": run["id"], "head_sha": run["head_sha"],
               "accepter": who}
    return "accept_regression", payload, f"accept:{OWNER}/{REPO}:{run['id']}:{who}"


async def test_a_writer_accepts_and_a_reader_is_refused(github, tiny_repo, redis):
    repo, shas = tiny_repo
    run = await _failed_gate(github, repo, shas["pr/drop"], shas["main"])
    assert run["conclusion"] == "failure"
    [comment] = github.state()["comments"]
    before = len(github.state()["requests"])

    refused = await run_burst([_accept(repo, run, "reader")])
    assert list(refused.values()) == [{"status": "refused", "permission": "read"}]
    state = github.state()
    asked = [r["operation"] for r in state["requests"][before:]
             if r["operation"] != "apps/create-installation-access-token"]  # a new worker
    assert asked == ["repos/get-collaborator-permission-level"]  # nothing else, no change
    assert state["check_runs"][0]["conclusion"] == "failure"
    assert state["comments"][0]["body"] == comment["body"]

    accepted = await run_burst([_accept(repo, run, "writer")])
    assert list(accepted.values()) == [{"status": "accepted", "head_sha": shas["pr/drop"]}]
    record = json.loads(await redis.get(accept.acceptance_key(f"{OWNER}/{REPO}", 1,
                                                              shas["pr/drop"])))
    assert record["by"] == "writer" and record["rules"] == [RULE]
    line = (f"**Regression accepted** by `writer` on {accept.utc(record['at'])} for "
            f"`{shas['pr/drop'][:7]}`: `{RULE}`. The gate failed on these rules and a "
            "collaborator with write access accepted them for this check run.")
    state = github.state()
    [now] = state["check_runs"]
    assert (now["status"], now["conclusion"]) == ("completed", "success")
    assert now["output"]["title"] == "llmgate: pass (regression accepted by writer)"
    assert now["output"]["summary"] == f"{line}\n\n---\n\n{run['output']['summary']}"
    assert now["output"]["text"] == run["output"]["text"]
    assert now["history"][-1]["body"]["actions"] == [RERUN_BUTTON]
    assert len(now["annotations"]) == len(run["annotations"]) > 0  # kept, not sent again
    [edited] = state["comments"]
    assert edited["body"] == comment["body"].replace(COMMENT_MARKER,
                                                     f"{COMMENT_MARKER}\n> {line}\n", 1)
    assert state["violations"] == []


async def test_accept_refuses_what_it_must_not_pass(github, tiny_repo, redis):
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    github.fake.setup({"pulls": [
        {"owner": OWNER, "repo": REPO, "number": 1, "head_sha": head, "base_sha": base},
        {"owner": OWNER, "repo": REPO, "number": 2, "head_sha": shas["pr/docs"],
         "base_sha": base}]})
    gates = [gate_payload(repo.as_uri(), head, base, number=1),
             gate_payload(repo.as_uri(), shas["pr/docs"], base, number=2)]
    await run_burst([("gate_pull_request", gates[0], gate_job_id(gates[0]["repo"], 1, head)),
                     ("gate_pull_request", gates[0],
                      gate_job_id(gates[0]["repo"], 1, head, "again")),
                     ("gate_pull_request", gates[1],
                      gate_job_id(gates[1]["repo"], 2, shas["pr/docs"]))])
    older, newer = [r for r in github.state()["check_runs"] if r["external_id"] == "pr:1"]
    [passing] = [r for r in github.state()["check_runs"] if r["external_id"] == "pr:2"]
    assert (older["conclusion"], newer["conclusion"], passing["conclusion"]) == (
        "failure", "failure", "success")
    result = await run_burst([_accept(repo, older, "writer"),
                              _accept(repo, passing, "writer", number=2)])
    assert sorted(r["status"] for r in result.values()) == ["not_acceptable", "superseded"]
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                  "head_sha": shas["pr/docs"], "base_sha": base}]})
    stale = await run_burst([_accept(repo, newer, "maintainer")])  # the PR moved on
    assert list(stale.values()) == [{"status": "stale"}]
    assert sorted(r["conclusion"] for r in github.state()["check_runs"]) == [
        "failure", "failure", "success"]
    assert await redis.keys("llmgate:accepted:*") == []


async def test_an_accepted_head_that_fails_again_says_so(github, tiny_repo, redis):
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    run = await _failed_gate(github, repo, head, base)
    await run_burst([_accept(repo, run, "writer")])
    twice = await run_burst([_accept(repo, run, "maintainer")])
    assert list(twice.values()) == [{"status": "not_failed"}]  # it passes now
    rerun = await _failed_gate(github, repo, head, base, suffix="rerun")
    record = json.loads(await redis.get(accept.acceptance_key(f"{OWNER}/{REPO}", 1, head)))
    note = (f"This commit's regression was accepted before by writer on "
            f"{accept.utc(record['at'])} ({RULE}); this run is a fresh verdict: a writer can "
            "press Accept regression again.")
    assert rerun["conclusion"] == "failure" and rerun["id"] != run["id"]
    assert note in rerun["output"]["summary"]
    assert rerun["history"][-1]["body"]["actions"] == [RERUN_BUTTON, ACCEPT_BUTTON]
    [comment] = github.state()["comments"]
    assert note in comment["body"]


async def test_an_acceptance_is_claimed_once_per_check_run(redis):
    assert await accept.claim_acceptance(redis, "o/r", 41, "ann", 1.0) is True
    assert await accept.claim_acceptance(redis, "o/r", 41, "bob", 2.0) is False
    await accept.release_acceptance(redis, "o/r", 41)
    assert await accept.claim_acceptance(redis, "o/r", 41, "bob", 3.0) is True
