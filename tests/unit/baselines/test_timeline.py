"""The quality history (issue 35): what a push and a gate record, how long it is kept, and that
writing it never changes a gate.

Real Redis throughout (the session's redis-server); the job tests run the real push job and a
real gate (arq burst worker, real git, the fake GitHub).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

import tests.unit.baseline_support as support
from tests.conftest import free_port
from tests.unit import worker_support
from tests.unit.baseline_support import EXAMPLES, build_field_repo, push_payload
from tests.unit.events_support import run_burst, worker_env
from tests.unit.history_support import example, gate_report, record_gate
from tests.unit.monorepo_support import build_monorepo
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, gate_payload
from worker import history_contract as history
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline import (
    HISTORY_ERRORS,
    Timeline,
    record_acceptance,
    record_push,
    safely,
)
from worker.baselines.timeline_records import interval
from worker.contract import gate_job_id
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import RunResult, SuiteResult
from worker.history_contract import HistoryRetention
from worker.jobs.push import store_baseline
from worker.runtime.metrics import METRICS, SAMPLES_KEY
from worker.runtime.settings import SettingsError

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
REPO_KEY = f"{OWNER}/{REPO}"
NOW = time.time()  # near real time: a pull request gate's keys expire at its time + retention
DAY = 86400.0
#: Unicode ids (CJK, combining accents, an emoji, a right-to-left mark), one with a space.
ODD_IDS = ("例-1", "e\u0301t\u00e9", "🙂 smile", "\u200fmark")


def _suite(n: int, passing: int, name: str = "tickets", ids: tuple[str, ...] = ()) -> SuiteResult:
    """``n`` examples, the first ``passing`` pass; scores 0.2..0.9; ``ids`` replace the first
    ids."""
    names = [*ids, *(f"ex-{i:04d}" for i in range(len(ids), n))]
    examples = tuple(example(names[i], i + 1, i < passing, 0.2 + 0.7 * (i % 10) / 9)
                     for i in range(n))
    return SuiteResult(name, f"evals/{name}.jsonl", examples, suite_metrics(examples))


def _run(sha: str, *suites: SuiteResult) -> RunResult:
    return RunResult(sha, {s.name: s for s in suites})


def _settings(runs: int = 500, days: int = 90) -> BaselineSettings:
    return BaselineSettings(history_runs=runs, history_pr_days=days)


class Clock:
    """A settable clock, Unix seconds."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def _push(redis: Redis, sha: str, pushed_at: float, *suites: SuiteResult,
                settings: BaselineSettings | None = None, clock: Clock | None = None) -> int:
    timeline = Timeline(redis, settings or _settings(), clock or Clock(NOW))
    return await timeline.push(repo=REPO_KEY, namespace=REPO_KEY, sha=sha, branch="main",
                               pushed_at=pushed_at, run=_run(sha, *(suites or (_suite(20, 15),))),
                               base_source="compared with abc", duration_s=12.5)


async def _gate(redis: Redis, check_run_id: int, clock: Clock, pr_number: int = 7,
                settings: BaselineSettings | None = None) -> int:
    timeline = Timeline(redis, settings or _settings(), clock)
    return await record_gate(timeline, REPO_KEY, pr_number, check_run_id,
                             gate_report(_suite(20, 15), _suite(20, 13)))


async def _errors_counted(redis: Redis, kind: str) -> float:
    await METRICS.flush(redis)
    field = json.dumps([HISTORY_ERRORS.name + "_total", {"kind": kind}], separators=(",", ":"))
    value = await redis.hget(SAMPLES_KEY, field)  # type: ignore[misc]
    return float(value or 0)


# ------------------------------------------------------------------ records and readers


