"""The App shows a gate's progress in its in-progress check run (issue 20): real arq, Redis and
git, the schema-checking fake GitHub, litellm over HTTP to a slow fake provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import events_support, failclosed_support, llm_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import OWNER, REPO, gate_payload
from worker.contract import gate_job_id
from worker.gate import progress

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm
repo = failclosed_support.failclosed_repo


async def _gate_the_regressing_pr(github: FakeGitHubServer,
                                  repo: tuple[Path, dict[str, str]]) -> dict[str, Any]:
    """Open PR 1 (pr/regress against main), run its gate job; return its one check run."""
    path, shas = repo
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                  "head_sha": shas["pr/regress"], "base_sha": shas["main"],
                                  "author": "writer"}]})
    payload = gate_payload(path.as_uri(), shas["pr/regress"], shas["main"], number=1)
    await run_burst([("gate_pull_request", payload,
                      gate_job_id(payload["repo"], 1, shas["pr/regress"]))])
    [check] = github.state()["check_runs"]
    return check


async def test_a_slow_run_patches_its_progress_and_completes_last(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.05)
    llm.setup({"latency_ms": 400})  # 5 tickets a side at concurrency 5: > 0.4 s a side
    check = await _gate_the_regressing_pr(github, repo)
    shas = repo[1]
    bodies = [h["body"] for h in check["history"]]
    assert bodies[-1]["status"] == "completed" and check["conclusion"] == "failure"
    assert all(b.get("status") != "completed" for b in bodies[:-1])
    shown = [b["output"]["summary"] for b in bodies[1:-1]
             if b.get("status") == "in_progress" and "| Side | Suite |" in b["output"]["summary"]]
    assert shown, bodies
    rows = [row for summary in shown for row in summary.splitlines()
            if row.startswith(("| base ", "| head "))]
    assert any(row.startswith(f"| head {shas['pr/regress'][:7]} | tickets | ")
               and "/5 |" in row for row in rows), rows
    assert github.state()["violations"] == []


async def test_a_failing_progress_patch_does_not_fail_the_gate(
        github: FakeGitHubServer, repo: tuple[Path, dict[str, str]], llm: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[object] = []

    class Refusing:
        """The updater's client: every progress PATCH fails."""

        async def update_check_run(self, *args: object) -> None:
            tried.append(args)
            raise RuntimeError("GitHub refused the progress")

    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.05)
    original = progress._update

    async def failing(gh, *args, **kwargs):  # type: ignore[no-untyped-def]
        await original(Refusing(), *args, **kwargs)  # only the updater's PATCHes fail

    monkeypatch.setattr(progress, "_update", failing)
    llm.setup({"latency_ms": 300})
    check = await _gate_the_regressing_pr(github, repo)
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    assert "regress" in check["output"]["title"]
    assert tried  # the updater tried, failed, and the gate went on
