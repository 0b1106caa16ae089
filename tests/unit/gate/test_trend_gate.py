"""The gated metric's trend on the default branch in the comment and the check run (issue 35).

A real gate (arq burst worker, real git, the fake GitHub, the session's redis-server) after ten
default-branch pushes written through `Timeline`; and the read itself (worker/gate/trend_read.py)
against the real Redis: the newest 20 runs, oldest first, and every failure left out, logged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.unit import worker_support
from tests.unit.events_support import run_burst
from tests.unit.worker_support import OWNER, REPO, gate_payload
from worker import history_contract as history
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline import Timeline
from worker.contract import gate_job_id
from worker.evals.types import GateReport, RuleOutcome, RunResult, SuiteResult
from worker.gate.trend_read import TREND_RUNS, read_trends, trend_data
from worker.pipeline.report_values import ConfigReport, MultiReport

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
REPO_KEY = f"{OWNER}/{REPO}"
#: The echo suite's pass rate at ten pushes to main, oldest first (head's is 0.75, base's 1.0).
PUSHED = (0.85, 0.9, 0.8, 0.95, 1.0, 0.9, 0.85, 0.95, 0.9, 1.0)
LINE = ("- echo pass_rate: ▄▅▂▇█▅▄▇▅█ │ base █ · head ▁ · head 0.750 is below every one of the "
        "last 10 pushes (0.800–1.000)")
HEADING = ("**Trend on `main`** (the last pushes, oldest → newest; then this pull request's "
           "base and head):")

github = worker_support.github  # fixture
tiny_repo = worker_support.tiny_repo


async def _push(redis: Redis, index: int, pass_rate: float, suite: str = "echo") -> None:
    sha = f"{index + 1:040x}"
    run = RunResult(sha, {suite: SuiteResult(suite, f"evals/{suite}.jsonl", (),
                                             {"pass_rate": pass_rate, "mean_score": 0.5})})
    await Timeline(redis, BaselineSettings()).push(
        repo=REPO_KEY, namespace=REPO_KEY, sha=sha, branch="main", pushed_at=1000.0 + index,
        run=run, base_source="", duration_s=1.0)


def _multi(suite: str = "echo") -> MultiReport:
    outcome = RuleOutcome(suite, "pass_rate", "max_drop 0.05", 1.0, 0.75, -0.25, "fail", "x")
    return MultiReport((ConfigReport(".llmgate.yml", "", GateReport(
        "failure", (outcome,), (), None, None)),))


async def _gate_job(repo: Path, head: str, base: str) -> dict[str, Any]:
    payload = gate_payload(repo.as_uri(), head, base, number=1)
    done = await run_burst([("gate_pull_request", payload,
                             gate_job_id(payload["repo"], 1, head))])
    return next(iter(done.values()))


async def test_a_gate_shows_the_trend_of_main_in_the_comment_and_the_check_run(
        github, tiny_repo, redis):
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                  "head_sha": head, "base_sha": base, "author": "writer"}]})
    for index, value in enumerate(PUSHED):
        await _push(redis, index, value)

    assert (await _gate_job(repo, head, base))["conclusion"] == "failure"

    [comment] = github.state()["comments"]
    [check] = github.state()["check_runs"]
    for text in (comment["body"], check["output"]["summary"]):
        assert f"\n\n{HEADING}\n{LINE}\n" in text
        assert text.index(LINE) > text.index("| echo | pass_rate |")  # under the table
    assert LINE not in check["output"]["text"]
    [gate] = await history.list_pr_gates(redis, REPO_KEY)  # the gate is recorded as always
    assert gate["conclusion"] == "failure"


async def test_the_read_takes_the_newest_runs_oldest_first_at_the_base_side(redis):
    values = [round(0.5 + i / 100, 2) for i in range(25)]
    for index, value in enumerate(values):
        await _push(redis, index, value)
    await _push(redis, 99, 0.1, suite="other")  # newest: another suite only

    data = await read_trends(redis, REPO_KEY, _multi())

    assert data is not None and data.branch == "main"
    assert dict(data.series) == {("echo", "pass_rate"): tuple(values[-(TREND_RUNS - 1):])}


def test_records_of_other_sides_or_values_are_skipped() -> None:
    def run(side: str, value: Any) -> Any:
        return {"branch": "main", "suites": [
            {"suite": "echo", "side": side, "metrics": {"pass_rate": {"value": value}}}]}

    runs = [run("base", 0.5), run("head", 0.1), run("base", True), run("base", None),
            run("base", float("nan")), run("base", 0.25)]  # newest first
    data = trend_data(runs, {("echo", "pass_rate")})
    assert data is not None and dict(data.series) == {("echo", "pass_rate"): (0.25, 0.5)}
    assert trend_data(runs, {("echo", "mean_score")}) is None


async def test_no_history_or_a_failed_read_leaves_the_lines_out_logged(redis, caplog):
    caplog.set_level(logging.INFO, "llmgate.history")
    assert await read_trends(redis, REPO_KEY, _multi()) is None
    assert "no default-branch history" in caplog.text

    await redis.set(history.branch_key(REPO_KEY), "not a sorted set")
    assert await read_trends(redis, REPO_KEY, _multi()) is None
    assert any(r.levelno == logging.WARNING and "WRONGTYPE" in r.getMessage()
               for r in caplog.records)

    await redis.delete(history.branch_key(REPO_KEY))
    await _push(redis, 0, 0.5)
    await _push(redis, 1, 0.6)
    assert await read_trends(redis, REPO_KEY, _multi(), timeout_s=0) is None
    assert f"trend of {REPO_KEY} not shown (TimeoutError)" in caplog.text
    assert await read_trends(redis, REPO_KEY, _multi()) is not None
