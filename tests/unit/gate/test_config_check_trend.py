"""The trend of the gated metrics on each config's own check run (issue 35, ``per_config``).

A real gate of the two-service repository (tests/unit/monorepo_support.py; arq burst worker,
real git, the fake GitHub, the session's redis-server) after ten default-branch pushes of
services/a's suite written through `Timeline` (history name ``services/a: echo``): the check run
``llmgate: services/a`` shows the same trend line as the comment's section of services/a, under
its metric table; ``llmgate: services/b``, without history, shows none and renders as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.unit import worker_support
from tests.unit.events_support import run_burst
from tests.unit.gate.test_trend_gate import (  # services/a's echo: the same pushes and line
    HEADING,
    LINE,
    PUSHED,
)
from tests.unit.monorepo_support import build_monorepo
from tests.unit.worker_support import OWNER, REPO, gate_payload
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline import Timeline
from worker.contract import gate_job_id
from worker.evals.types import RunResult, SuiteResult
from worker.report.trend import scoped

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
REPO_KEY = f"{OWNER}/{REPO}"

github = worker_support.github  # fixture


@pytest.fixture(scope="module")
def per_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("mono") / "per_config"
    return repo, build_monorepo(repo, checks="per_config")


async def _push(redis: Redis, index: int, pass_rate: float) -> None:
    sha, suite = f"{index + 1:040x}", scoped("services/a", "echo")
    run = RunResult(sha, {suite: SuiteResult(suite, "services/a/evals/echo.jsonl", (),
                                             {"pass_rate": pass_rate})})
    await Timeline(redis, BaselineSettings()).push(
        repo=REPO_KEY, namespace=REPO_KEY, sha=sha, branch="main", pushed_at=1000.0 + index,
        run=run, base_source="", duration_s=1.0)


async def _gate(repo: Path, shas: dict[str, str]) -> dict[str, Any]:
    payload = gate_payload(str(repo), shas["pr/a-drop"], shas["main"])
    job_id = gate_job_id(payload["repo"], 1, shas["pr/a-drop"])
    return dict((await run_burst([("gate_pull_request", payload, job_id)]))[job_id])


async def test_each_config_check_run_shows_the_trend_of_its_own_gated_metrics(
        github, per_config, redis):
    repo, shas = per_config
    for index, value in enumerate(PUSHED):
        await _push(redis, index, value)

    assert (await _gate(repo, shas))["conclusion"] == "failure"

    state = github.state()
    runs = {r["name"]: r for r in state["check_runs"]}
    assert set(runs) == {"llmgate", "llmgate: services/a", "llmgate: services/b"}
    own = runs["llmgate: services/a"]
    assert own["status"] == "completed" and own["conclusion"] == "failure"
    summary = own["output"]["summary"]
    assert f"\n\n{HEADING}\n{LINE}\n" in summary
    assert summary.index(LINE) > summary.index("| echo | pass_rate |")  # under the table
    assert LINE not in own["output"]["text"]
    [comment] = state["comments"]
    assert LINE in comment["body"]  # the same line as the comment's section of services/a
    other = runs["llmgate: services/b"]
    assert other["conclusion"] == "success" and "Trend on" not in other["output"]["summary"]
    assert state["violations"] == []