async def test_a_branch_run_round_trips_with_its_metrics_intervals_and_examples(redis):
    suite = _suite(20, 15, ids=ODD_IDS)
    await _push(redis, "a" * 40, 1000, suite)

    [repo] = await history.list_repositories(redis)
    assert repo == {"repo": REPO_KEY, "last_s": pytest.approx(NOW)}
    [run] = await history.list_branch_runs(redis, REPO_KEY)
    assert (run["kind"], run["run_id"], run["sha"], run["branch"], run["order_s"]) == (
        "branch", "a" * 40, "a" * 40, "main", 1000.0)
    assert (run["conclusion"], run["pr_number"], run["duration_s"], run["accepted"]) == (
        "stored", 0, 12.5, None)
    [record] = run["suites"]
    assert (record["suite"], record["side"], record["dataset"], record["examples"],
            record["passed"], record["verdicts"]) == ("tickets", "base", "evals/tickets.jsonl",
                                                      20, 15, [])
    rate = record["metrics"]["pass_rate"]
    assert rate["value"] == 0.75
    assert (round(rate["ci_low"], 4), round(rate["ci_high"], 4)) == (0.5313, 0.8881)  # Wilson
    assert "examples" not in run  # lists carry no examples

    full = await history.get_run(redis, REPO_KEY, "a" * 40)
    rows = full["examples"]["base|tickets"]
    assert rows["dataset"] == "evals/tickets.jsonl"
    assert rows["metrics"] == ["assertion.equals.pass_rate", "assertion.llm_rubric.pass_rate",
                               "assertion.llm_rubric.mean_score", "mean_score"]  # not equals'
    assert [r[0] for r in rows["rows"][:4]] == list(ODD_IDS)  # Unicode ids kept exactly
    assert rows["rows"][0] == ["例-1", 1, history.PASSED, 1.0, 0.0, 0.2, 0.6]
    assert rows["rows"][19][:3] == ["ex-0019", 20, history.FAILED]

    [point] = await history.example_history(redis, REPO_KEY, "tickets", "🙂 smile")
    assert (point["run_id"], point["sha"], point["status"]) == ("a" * 40, "a" * 40, 1)
    assert point["values"]["assertion.equals.pass_rate"] == 1.0


async def test_a_pull_request_gate_is_kept_apart_from_the_branch_history(redis):
    await _push(redis, "a" * 40, 1000)
    await _gate(redis, 555, Clock(NOW))

    assert [r["run_id"] for r in await history.list_branch_runs(redis, REPO_KEY)] == ["a" * 40]
    [gate] = await history.list_pr_gates(redis, REPO_KEY)
    assert (gate["kind"], gate["run_id"], gate["pr_number"], gate["sha"], gate["base_sha"]) == (
        "pull_request", "pr7-555", 7, "h" * 40, "b" * 40)
    assert (gate["conclusion"], gate["why"], gate["report_id"], gate["check_run_id"]) == (
        "failure", "decided by tickets pass_rate max_drop 0.05 (fail).", "a" * 32, 555)
    assert [(s["suite"], s["side"]) for s in gate["suites"]] == [("tickets", "base"),
                                                                 ("tickets", "head")]
    base, head = gate["suites"]
    assert base["verdicts"] == [] and "delta" not in base["metrics"]["pass_rate"]
    assert head["verdicts"] == [{"metric": "pass_rate", "rule": "max_drop 0.05",
                                 "status": "fail", "group": "", "reason": "dropped 0.10"}]
    assert {k: head["metrics"]["pass_rate"][k] for k in
            ("value", "delta", "delta_ci_low", "delta_ci_high", "p_adjusted")} == {
        "value": 0.65, "delta": -0.1, "delta_ci_low": -0.2, "delta_ci_high": -0.01,
        "p_adjusted": 0.02}
    assert await history.list_pr_gates(redis, REPO_KEY, pr_number=7) == [gate]
    assert await history.list_pr_gates(redis, REPO_KEY, pr_number=8) == []
    assert await history.count_runs(redis, REPO_KEY) == (1, 1)
    assert await redis.ttl(history.run_key(REPO_KEY, "a" * 40)) == -1  # branch runs stay
    assert 89 * DAY < await redis.ttl(history.run_key(REPO_KEY, "pr7-555")) <= 90 * DAY + 1
    assert 89 * DAY < await redis.ttl(history.examples_key(REPO_KEY, "pr7-555")) <= 90 * DAY + 1
    heads = await history.example_history(redis, REPO_KEY, "tickets", "ex-0014", side="head",
                                          kind="pull_request")
    assert [(p["pr_number"], p["status"]) for p in heads] == [(7, history.FAILED)]


