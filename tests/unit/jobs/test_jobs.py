"""The gate job in a real arq worker: real Redis, real git, the schema-checking fake GitHub.

The worker runs in this process (arq burst mode) so a test can look at its shared services
afterwards; GitHub is `running_fake_github` on loopback and repositories are either local paths
or served over HTTP by `GitHttpServer`, which records the ``Authorization`` git sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit import worker_support
from tests.unit.worker_support import (
    OWNER,
    REPO,
    GitHttpServer,
    basic_auth,
    files_containing,
    gate_payload,
    publish_bare,
    run_jobs,
)
from worker.gate.services import Services

TOKEN_OPERATION = "apps/create-installation-access-token"

github, tiny_repo = worker_support.github, worker_support.tiny_repo  # fixtures


@pytest.fixture()
def git_http(tiny_repo: tuple[Path, dict[str, str]], tmp_path: Path) -> Iterator[GitHttpServer]:
    """The tiny repository served at ``/acme/tiny.git`` (and nothing at any other path)."""
    publish_bare(tiny_repo[0], tmp_path / "served", f"{OWNER}/{REPO}.git")
    with GitHttpServer(tmp_path / "served") as server:
        yield server


def only_run(state: dict[str, Any]) -> dict[str, Any]:
    runs: list[dict[str, Any]] = state["check_runs"]
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize("where", ["http", "path"])
async def test_unreachable_repository_concludes_the_check_with_the_reason(
        github, git_http, tmp_path, where):
    clone_url = (f"{git_http.url}/{OWNER}/missing.git" if where == "http"
                 else str(tmp_path / "missing"))
    await run_jobs([gate_payload(clone_url, "a" * 40, "b" * 40)])
    state = github.state()
    run = only_run(state)
    assert (run["name"], run["status"], run["conclusion"]) == ("llmgate", "completed", "failure")
    assert [h["body"].get("status") for h in run["history"]] == ["in_progress", "completed"]
    summary = run["output"]["summary"]
    assert run["output"]["title"] == "llmgate: the run failed"
    assert summary.startswith("The eval run could not finish: git failed: ")
    assert "missing" in summary and "/llmgate rerun" in summary
    reason = "not found" if where == "http" else "does not appear to be a git repository"
    assert reason in summary
    [token] = [t["token"] for t in state["tokens"]]
    assert token not in summary and basic_auth(token).split()[1] not in summary
    # git sends the token to an http(s) remote (twice: the sha fetch, then all heads) only
    assert set(git_http.authorizations) == ({basic_auth(token)} if where == "http" else set())
    assert state["violations"] == []


async def test_token_is_minted_once_for_two_jobs_and_never_stored(
        github, git_http, tiny_repo, tmp_path):
    _, shas = tiny_repo
    clone_url = f"{git_http.url}/{OWNER}/{REPO}.git"
    worker = await run_jobs([gate_payload(clone_url, shas["pr/drop"], shas["main"], number=1),
                             gate_payload(clone_url, shas["pr/docs"], shas["main"], number=2)])
    state = github.state()
    conclusions = {r["head_sha"]: (r["status"], r["conclusion"]) for r in state["check_runs"]}
    assert conclusions == {shas["pr/drop"]: ("completed", "failure"),
                           shas["pr/docs"]: ("completed", "success")}
    assert sorted(c["issue_number"] for c in state["comments"]) == [1, 2]
    assert [r["operation"] for r in state["requests"]].count(TOKEN_OPERATION) == 1
    [token] = [t["token"] for t in state["tokens"]]
    assert git_http.authorizations and set(git_http.authorizations) == {basic_auth(token)}
    workdir = tmp_path / "work"
    assert files_containing(workdir, [token, basic_auth(token).split()[1]]) == []
    services: Services = worker.ctx["services"]
    assert services.checkouts.clone_count == 1
    assert [p.name for p in (workdir / "mirrors").glob("*.git")] == ["acme__tiny.git"]
    assert list((workdir / "worktrees").iterdir()) == []
    assert state["violations"] == []


async def test_enterprise_api_url_serves_a_whole_job(github, tiny_repo, monkeypatch):
    repo, shas = tiny_repo
    monkeypatch.setenv("GITHUB_API_URL", github.enterprise_url + "/")
    await run_jobs([gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])])
    state = github.state()
    run = only_run(state)
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    assert len(state["comments"]) == 1
    paths = [r["raw_path"] for r in state["requests"]]
    assert paths and all(p.startswith("/api/v3/") for p in paths), paths
    assert state["violations"] == []
