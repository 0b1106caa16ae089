"""The last calibration's A/A runs weigh the examples of the App's gate (``llmgate run``'s:
tests/unit/cli/test_cli_calibration_file.py; the suite: tests/unit/calibration_support.py).

Real Redis, real git, a burst arq worker and the schema-checking fake GitHub. The suite has 16
examples that passed in each of 5 earlier identical runs and 6 that passed in 3 of them. Head
breaks 8 of the stable ones and fixes 4 flaky ones base fails. Unweighted (no calibration
known) that is McNemar's 8 against 4, p = 794/4096 = 0.194: the check passes. With the record
in Redis a break of an example that never flipped counts about 3.5 times a flaky one's fix
(worker/evals/verdict/flakiness.py), the exact sign-flip p-value is 24/4096 = 0.0059 and the
check fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.calibration_support import KEY, RECORD, flaky_repo
from tests.unit.runs_support import PRIVATE_PEM, fake_github_server
from tests.unit.worker_support import APP_ID, gate_payload, run_jobs
from worker.gate.calibration import result_key


@pytest.fixture()
def github() -> Iterator[FakeGitHubServer]:
    with fake_github_server() as server:
        yield server


@pytest.mark.slow
async def test_the_calibration_in_redis_weighs_the_apps_gate(
        github: FakeGitHubServer, redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    shas = flaky_repo(tmp_path / "flaky")
    env = {"GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": PRIVATE_PEM,
           "REDIS_URL": redis_url, "LLMGATE_WORKDIR": str(tmp_path / "work"),
           "GITHUB_API_URL": github.url}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    url = str(tmp_path / "flaky")
    await run_jobs([gate_payload(url, shas["pr/mixed"], shas["main"], number=1)])
    client = Redis.from_url(redis_url)
    await client.set(result_key(KEY), json.dumps(RECORD))
    await client.aclose()
    await run_jobs([gate_payload(url, shas["pr/again"], shas["main"], number=2)])
    state = github.state()
    assert state["violations"] == []
    conclusions = [run["conclusion"] for run in state["check_runs"]]
    assert conclusions == ["success", "failure"]