async def test_an_acceptance_is_added_to_its_gate_and_to_no_other(redis):
    await _gate(redis, 555, Clock(NOW))
    assert await record_acceptance(redis, repo=REPO_KEY, pr_number=7, check_run_id=555,
                                   by="writer", at=NOW + 60)
    assert not await record_acceptance(redis, repo=REPO_KEY, pr_number=7, check_run_id=556,
                                       by="writer", at=NOW + 60)  # no such gate: nothing made
    assert not await redis.exists(history.run_key(REPO_KEY, "pr7-556"))
    [gate] = await history.list_pr_gates(redis, REPO_KEY)
    assert gate["accepted"] == {"by": "writer", "at": NOW + 60}


# ------------------------------------------------------------------ retention


async def test_retention_by_count_drops_the_oldest_pushes_first(redis):
    settings = _settings(runs=3)
    for n, pushed_at in enumerate((3000, 1000, 5000, 2000)):  # jobs finish out of order
        await _push(redis, f"{n}" * 40, pushed_at, settings=settings)
    dropped = await _push(redis, "4" * 40, 4000, settings=settings)

    assert dropped == 1
    runs = await history.list_branch_runs(redis, REPO_KEY)
    assert [r["order_s"] for r in runs] == [5000, 4000, 3000]  # 1000 and 2000 dropped
    for gone in ("1" * 40, "3" * 40):
        assert not await redis.exists(history.run_key(REPO_KEY, gone),
                                      history.examples_key(REPO_KEY, gone))
    assert await redis.zcard(history.branch_key(REPO_KEY)) == 3
    older = await _push(redis, "5" * 40, 500, settings=settings)  # older than all it keeps
    assert older == 1 and not await redis.exists(history.run_key(REPO_KEY, "5" * 40))
    page = await history.list_branch_runs(redis, REPO_KEY, limit=2, offset=1)
    assert [r["order_s"] for r in page] == [4000, 3000]


async def test_retention_by_age_drops_pull_request_gates_past_it(redis):
    clock = Clock(NOW)
    await _gate(redis, 1, clock)
    clock.now = NOW + 10 * DAY
    await _gate(redis, 2, clock)
    await _push(redis, "a" * 40, 900, clock=clock)  # branch runs have no age limit
    clock.now = NOW + 95 * DAY  # gate 1 is 95 days old, gate 2 85
    assert await _gate(redis, 3, clock) == 1

    assert [g["run_id"] for g in await history.list_pr_gates(redis, REPO_KEY)] == [
        "pr7-3", "pr7-2"]
    assert not await redis.exists(history.run_key(REPO_KEY, "pr7-1"),
                                  history.examples_key(REPO_KEY, "pr7-1"))
    assert await redis.zcard(history.prs_key(REPO_KEY)) == 2
    assert len(await history.list_branch_runs(redis, REPO_KEY)) == 1


async def test_a_retention_of_zero_records_nothing(redis):
    settings = _settings(runs=0, days=0)
    assert await _push(redis, "a" * 40, 1000, settings=settings) == 0
    assert await _gate(redis, 1, Clock(NOW), settings=settings) == 0
    assert await redis.keys("llmgate:history:*") == []


def test_the_retention_is_read_from_the_environment():
    assert BaselineSettings.from_env({}).history == history.HistoryRetention(500, 90)
    got = BaselineSettings.from_env({"LLMGATE_HISTORY_RUNS": "50",
                                     "LLMGATE_HISTORY_PR_DAYS": "0"})
    assert (got.history_runs, got.history_pr_days) == (50, 0)
    with pytest.raises(SettingsError, match="LLMGATE_HISTORY_RUNS must be a whole number"):
        BaselineSettings.from_env({"LLMGATE_HISTORY_RUNS": "-1"})


# ------------------------------------------------------------------ failures never count


async def test_a_redis_that_refuses_writes_costs_the_record_only(redis, redis_server, caplog):
    admin = Redis.from_url(redis_server)
    before = await _errors_counted(redis, "branch")
    await admin.config_set("maxmemory", "1")  # noeviction (the default policy): writes refused
    try:
        done = await record_push(redis, _settings(), repo=REPO_KEY, namespace=REPO_KEY,
                                 sha="a" * 40, branch="main", pushed_at=1000,
                                 run=_run("a" * 40, _suite(5, 5)), base_source="",
                                 duration_s=1.0)
    finally:
        await admin.config_set("maxmemory", "0")
        await admin.aclose()
    assert done is False
    [warning] = [r for r in caplog.records if r.name == "llmgate.history"]
    assert warning.levelno == logging.WARNING
    assert ("(OutOfMemoryError): command not allowed when used memory > 'maxmemory'"
            in warning.getMessage())
    assert await _errors_counted(redis, "branch") == before + 1
    assert await redis.keys("llmgate:history:*") == []


