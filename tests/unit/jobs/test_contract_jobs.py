"""The App scores head's target on base's evaluation contract: issue 12's second part through
the gate job (real arq, Redis and git, the schema-checking fake GitHub, litellm over real HTTP
to the fake provider), and Accept regression as the way through.

The repository is tests/unit/contract_support.py's; before this each of the four pull
requests below got a ``success`` check although it regresses 5 examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import contract_support, events_support, llm_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, gate_payload
from worker.contract import gate_job_id
from worker.gate.accept import ACCEPT_BUTTON, RERUN_BUTTON

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm
repo = contract_support.contract_repo

#: Pull request branch -> its base branch.
PULLS = {"pr/expected": "main", "pr/delete": "main", "pr/loosen": "contains",
         "pr/lenient": "judged"}
TITLE = ("llmgate: fail, 5 regressions - passes only under head's changed evaluation contract "
         "(tickets: ")


async def gate_prs(github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
                   ) -> dict[str, dict[str, Any]]:
    """Open one PR per branch of `PULLS`, run their gate jobs; return branch -> check run."""
    path, shas = repo
    numbered = list(enumerate(PULLS.items(), 1))
    github.fake.setup({"pulls": [
        {"owner": OWNER, "repo": REPO, "number": n, "head_sha": shas[head],
         "base_sha": shas[base], "author": "writer"} for n, (head, base) in numbered]})
    jobs = []
    for number, (head, base) in numbered:
        payload = gate_payload(path.as_uri(), shas[head], shas[base], number=number)
        jobs.append(("gate_pull_request", payload, gate_job_id(payload["repo"], number,
                                                               shas[head])))
    await run_burst(jobs)
    runs = {r["head_sha"]: r for r in github.state()["check_runs"]}
    return {head: runs[shas[head]] for head in PULLS}


def comment(github: FakeGitHubServer, number: int) -> str:
    [found] = [c for c in github.state()["comments"] if c["issue_number"] == number]
    body: str = found["body"]
    return body


async def test_a_regression_cannot_pass_by_changing_its_scoring_and_a_writer_can_accept(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer) -> None:
    contract_support.judges(llm)
    checks = await gate_prs(github, repo)
    assert {b: c["conclusion"] for b, c in checks.items()} == dict.fromkeys(PULLS, "failure")
    for number, check in enumerate(checks.values(), 1):
        assert check["output"]["title"].startswith(TITLE), check["output"]["title"]
        summary = check["output"]["summary"]
        assert "**Evaluation contract changed at head**" in summary
        assert "- tickets: head changes the evaluation contract (" in summary
        assert "under head's own it would pass" in summary
        assert "| tickets (head's contract) | pass_rate |" in summary
        assert "passes only under head's changed evaluation contract" in comment(github, number)
        regressed = [a for a in check["annotations"] if "regressed" in a["title"]]
        assert [(a["path"], a["start_line"]) for a in regressed] == [
            ("evals/tickets.jsonl", n) for n in range(1, 6)]  # at head's lines (or base's)
        actions = check["history"][-1]["body"]["actions"]
        assert actions == [RERUN_BUTTON, ACCEPT_BUTTON]
    path, shas = repo
    payload = {"delivery_id": "a-1", "installation_id": INSTALLATION_ID,
               "repo": {"owner": OWNER, "name": REPO, "clone_url": path.as_uri()},
               "pr_number": 1, "check_run_id": checks["pr/expected"]["id"],
               "head_sha": shas["pr/expected"], "accepter": "writer"}
    job = f"accept:{OWNER}/{REPO}:{payload['check_run_id']}:writer"
    done = await run_burst([("accept_regression", payload, job)])
    assert list(done.values()) == [{"status": "accepted", "head_sha": shas["pr/expected"]}]
    [now] = [r for r in github.state()["check_runs"] if r["id"] == payload["check_run_id"]]
    assert now["conclusion"] == "success"
    assert "**Regression accepted** by `writer`" in now["output"]["summary"]
    assert github.state()["violations"] == []
