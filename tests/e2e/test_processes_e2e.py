"""The processes as an operator starts them: ``arq``, ``llmgate worker``, ``llmgate serve``.

Start-up with a bad setting must stop with one line on stderr (no traceback, no arq banner:
the check runs before arq touches Redis, which is reachable here so it would start otherwise).
A good start-up must serve: ``/healthz`` answers, and a worker started by ``llmgate worker``
processes a job enqueued straight into Redis, reaching the fake GitHub through a GitHub
Enterprise style ``/api/v3`` root.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq import create_pool
from arq.connections import RedisSettings

from tests.conftest import free_port, wait_for_port
from tests.fakes.fake_github import FakeGitHubServer
from tests.timing import scaled
from tests.unit.runs_support import PRIVATE_PEM, fake_github_server
from tests.unit.worker_support import (
    APP_ID,
    build_tiny_repo,
    files_containing,
    gate_payload,
)
from worker.contract import gate_job_id

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARQ = [sys.executable, "-m", "arq", "worker.main.WorkerSettings"]
LLMGATE = [sys.executable, "-m", "worker.cli"]
PREFIX = "llmgate worker: configuration error: "


def clean_env(tmp_path: Path, **values: str) -> dict[str, str]:
    """The test's environment without any llmgate/GitHub/Redis variable, plus ``values``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "REDIS_", "LLMGATE_", "PYTEST_"))}
    return env | {"HOME": str(tmp_path), "PYTHONPATH": str(ROOT)} | values


def worker_env(tmp_path: Path, redis_url: str, api_url: str = "https://api.github.com",
               ) -> dict[str, str]:
    return clean_env(tmp_path, GITHUB_APP_ID=APP_ID, GITHUB_APP_PRIVATE_KEY=PRIVATE_PEM,
                     GITHUB_API_URL=api_url, REDIS_URL=redis_url,
                     LLMGATE_WORKDIR=str(tmp_path / "work"))


#: One case per variable (every malformed form is in tests/unit/runtime/test_worker_settings.py).
BAD_SETTINGS: list[tuple[dict[str, str | None], str]] = [
    ({"GITHUB_APP_ID": None}, "GITHUB_APP_ID must be set to the App's numeric id"),
    ({"GITHUB_APP_PRIVATE_KEY": None},
     "GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_FILE (path) must be set"),
    ({"GITHUB_APP_PRIVATE_KEY": "garbage"},
     "GITHUB_APP_PRIVATE_KEY is not a PEM private key without a passphrase"),
    ({"GITHUB_APP_PRIVATE_KEY": None, "GITHUB_APP_PRIVATE_KEY_FILE": "/nonexistent/app.pem"},
     "GITHUB_APP_PRIVATE_KEY_FILE cannot be read: No such file or directory"),
    ({"GITHUB_API_URL": "ghe.example.com/api/v3"},
     "GITHUB_API_URL must be an http(s) URL, e.g. https://api.github.com"),
    ({"REDIS_URL": "http://127.0.0.1:6379/0"},
     "REDIS_URL must be a redis://, rediss:// or unix:// URL"),
]


def run_with(cmd: list[str], env: dict[str, str], change: dict[str, str | None],
             ) -> subprocess.CompletedProcess[str]:
    env = dict(env)
    for name, value in change.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("change", "message"), BAD_SETTINGS)
def test_arq_worker_stops_with_one_line(tmp_path, redis_url, change, message):
    done = run_with(ARQ, worker_env(tmp_path, redis_url), change)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [PREFIX + message]


@pytest.mark.parametrize(("change", "message"), [BAD_SETTINGS[0], BAD_SETTINGS[-1]])
def test_llmgate_worker_stops_with_one_line(tmp_path, redis_url, change, message):
    done = run_with([*LLMGATE, "worker"], worker_env(tmp_path, redis_url), change)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [PREFIX + message]


def test_llmgate_serve_without_secret_stops_with_one_line(tmp_path, redis_url):
    done = run_with([*LLMGATE, "serve", "--port", str(free_port())],
                    clean_env(tmp_path, REDIS_URL=redis_url), {})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "llmgate web: configuration error: GITHUB_WEBHOOK_SECRET is not set or empty: "
        "set it to the GitHub App's webhook secret"]


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM the process; return its exit code and everything it printed."""
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=30)
    return proc.returncode, output


def test_llmgate_serve_answers_healthz(tmp_path, redis_url):
    port = free_port()
    env = clean_env(tmp_path, REDIS_URL=redis_url, GITHUB_WEBHOOK_SECRET="s3cret")
    proc = subprocess.Popen([*LLMGATE, "serve", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port)
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    finally:
        code, output = stop(proc)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught (exit -15)
    assert code in (0, -signal.SIGTERM)
    assert "Traceback" not in output and "s3cret" not in output
    assert "Application shutdown complete" in output


@pytest.fixture()
def github() -> Iterator[FakeGitHubServer]:
    """A fresh `fake_github_server` (it knows the App by `PRIVATE_PEM`'s public half)."""
    with fake_github_server() as server:
        yield server


def wait_completed(github: FakeGitHubServer, proc: subprocess.Popen[str],
                   timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        runs = github.state()["check_runs"]
        if runs and runs[0]["status"] == "completed":
            return dict(runs[0])
        assert proc.poll() is None, "the worker exited"
        time.sleep(0.1)
    raise TimeoutError("no completed check run")


async def enqueue(redis_url: str, payload: Any) -> None:
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    await pool.enqueue_job("gate_pull_request", payload,
                           _job_id=gate_job_id(payload["repo"], 1, payload["head_sha"]))
    await pool.aclose()


def test_llmgate_worker_runs_a_job_against_an_enterprise_api_root(tmp_path, redis_url, github):
    shas = build_tiny_repo(tmp_path / "tiny")
    env = worker_env(tmp_path, redis_url, api_url=github.enterprise_url)
    proc = subprocess.Popen([*LLMGATE, "worker"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        asyncio.run(enqueue(redis_url, gate_payload((tmp_path / "tiny").as_uri(),
                                                    shas["pr/drop"], shas["main"])))
        run = wait_completed(github, proc)
    finally:
        code, output = stop(proc)
    assert (run["name"], run["conclusion"]) == ("llmgate", "failure")
    assert [a["start_line"] for a in run["annotations"]] == [2]  # bravo, line 2 of the dataset
    state = github.state()
    assert len(state["comments"]) == 1
    assert all(r["raw_path"].startswith("/api/v3/") for r in state["requests"])
    assert state["violations"] == []
    assert code == 0 and "Traceback" not in output
    assert "gate_pull_request" in output  # arq's own log lines are shown
    [token] = [t["token"] for t in state["tokens"]]
    assert token not in output and PRIVATE_PEM.splitlines()[1] not in output
    assert files_containing(tmp_path / "work", [token]) == []
