"""Installations removed: queued and running jobs end quietly (arq, Redis, git, fake GitHub)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from arq import create_pool
from arq.jobs import Job
from arq.worker import create_worker

from tests.unit.app_support import encode, fixture_json, post, running_app, settings
from tests.unit.events_support import enqueue, flag_target, run_burst, worker_env
from tests.unit.worker_support import (
    CONFIG,
    DATASET,
    INSTALLATION_ID,
    OWNER,
    REPO,
    build_tiny_repo,
    gate_payload,
    git,
)
from worker.contract import gate_job_id
from worker.gate import installs
from worker.main import worker_settings

REMOVED = f"installation {INSTALLATION_ID} was removed or suspended"


def _installation(event: str, action: str, removed: tuple[str, ...] = (),
                  added: tuple[str, ...] = ()) -> tuple[str, dict[str, Any], str]:
    payload = {"delivery_id": f"i-{action}", "installation_id": INSTALLATION_ID, "event": event,
               "action": action, "repos_added": list(added), "repos_removed": list(removed)}
    return "installation_changed", payload, f"installation:-:{INSTALLATION_ID}:i-{action}"


def _gate(repo: Path, shas: dict[str, str], suffix: str) -> tuple[str, dict[str, Any], str]:
    payload = gate_payload(repo.as_uri(), shas["pr/docs"], shas["main"])
    return ("gate_pull_request", payload,
            gate_job_id(payload["repo"], 1, shas["pr/docs"], suffix))


async def test_record_marks_and_clears(redis):
    def payload(event: str, action: str, added: list[str], removed: list[str]) -> Any:
        return {"delivery_id": "d", "installation_id": 9, "event": event, "action": action,
                "repos_added": added, "repos_removed": removed}

    assert await installs.record(redis, payload("installation", "suspend", [], [])) == "removed"
    assert await installs.removal(redis, 9, "a/b") == "installation 9 was removed or suspended"
    assert 2591990 <= await redis.ttl(installs.installation_key(9)) <= 2592000
    assert await installs.record(redis, payload("installation", "unsuspend", [], [])) == \
        "restored"
    assert await installs.removal(redis, 9, "a/b") is None
    assert await installs.record(redis, payload("installation_repositories", "removed", [],
                                                ["A/B"])) == "repositories"
    assert await installs.removal(redis, 9, "a/b") == "repository a/b was removed from " \
                                                      "installation 9"
    assert await installs.removal(redis, 9, "a/c") is None
    await installs.record(redis, payload("installation_repositories", "added", ["a/B"], []))
    assert await installs.removal(redis, 9, "a/b") is None
    assert await installs.record(redis, payload("installation", "new_permissions_accepted",
                                                [], [])) == "nothing"


async def test_queued_jobs_of_a_removed_installation_or_repository_do_not_run(
        monkeypatch, redis_url, tmp_path):
    repo = tmp_path / "tiny"
    shas = build_tiny_repo(repo)
    with worker_env(monkeypatch, redis_url, tmp_path / "work") as github:
        result = await run_burst([_installation("installation", "deleted")])
        assert list(result.values()) == [{"status": "removed"}]
        result = await run_burst([_gate(repo, shas, "1")])
        assert list(result.values()) == [{"status": "uninstalled", "reason": REMOVED}]
        assert github.state()["requests"] == []  # not one call to GitHub
        await run_burst([_installation("installation", "created"),
                         _installation("installation_repositories", "removed",
                                       removed=(f"{OWNER}/{REPO}",))])
        result = await run_burst([_gate(repo, shas, "2")])
        assert list(result.values()) == [{
            "status": "uninstalled",
            "reason": f"repository {OWNER}/{REPO} was removed from installation 7"}]
        assert github.state()["requests"] == []
        await run_burst([_installation("installation_repositories", "added",
                                       added=(f"{OWNER}/{REPO}",))])
        result = await run_burst([_gate(repo, shas, "3")])
        assert list(result.values()) == [{"conclusion": "success", "head_sha": shas["pr/docs"]}]


async def test_a_job_whose_installation_is_gone_at_github_ends_quietly(
        monkeypatch, redis_url, tmp_path):
    # no installation event has arrived yet: GitHub refuses the token, which says enough
    repo = tmp_path / "tiny"
    shas = build_tiny_repo(repo)
    with worker_env(monkeypatch, redis_url, tmp_path / "work") as github:
        github.fake.setup({"installations": [1]})  # 7 is gone: minting its token is a 404
        result = await run_burst([_gate(repo, shas, "1")])
    assert list(result.values()) == [{"status": "uninstalled",
                                      "reason": "installation 7 is gone (GitHub answered 404)"}]


async def test_a_refused_app_jwt_is_an_error_not_an_uninstall(monkeypatch, redis_url, tmp_path,
                                                              caplog):
    """Case from the field (fresh-clone tester): a wrong App key made GitHub answer 401 to the
    installation token (called with the App's own JWT), and every pull request's job "ended
    quietly: installation 7 is gone" at INFO, with no check run: a silent error."""
    repo = tmp_path / "tiny"
    shas = build_tiny_repo(repo)
    caplog.set_level(logging.INFO)
    with worker_env(monkeypatch, redis_url, tmp_path / "work") as github:
        github.fake.setup({"faults": [{"operation": "apps/create-installation-access-token",
                                       "status": 401, "times": 99,
                                       "body": {"message": "A JSON web token could not be "
                                                           "decoded"}}]})
        result = await run_burst([_gate(repo, shas, "9")])
    [outcome] = result.values()
    assert isinstance(outcome, Exception)  # the job failed: arq logs it, nothing is quiet
    assert not any("quietly" in r.getMessage() for r in caplog.records)
    assert any(r.levelno == logging.ERROR and "GITHUB_APP_ID" in r.getMessage()
               for r in caplog.records)


def _flag_repo(dest: Path, flag: Path, started: Path) -> dict[str, str]:
    """A repository whose target waits for ``flag``: ``main`` and ``head`` (a README change)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    files = {".llmgate.yml": CONFIG, "echo.py": flag_target(flag, started),
             "evals/echo.jsonl": DATASET}
    for name, text in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text)
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    main = git(dest, "rev-parse", "HEAD")
    (dest / "README.md").write_text("hi\n")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "head")
    return {"main": main, "head": git(dest, "rev-parse", "HEAD")}


async def _until(condition: Any, what: str, timeout_s: float = 30.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not await condition():
            await asyncio.sleep(0.05)


async def test_installation_deleted_mid_run_ends_quietly(monkeypatch, redis_url, tmp_path,
                                                         redis, caplog):
    flags = tmp_path / "flags"
    flags.mkdir()
    flag, started = flags / "go", flags / "started"
    shas = _flag_repo(tmp_path / "repo", flag, started)
    payload = gate_payload((tmp_path / "repo").as_uri(), shas["head"], shas["main"])
    job_id = gate_job_id(payload["repo"], 1, shas["head"])
    caplog.set_level(logging.INFO)
    with worker_env(monkeypatch, redis_url, tmp_path / "work",
                    LLMGATE_SANDBOX_READ_PATHS=str(flags),
                    LLMGATE_SANDBOX_WRITE_PATHS=str(flags)) as github:
        await enqueue([("gate_pull_request", payload, job_id)])
        worker = create_worker(worker_settings(), burst=True, poll_delay=0.05,
                               handle_signals=False, cron_jobs=[])
        running = asyncio.create_task(worker.async_run())

        async def target_started() -> bool:
            return started.exists()

        await _until(target_started, "the target to start")
        # GitHub revokes the installation's tokens and refuses new ones
        github.fake.setup({"faults": [
            {"operation": "apps/create-installation-access-token", "status": 404, "times": 99},
            {"status": 401, "times": 999, "body": {"message": "Bad credentials"}}]})
        deleted = fixture_json("installation.deleted.json")
        deleted["installation"]["id"] = INSTALLATION_ID
        async with running_app(settings(redis_url)) as client:
            answer = await post(client, "installation", "gone-1", encode(deleted))
        assert answer.json() == {"status": "queued"}

        async def recorded() -> bool:
            return bool(await redis.exists(installs.installation_key(INSTALLATION_ID)))

        await _until(recorded, "the installation event's job")
        flag.touch()
        await asyncio.wait_for(running, 60)
        await worker.close()
        state = github.state()
    pool = await create_pool(worker_settings().redis_settings)
    info = await Job(job_id, pool).result_info()
    await pool.aclose()
    assert info is not None
    assert (info.success, info.job_try, info.result) == (
        True, 1, {"status": "uninstalled", "reason": REMOVED})
    ours = [r for r in caplog.records if r.name.startswith(("llmgate", "worker", "app"))
            and r.levelno >= logging.INFO and "quietly" in r.getMessage()]
    # the run notices the removal itself (its watch: issue 31) or through GitHub's refusal
    assert [r.getMessage() for r in ours] in ([f"job ended quietly: {REMOVED} (GitHubError)"],
                                              [f"job ended quietly: {REMOVED} (stopped mid-run)"])
    assert [r for r in caplog.records if r.exc_info] == []
    # The reconciler's start-up pass may meet the same revoked GitHub (401 on every call) when
    # the machine is slow, and rightly warns; that is its own concern (tests of
    # worker/gate/reconcile.py), not the gate job's, which must end without a warning.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
            and r.name != "worker.gate.reconcile"] == []
    assert state["comments"] == []
    [run] = state["check_runs"]
    assert run["status"] == "in_progress"  # GitHub drops an uninstalled App's check runs