async def test_an_unreachable_redis_is_logged_not_raised(caplog):
    closed = Redis(port=free_port(), socket_connect_timeout=0.5)
    try:
        done = await safely("pull_request", "acme/tiny#7", lambda: Timeline(closed).gate(
            repo=REPO_KEY, pr_number=7, check_run_id=1, head_sha="h" * 40, base_sha="b" * 40,
            base_ref="main", configs=[], conclusion="success", why="", report_url="",
            duration_s=0.0))
    finally:
        await closed.aclose()
    assert done is False
    assert "history of acme/tiny#7 not recorded (ConnectionError)" in caplog.text


def test_interval_is_wilson_for_pass_fail_and_normal_for_scores():
    low, high = interval([1.0] * 10)
    assert (round(low, 4), round(high, 4)) == (0.7225, 1.0)  # Wilson: never past 1
    low, high = interval([0.2, 0.4, 0.6, 0.8])
    assert (round(low, 4), round(high, 4)) == (0.2470, 0.7530)
    assert interval([1.0]) is None


# ------------------------------------------------------------------ the real jobs


async def _gate_job(repo: Path, head: str, base: str, number: int = 1) -> dict[str, Any]:
    payload = gate_payload(repo.as_uri(), head, base, number=number)
    done = await run_burst([("gate_pull_request", payload,
                             gate_job_id(payload["repo"], number, head))])
    return next(iter(done.values()))


github, worker_ctx = support.github, support.worker_ctx  # fixtures
tiny_repo = worker_support.tiny_repo


async def test_the_push_job_records_the_branch_run(worker_ctx, tmp_path):
    redis = worker_ctx["services"].redis
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    done = await store_baseline(worker_ctx, push_payload(str(repo), shas["b1"], 1000))
    assert done["status"] == "stored"

    [run] = await history.list_branch_runs(redis, REPO_KEY)
    assert (run["sha"], run["order_s"], run["branch"], run["base_source"]) == (
        shas["b1"], 1000.0, "main", done["base_source"])
    assert run["duration_s"] > 0
    [suite] = run["suites"]
    assert (suite["suite"], suite["side"], suite["examples"], suite["passed"]) == (
        "score", "base", EXAMPLES, 70)
    assert suite["metrics"]["pass_rate"]["value"] == 0.70
    full = await history.get_run(redis, REPO_KEY, shas["b1"])
    rows = full["examples"]["base|score"]["rows"]
    assert [r[:3] for r in rows[69:71]] == [["e69", 70, 1], ["e70", 71, 0]]
    assert await history.list_pr_gates(redis, REPO_KEY) == []


async def test_a_gate_records_its_verdict_and_an_acceptance_names_the_writer(
        monkeypatch, redis_url, tmp_path, tiny_repo, redis):
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    with worker_env(monkeypatch, redis_url, tmp_path / "work",
                    LLMGATE_PUBLIC_URL="https://llmgate.example.com") as server:
        server.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                      "head_sha": head, "base_sha": base, "author": "writer"}]})
        assert (await _gate_job(repo, head, base))["conclusion"] == "failure"
        [check] = server.state()["check_runs"]
        accept = {"delivery_id": "a-1", "installation_id": INSTALLATION_ID,
                  "repo": {"owner": OWNER, "name": REPO, "clone_url": repo.as_uri()},
                  "pr_number": 1, "check_run_id": check["id"], "head_sha": head,
                  "accepter": "writer"}
        done = await run_burst([("accept_regression", accept, "accept:history")])
        assert list(done.values())[0]["status"] == "accepted"

    assert await history.list_branch_runs(redis, REPO_KEY) == []  # a PR never feeds main's
    [gate] = await history.list_pr_gates(redis, REPO_KEY)
    assert (gate["run_id"], gate["sha"], gate["base_sha"], gate["conclusion"]) == (
        f"pr1-{check['id']}", head, base, "failure")
    assert gate["why"].startswith("decided by echo pass_rate max_drop 0.05 (fail")
    assert gate["report_url"] == check["details_url"]
    assert gate["report_url"].endswith("/reports/" + gate["report_id"])
    assert gate["accepted"]["by"] == "writer"
    assert [(s["side"], s["metrics"]["pass_rate"]["value"]) for s in gate["suites"]] == [
        ("base", 1.0), ("head", 0.75)]
    rows = (await history.get_run(redis, REPO_KEY, gate["run_id"]))["examples"]["head|echo"]
    assert [r[:3] for r in rows["rows"]] == [["alpha", 1, 1], ["bravo", 2, 0],
                                             ["charlie", 3, 1], ["delta", 4, 1]]


