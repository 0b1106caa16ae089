"""Scheduled calibration: the arq cron job, its settings, its Redis record and the report note.

Real Redis, real git (a local repository as the clone URL), the schema-checking fake GitHub for
the installation token, and a real burst-mode arq worker for the gate jobs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from arq import create_pool
from arq.worker import create_worker
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.pipeline.test_calibrate import make_repo
from tests.unit.runs_support import PRIVATE_PEM, fake_github_server
from tests.unit.worker_support import (
    APP_ID,
    INSTALLATION_ID,
    OWNER,
    REPO,
    build_tiny_repo,
    gate_payload,
    git,
)
from worker.checkout import Checkouts
from worker.contract import gate_job_id
from worker.evals.types import GateReport
from worker.gate.calibration import (
    CalibrationSchedule,
    calibration_note,
    remember_base,
    result_key,
    target_key,
    with_calibration_note,
)
from worker.gate.services import Services
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.jobs.calibrate import CALIBRATE_TIMEOUT_S
from worker.main import worker_settings
from worker.runtime.settings import SettingsError, WorkerConfig

KEY = f"{OWNER}/{REPO}"


def test_schedule_from_the_environment() -> None:
    assert CalibrationSchedule.from_env({}) is None
    assert CalibrationSchedule.from_env({"LLMGATE_CALIBRATE_REPOS": " , "}) is None
    assert CalibrationSchedule.from_env({"LLMGATE_CALIBRATE_REPOS": "a/b"}) == \
        CalibrationSchedule(("a/b",), runs=5, weekday=6, hour=3, minute=0)
    found = CalibrationSchedule.from_env({"LLMGATE_CALIBRATE_REPOS": "a/b, c-d/e.f a/b",
                                          "LLMGATE_CALIBRATE_RUNS": "3",
                                          "LLMGATE_CALIBRATE_AT": "Daily 04:30"})
    assert found == CalibrationSchedule(("a/b", "c-d/e.f"), runs=3, weekday=None, hour=4,
                                        minute=30)


@pytest.mark.parametrize(("env", "message"), [
    ({"LLMGATE_CALIBRATE_REPOS": "a/b,https://x/y"},
     "LLMGATE_CALIBRATE_REPOS must list owner/name repositories separated by commas, got "
     "'https://x/y'"),
    ({"LLMGATE_CALIBRATE_REPOS": "a/b", "LLMGATE_CALIBRATE_RUNS": "1"},
     "LLMGATE_CALIBRATE_RUNS must be a whole number from 2 to 20"),
    ({"LLMGATE_CALIBRATE_REPOS": "a/b", "LLMGATE_CALIBRATE_RUNS": "many"},
     "LLMGATE_CALIBRATE_RUNS must be a whole number from 2 to 20"),
    ({"LLMGATE_CALIBRATE_REPOS": "a/b", "LLMGATE_CALIBRATE_AT": "sunday 3am"},
     "LLMGATE_CALIBRATE_AT must be a day (mon ... sun, or daily) and a UTC time, e.g. "
     "'sun 03:00'"),
    ({"LLMGATE_CALIBRATE_REPOS": "a/b", "LLMGATE_CALIBRATE_AT": "mon 24:00"},
     "LLMGATE_CALIBRATE_AT must be a day (mon ... sun, or daily) and a UTC time, e.g. "
     "'sun 03:00'"),
])
def test_bad_schedules_stop_the_worker_with_one_line(env: dict[str, str], message: str,
                                                     tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        worker_settings(base_env(tmp_path) | env)
    assert str(caught.value) == message


def base_env(tmp_path: Path, redis_url: str = "redis://127.0.0.1:6379/2") -> dict[str, str]:
    return {"GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": PRIVATE_PEM,
            "REDIS_URL": redis_url, "LLMGATE_WORKDIR": str(tmp_path / "work")}


def test_the_cron_job_is_registered_only_when_opted_in(tmp_path: Path) -> None:
    assert [j.name for j in worker_settings(base_env(tmp_path)).cron_jobs] == ["sweep_runs"]
    settings = worker_settings(base_env(tmp_path) | {"LLMGATE_CALIBRATE_REPOS": KEY,
                                                     "LLMGATE_CALIBRATE_AT": "wed 02:15"})
    job, _sweeper = settings.cron_jobs
    assert (job.name, job.weekday, job.hour, job.minute, job.second) == (
        "calibrate_repositories", 2, 2, 15, 0)
    assert (job.unique, job.timeout_s, job.max_tries) == (True, CALIBRATE_TIMEOUT_S, 1)
    assert str(settings.timezone) == "UTC"


def test_the_note_of_a_stored_calibration() -> None:
    record = {"runs": 3, "comparisons": 2, "false_alarms": 1, "false_alarm_rate": 0.5,
              "alpha": 0.05, "sha": "0123456789abcdef", "finished_at": 1718078400.0,
              "unstable": {"tickets": ["t1", "t2"]}}
    assert calibration_note(record) == (
        "last calibration (3 identical runs of 0123456, 2024-06-11 04:00 UTC): false-alarm "
        "rate 1/2 = 0.500 (expected at most alpha = 0.05); unstable examples (candidates for "
        "`quarantine:`): tickets: t1, t2")
    many = record | {"alpha": None, "unstable": {"s": [f"e{i}" for i in range(12)]}}
    assert calibration_note(many).endswith("rate 1/2 = 0.500; unstable examples (candidates "
                                           "for `quarantine:`): s: e0, e1, e2, e3, e4, e5, e6, "
                                           "e7, e8, e9 and 2 more")
    calm = record | {"unstable": {}}
    assert calibration_note(calm).endswith("; no example changed between identical runs")


@pytest.fixture()
def github() -> Iterator[FakeGitHubServer]:
    """A fresh `fake_github_server` (it knows the App by `PRIVATE_PEM`'s public half)."""
    with fake_github_server() as server:
        yield server


@pytest.fixture()
async def services(github: FakeGitHubServer, redis_url: str,
                   tmp_path: Path) -> AsyncIterator[Services]:
    config = WorkerConfig.from_env(base_env(tmp_path, redis_url) | {"GITHUB_API_URL": github.url})
    found = Services(config=config, http=httpx.AsyncClient(timeout=30),
                     tokens=InstallationTokenCache(AppCredentials(APP_ID, PRIVATE_PEM)),
                     checkouts=Checkouts(tmp_path / "work"), redis=Redis.from_url(redis_url),
                     calibration=CalibrationSchedule((KEY,), runs=3))
    yield found
    await found.http.aclose()
    await found.redis.aclose()


def committed_flaky_repo(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    repo = make_repo(root, monkeypatch)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "flaky bot")
    return repo, git(repo, "rev-parse", "HEAD")


@pytest.mark.slow
async def test_the_cron_job_calibrates_the_remembered_base_and_the_report_shows_it(
        services: Services, github: FakeGitHubServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, sha = committed_flaky_repo(tmp_path / "flaky", monkeypatch)
    cron = services.calibration
    assert cron is not None
    other = gate_payload(str(repo), "f" * 40, sha, repo="other")
    await remember_base(services.redis, cron, other)  # not opted in: nothing kept
    assert await services.redis.get(target_key(f"{OWNER}/other")) is None
    ctx = {"services": services}
    job = worker_settings(base_env(tmp_path) | {"LLMGATE_CALIBRATE_REPOS": KEY}).cron_jobs[0]
    assert await job.coroutine(ctx) == {KEY: "skipped: no pull request gated since it was "
                                             "opted in, so no base commit is known"}
    await remember_base(services.redis, cron, gate_payload(str(repo), "f" * 40, sha))
    assert json.loads(await services.redis.get(target_key(KEY))) == {
        "installation_id": INSTALLATION_ID, "clone_url": str(repo), "sha": sha}
    assert 0 < await services.redis.ttl(target_key(KEY)) <= 90 * 86400
    assert await job.coroutine(ctx) == {KEY: "calibrated"}
    record = json.loads(await services.redis.get(result_key(KEY)))
    assert (record["sha"], record["runs"], record["comparisons"], record["false_alarms"]) == (
        sha, 3, 2, 1)
    assert record["unstable"] == {"tickets": ["t1", "t2"]}
    assert record["alarms_by_rule"] == {"tickets pass_rate: max_new_failures 0": 1}
    report = GateReport("success", (), (), None, None, notes=("a note",))
    noted = await with_calibration_note(services.redis, gate_payload(str(repo), sha, sha)["repo"],
                                        report)
    assert noted.notes == ("a note", calibration_note(record))
    assert noted.notes[1].startswith(f"last calibration (3 identical runs of {sha[:7]}, ")
    assert github.state()["violations"] == []


@pytest.mark.slow
async def test_a_broken_base_is_reported_not_raised(services: Services, tmp_path: Path) -> None:
    cron = services.calibration
    assert cron is not None
    await remember_base(services.redis, cron, gate_payload(str(tmp_path / "gone"), "f" * 40,
                                                           "a" * 40))
    result = await worker_settings(base_env(tmp_path) | {"LLMGATE_CALIBRATE_REPOS": KEY}) \
        .cron_jobs[0].coroutine({"services": services})
    assert result[KEY].startswith("failed: ") and "does not appear to be a git repository" \
        in result[KEY]
    assert await services.redis.get(result_key(KEY)) is None


@pytest.mark.slow
async def test_gate_jobs_remember_the_base_and_comment_with_the_calibration(
        github: FakeGitHubServer, redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    shas = build_tiny_repo(tmp_path / "tiny")
    env = base_env(tmp_path, redis_url) | {"GITHUB_API_URL": github.url,
                                           "LLMGATE_CALIBRATE_REPOS": KEY}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    record = {"runs": 3, "comparisons": 2, "false_alarms": 0, "false_alarm_rate": 0.0,
              "alpha": None, "sha": shas["main"], "finished_at": 1718078400.0, "unstable": {}}
    client = Redis.from_url(redis_url)
    await client.set(result_key(KEY), json.dumps(record))
    settings = worker_settings()
    pool = await create_pool(settings.redis_settings)
    payload = gate_payload(str(tmp_path / "tiny"), shas["pr/docs"], shas["main"])
    await pool.enqueue_job("gate_pull_request", payload,
                           _job_id=gate_job_id(payload["repo"], 1, shas["pr/docs"]))
    await pool.aclose()
    worker = create_worker(settings, burst=True, poll_delay=0.05, handle_signals=False)
    await worker.async_run()
    await worker.close()
    assert json.loads(await client.get(target_key(KEY)))["sha"] == shas["main"]
    await client.aclose()
    state = github.state()
    (comment,) = state["comments"]
    assert calibration_note(record) in comment["body"]
    assert state["check_runs"][0]["conclusion"] == "success" and state["violations"] == []
