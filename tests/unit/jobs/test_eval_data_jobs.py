"""The App: a target cannot read the eval data that grades it (issue 30, part 2), through the
gate job (real arq, Redis and git, the schema-checking fake GitHub).

The field case is tests/unit/eval_data_support.py's: ``pr/cheat`` breaks its command target and
makes it answer with the ``expected`` values of the dataset in its own checkout. Before the fix
its check concluded ``success`` with the regression passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import eval_data_support, events_support
from tests.unit.eval_data_support import IDS, NO_LANDLOCK
from tests.unit.events_support import run_burst
from tests.unit.worker_support import OWNER, REPO, gate_payload
from worker.contract import gate_job_id
from worker.security import landlock

github = events_support.github  # fixtures
repo = eval_data_support.eval_data_repo


async def gate_pr(github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
                  branch: str) -> tuple[dict[str, Any], str]:
    """Open a PR of ``branch`` against main and run its gate job; return its check run and
    the sticky comment's body."""
    path, shas = repo
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                  "head_sha": shas[branch], "base_sha": shas["main"],
                                  "author": "writer"}]})
    payload = gate_payload(path.as_uri(), shas[branch], shas["main"])
    await run_burst([("gate_pull_request", payload,
                      gate_job_id(payload["repo"], 1, shas[branch]))])
    [check] = github.state()["check_runs"]
    [comment] = [c["body"] for c in github.state()["comments"] if c["issue_number"] == 1]
    return check, comment


@pytest.fixture(autouse=True)
def sandbox_as_the_machine_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LLMGATE_SANDBOX", "LLMGATE_SANDBOX_READ_PATHS"):
        monkeypatch.delenv(name, raising=False)


async def test_a_target_reading_the_dataset_of_its_checkout_does_not_pass_a_regression(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]]) -> None:
    check, comment = await gate_pr(github, repo, "pr/cheat")
    assert check["conclusion"] == "failure"
    regressed = [a["start_line"] for a in check["annotations"]
                 if a["path"] == "evals/qa.jsonl" and "regressed" in a["title"]]
    assert regressed == list(range(1, len(IDS) + 1))
    assert check["output"]["title"].startswith("llmgate: fail, 6 regressions")
    # the note is there exactly when this machine has no Landlock
    assert ("targets could read the eval data" in comment) == (landlock.abi_version() < 1)
    assert github.state()["violations"] == []


async def test_without_landlock_the_check_and_comment_say_targets_could_read_the_eval_data(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMGATE_SANDBOX", "off")
    check, comment = await gate_pr(github, repo, "pr/cheat")
    assert check["conclusion"] == "failure"
    summary = " ".join(check["output"]["summary"].split())
    assert NO_LANDLOCK in summary and NO_LANDLOCK in " ".join(comment.split())
    assert github.state()["violations"] == []