async def test_a_history_that_cannot_be_written_leaves_the_gate_as_it_was(
        github, tiny_repo, redis, caplog):
    """The pull request index holds a string (another writer's key): the history script
    refuses before writing anything, the gate concludes and comments as always."""
    repo, shas = tiny_repo
    head, base = shas["pr/drop"], shas["main"]
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                  "head_sha": head, "base_sha": base, "author": "writer"}]})
    await redis.set(history.prs_key(REPO_KEY), "not a sorted set")
    before = await _errors_counted(redis, "pull_request")

    result = await _gate_job(repo, head, base)

    assert result["conclusion"] == "failure"
    [check] = github.state()["check_runs"]
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    assert len(github.state()["comments"]) == 1
    assert any(r.name == "llmgate.history" and r.levelno == logging.WARNING
               and "WRONGTYPE" in r.getMessage() for r in caplog.records)
    assert await _errors_counted(redis, "pull_request") == before + 1
    assert await redis.keys("llmgate:history:*:run:*") == []


async def test_a_push_of_several_configs_is_one_run_with_each_folder_s_suites(
        github, worker_ctx, tmp_path):
    redis = worker_ctx["services"].redis
    repo = tmp_path / "mono"
    shas = build_monorepo(repo)
    done = await store_baseline(worker_ctx, push_payload(str(repo), shas["main"], 1000))
    assert done["status"] == "stored"

    [run] = await history.list_branch_runs(redis, REPO_KEY)
    assert run["sha"] == shas["main"]
    assert [(s["suite"], s["examples"], s["metrics"]["pass_rate"]["value"])
            for s in run["suites"]] == [("services/a: echo", 4, 1.0), ("services/b: echo", 4, 1.0)]
    assert run["duration_s"] > 0  # the sum of both configs'
    full = await history.get_run(redis, REPO_KEY, shas["main"])
    assert sorted(full["examples"]) == ["base|services/a: echo", "base|services/b: echo"]
    assert await redis.keys(f"llmgate:history:{REPO_KEY}/services*") == []  # one repository


async def test_a_run_of_200_examples_and_3_metrics_takes_a_few_kilobytes(redis):
    """docs/operations.md gives the measured figures (about 3 KB); this keeps them honest."""
    full = _suite(200, 160)
    three = ("assertion.equals.pass_rate", "assertion.llm_rubric.pass_rate", "mean_score")
    suite = SuiteResult(full.name, full.dataset, full.examples,
                        {k: v for k, v in full.metrics.items() if k in three})
    await _push(redis, "a" * 40, 1000, suite)
    used = [await redis.memory_usage(key, samples=0)
            for key in (history.run_key(REPO_KEY, "a" * 40),
                        history.examples_key(REPO_KEY, "a" * 40))]
    assert sum(used) < 6 * 1024, used


@pytest.mark.parametrize(("name", "value"), [
    ("LLMGATE_HISTORY_PR_DAYS", "99999999999999999999999"),  # fresh user: Redis then refused
    ("LLMGATE_HISTORY_PR_DAYS", "36501"),                     # the EXPIREAT after the writes
    ("LLMGATE_HISTORY_RUNS", "100001")])
def test_a_retention_redis_could_not_honour_is_refused_at_start(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"{name} must be a whole number from 0 to"):
        BaselineSettings.from_env({name: value})
    with pytest.raises(ValueError, match="out of range"):
        HistoryRetention(100_001, 90)
    assert BaselineSettings.from_env({"LLMGATE_HISTORY_PR_DAYS": "36500"}).history_pr_days \
        == 36_500
