"""A renamed or transferred repository keeps its gates working; no check run stays in progress.

Field case: a repository renamed while a run was going (``acme/old-tiny`` to ``acme/tiny``).
GitHub answered the old path with 307 (a PATCH) and a ``Location`` on
``/repositories/{id}/...``; gidgethub does not follow redirects, so the run could not conclude
its check run, which stayed ``in_progress`` for good (the sweeper's PATCH got the same answer).
The jobs run in a real arq worker against the schema-checking fake GitHub, which answers a
moved repository's old paths as GitHub does (301 for GET, 307 otherwise).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq.worker import create_worker

from tests.unit import events_support, worker_support
from tests.unit.events_support import enqueue, flag_target, worker_env
from tests.unit.github_fixtures import FAST_RETRIES
from tests.unit.worker_support import (
    CONFIG,
    DATASET,
    INSTALLATION_ID,
    OWNER,
    REPO,
    commit,
    gate_payload,
    git,
)
from worker.contract import gate_job_id
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient, GitHubError
from worker.github.redirects import MAX_REDIRECTS, redirect_target
from worker.main import worker_settings

github, tiny_repo = events_support.github, worker_support.tiny_repo  # fixtures

OLD = "old-tiny"
MOVE = {"from": f"{OWNER}/{OLD}", "to": f"{OWNER}/{REPO}", "id": 4711}


def _statuses(state: dict[str, Any]) -> list[tuple[str, int]]:
    return [(r["method"], r["status"]) for r in state["requests"] if 300 <= r["status"] < 400]


async def test_a_job_queued_under_the_old_name_gates_the_moved_repository(github, tiny_repo):
    repo, shas = tiny_repo
    github.setup({"renamed": [MOVE]})
    payload = gate_payload(str(repo), shas["pr/drop"], shas["main"], repo=OLD)
    await worker_support.run_jobs([payload])
    state = github.state()
    [run] = state["check_runs"]
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert len(run["annotations"]) == 1  # bravo regressed, annotated on its dataset line
    [comment] = state["comments"]
    assert (comment["owner"], comment["repo"]) == (OWNER, REPO)
    assert ("POST", 307) in _statuses(state) and ("GET", 301) in _statuses(state)
    assert [r for r in state["requests"] if r["status"] >= 400] == []
    assert state["violations"] == []


def _flag_repo(dest: Path, flag: Path, started: Path) -> dict[str, str]:
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": commit(dest, "main", {".llmgate.yml": CONFIG, "evals/echo.jsonl": DATASET,
                                          "echo.py": flag_target(flag, started)})}
    shas["head"] = commit(dest, "head", {"README.md": "hi\n"})
    return shas


async def test_renamed_while_running_the_check_run_is_still_concluded(
        monkeypatch, redis_url, tmp_path):
    flags = tmp_path / "flags"
    flags.mkdir()
    flag, started = flags / "go", flags / "started"
    shas = _flag_repo(tmp_path / "repo", flag, started)
    payload = gate_payload(str(tmp_path / "repo"), shas["head"], shas["main"], repo=OLD)
    with worker_env(monkeypatch, redis_url, tmp_path / "work",
                    LLMGATE_SANDBOX_READ_PATHS=str(flags),
                    LLMGATE_SANDBOX_WRITE_PATHS=str(flags)) as github:
        await enqueue([("gate_pull_request", payload,
                        gate_job_id(payload["repo"], 1, shas["head"]))])
        worker = create_worker(worker_settings(), burst=True, poll_delay=0.05,
                               handle_signals=False, cron_jobs=[])
        running = asyncio.create_task(worker.async_run())
        async with asyncio.timeout(30):
            while not started.exists():
                await asyncio.sleep(0.05)
        github.setup({"renamed": [MOVE]})  # the check run moves with the repository
        flag.touch()
        await running
        await worker.close()
        state = github.state()
    [run] = state["check_runs"]
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    assert [h["body"].get("status") for h in run["history"]] == ["in_progress", "completed"]
    assert ("PATCH", 307) in _statuses(state)
    assert len(state["comments"]) == 1
    assert state["violations"] == []


# ---------------------------------------------------------------- the redirect rules
@pytest.mark.parametrize(("root", "location", "expected"), [
    ("https://api.github.com", "https://api.github.com/repositories/1/pulls/2",
     "https://api.github.com/repositories/1/pulls/2"),
    ("https://api.github.com", "/repositories/1/pulls/2",
     "https://api.github.com/repositories/1/pulls/2"),  # relative: resolved on the request
    ("https://ghe.test/api/v3", "https://ghe.test/api/v3/repositories/1/pulls/2",
     "https://ghe.test/api/v3/repositories/1/pulls/2"),
    ("https://ghe.test/api/v3", "https://ghe.test/repositories/1/pulls/2", None),  # off /api/v3
    ("https://api.github.com", "https://evil.test/repositories/1/pulls/2", None),  # off-host
    ("https://api.github.com", "http://api.github.com/repositories/1/pulls/2", None),  # http
])
def test_only_redirects_on_the_api_origin_are_followed(root, location, expected):
    url = f"{root}/repos/acme/old/pulls/2"
    assert redirect_target(root, url, 301, httpx.Headers({"Location": location})) == expected


@pytest.mark.parametrize("status", [200, 303, 304, 404])
def test_other_statuses_are_never_followed(status):
    headers = httpx.Headers({"Location": "https://api.github.com/repositories/1"})
    assert redirect_target("https://api.github.com", "https://api.github.com/x", status,
                           headers) is None


async def test_a_redirect_loop_stops_after_max_redirects(github):
    pull = "/repos/acme/loop/pulls/1"
    github.setup({"faults": [{"path": pull, "status": 301, "times": 10,
                              "headers": {"Location": github.url + pull}}]})
    creds = AppCredentials(worker_support.APP_ID, os.environ["GITHUB_APP_PRIVATE_KEY"])
    async with httpx.AsyncClient(timeout=10) as session:
        gh = GitHubClient(session, github.url, creds, InstallationTokenCache(creds),
                          INSTALLATION_ID, retry_delays_s=FAST_RETRIES)
        with pytest.raises(GitHubError) as caught:
            await gh.get_pull("acme", "loop", 1)
    assert caught.value.status_code == 301
    hops = [r for r in github.state()["requests"] if r["path"] == pull]
    assert len(hops) == MAX_REDIRECTS + 1

