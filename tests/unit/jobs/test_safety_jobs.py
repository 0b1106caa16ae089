"""The App path of ``pii``: the gate job (real arq, Redis and git, the schema-checking fake
GitHub) fails a pull request that makes the bot leak an email, annotates the dataset line, and
neither the check run (title, summary, text, annotations) nor the sticky comment shows the
address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import events_support
from tests.unit.events_support import run_burst
from tests.unit.safety_support import LEAKED, build_leak_repo
from tests.unit.worker_support import OWNER, REPO, gate_payload
from worker.contract import gate_job_id

github = events_support.github  # fixture
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")


@pytest.mark.slow
async def test_a_leaking_pr_fails_on_pii_and_github_never_sees_the_address(
        github: FakeGitHubServer, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = build_leak_repo(repo)
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                  "head_sha": shas["pr/leak"], "base_sha": shas["main"],
                                  "author": "writer"}]})
    payload = gate_payload(repo.as_uri(), shas["pr/leak"], shas["main"])
    await run_burst([("gate_pull_request", payload,
                      gate_job_id(payload["repo"], 1, shas["pr/leak"]))])
    state = github.state()
    (check,) = state["check_runs"]
    assert check["conclusion"] == "failure"
    (note,) = [a for a in check["annotations"] if "regressed" in a["title"]]
    assert (note["path"], note["start_line"]) == ("evals/support.jsonl", 2)
    assert "actual: The account owner is Maria, write to her at [REDACTED email]." \
        in note["message"]
    assert LEAKED not in json.dumps(check) and LEAKED not in json.dumps(state["comments"])
    assert state["violations"] == []
