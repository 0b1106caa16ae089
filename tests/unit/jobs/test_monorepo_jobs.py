"""Several configs in one repository, gated by a real arq worker (in this process), real Redis,
real git and the schema-checking fake GitHub.

The repository (`monorepo_support.build_monorepo`) has two services with the same four-example
echo suite; ``pr/a-drop`` breaks one example of services/a only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

import tests.unit.baseline_support as support
from tests.unit.baseline_support import command_runs, push_payload
from tests.unit.events_support import run_burst
from tests.unit.monorepo_support import EXTRA_ENTRY_LINE, build_monorepo
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, WRITER, gate_payload
from worker.baselines.store import BaselineStore
from worker.contract import COMMENT_MARKER, gate_job_id
from worker.gate import check_run as gate_check
from worker.gate.accept import ACCEPT_BUTTON, RERUN_BUTTON
from worker.gate.registry import RUNS_INDEX
from worker.jobs.push import store_baseline

github, worker_ctx = support.github, support.worker_ctx  # fixtures
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("mono") / "combined"
    return repo, build_monorepo(repo)


@pytest.fixture(scope="module")
def per_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("mono") / "per_config"
    return repo, build_monorepo(repo, checks="per_config")


async def gate(repo: Path, shas: dict[str, str], branch: str) -> dict[str, Any]:
    """Gate ``branch`` against main as PR #1; return the job's result."""
    payload = gate_payload(str(repo), shas[branch], shas["main"])
    job_id = gate_job_id(payload["repo"], 1, shas[branch])
    result = await run_burst([("gate_pull_request", payload, job_id)])
    return dict(result[job_id])


def runs_by_name(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    runs = {r["name"]: r for r in state["check_runs"]}
    assert len(runs) == len(state["check_runs"]), "one check run per name"
    return runs


def only_comment(state: dict[str, Any]) -> str:
    [comment] = state["comments"]
    body: str = comment["body"]
    assert body.startswith(COMMENT_MARKER + "\n")
    return body


async def test_combined_one_check_fails_with_the_services_annotation_and_one_comment(
        github, combined):
    repo, shas = combined
    assert await gate(repo, shas, "pr/a-drop") == {"conclusion": "failure",
                                                   "head_sha": shas["pr/a-drop"]}
    state = github.state()
    [run] = state["check_runs"]
    assert (run["name"], run["status"], run["conclusion"]) == ("llmgate", "completed", "failure")
    assert run["external_id"] == "pr:1"
    assert run["output"]["title"] == ("llmgate: fail - services/a fail, 1 regression; "
                                      "services/b pass")
    [note] = run["annotations"]
    assert (note["path"], note["start_line"], note["end_line"]) == (
        "services/a/evals/echo.jsonl", 2, 2)
    assert note["title"] == "echo: example bravo regressed"
    summary = run["output"]["summary"]
    assert "| services/a/.llmgate.yml | ❌ fail, 1 regression - echo pass_rate 0.750 " \
           "(-0.250) |" in summary
    assert "| services/b/.llmgate.yml | ✅ pass - echo pass_rate 1.000 (+0.000) |" in summary
    assert "### ❌ services/a/.llmgate.yml: fail" in summary
    assert "### ✅ services/b/.llmgate.yml: pass" in summary
    assert "**Where:** services/a/evals/echo.jsonl:2" in run["output"]["text"]
    assert run["history"][-1]["body"]["actions"] == [RERUN_BUTTON, ACCEPT_BUTTON]
    body = only_comment(state)
    assert body.index("### ❌ services/a/.llmgate.yml: fail") < \
        body.index("### ✅ services/b/.llmgate.yml: pass")
    assert "**bravo** · services/a/evals/echo.jsonl:2" in body
    assert f"**Head** `{shas['pr/a-drop'][:7]}` · **base** `{shas['main'][:7]}`" in body
    assert state["violations"] == []


async def test_per_config_gives_a_check_per_service_and_the_aggregate(github, per_config,
                                                                     redis_url):
    repo, shas = per_config
    assert (await gate(repo, shas, "pr/a-drop"))["conclusion"] == "failure"
    state = github.state()
    runs = runs_by_name(state)
    assert {name: (r["status"], r["conclusion"]) for name, r in runs.items()} == {
        "llmgate": ("completed", "failure"),
        "llmgate: services/a": ("completed", "failure"),
        "llmgate: services/b": ("completed", "success")}
    assert {r["external_id"] for r in runs.values()} == {"pr:1"}
    own = runs["llmgate: services/a"]
    assert [(a["path"], a["start_line"]) for a in own["annotations"]] == [
        ("services/a/evals/echo.jsonl", 2)]
    assert own["output"]["title"].startswith("llmgate: fail, 1 regression - echo pass_rate")
    assert own["history"][-1]["body"]["actions"] == [RERUN_BUTTON]
    assert runs["llmgate: services/b"]["annotations"] == []
    aggregate = runs["llmgate"]
    assert aggregate["annotations"] == []  # shown once, on the service's own check run
    assert aggregate["history"][-1]["body"]["actions"] == [RERUN_BUTTON, ACCEPT_BUTTON]
    assert "| services/a/.llmgate.yml | llmgate: services/a | ❌ fail" in \
        aggregate["output"]["summary"]
    assert "(`llmgate: services/a`, `llmgate: services/b`)" in aggregate["output"]["summary"]
    body = only_comment(state)  # still one comment with every config
    assert "### ❌ services/a/.llmgate.yml: fail" in body
    assert "### ✅ services/b/.llmgate.yml: pass" in body
    services_redis = Redis.from_url(redis_url)
    try:
        assert await services_redis.zcard(RUNS_INDEX) == 0  # every run concluded and forgotten
    finally:
        await services_redis.aclose()
    assert state["violations"] == []


async def test_a_list_entry_outside_the_repository_is_a_config_error_on_its_line(
        github, combined):
    repo, shas = combined
    assert (await gate(repo, shas, "pr/outside"))["conclusion"] == "failure"
    state = github.state()
    [run] = state["check_runs"]
    assert run["conclusion"] == "failure"
    [note] = run["annotations"]
    assert (note["path"], note["start_line"], note["title"]) == (
        ".llmgate.yml", EXTRA_ENTRY_LINE, "llmgate: configuration error")
    assert note["message"] == ("`configs`: '../outside' must be a relative POSIX path inside "
                               "the repository")
    assert "| .llmgate.yml | ❌ configuration error in .llmgate.yml:7 |" in \
        run["output"]["summary"]
    assert run["history"][-1]["body"]["actions"] == [RERUN_BUTTON]  # nothing to accept
    body = only_comment(state)  # the base list still gates both services
    assert "### ✅ services/a/.llmgate.yml: pass" in body
    assert "### ✅ services/b/.llmgate.yml: pass" in body


async def test_deleting_a_config_from_the_list_is_still_gated_by_the_base_list(
        github, combined):
    repo, shas = combined
    assert (await gate(repo, shas, "pr/drop-b"))["conclusion"] == "failure"
    state = github.state()
    [run] = state["check_runs"]
    assert run["output"]["title"] == "llmgate: fail - services/b fail; services/a pass"
    assert "| services/b/.llmgate.yml | ❌ fail - services/b/.llmgate.yml was deleted at " \
           "head |" in run["output"]["summary"]
    assert run["history"][-1]["body"]["actions"] == [RERUN_BUTTON, ACCEPT_BUTTON]
    body = only_comment(state)
    assert ("services/b/.llmgate.yml config: deleted at head: services/b/.llmgate.yml exists "
            "at base but not at head") in body


async def test_discovered_configs_without_a_root_config(github, tmp_path):
    repo = tmp_path / "discovered"
    shas = build_monorepo(repo, listed=False)
    assert (await gate(repo, shas, "pr/a-drop"))["conclusion"] == "failure"
    [run] = github.state()["check_runs"]
    assert [(a["path"], a["start_line"]) for a in run["annotations"]] == [
        ("services/a/evals/echo.jsonl", 2)]
    assert "| services/b/.llmgate.yml | ✅ pass" in run["output"]["summary"]


async def test_push_stores_each_service_apart_and_pull_requests_reuse_it(github, worker_ctx,
                                                                         combined):
    repo, shas = combined
    services = worker_ctx["services"]
    result = await store_baseline(worker_ctx, push_payload(str(repo), shas["main"], 1000))
    assert result == {"status": "stored", "sha": shas["main"],
                      "configs": "services/a/.llmgate.yml=stored,"
                                 "services/b/.llmgate.yml=stored"}
    assert await command_runs(services) == 8  # 4 examples in each service
    store = BaselineStore(services.redis)
    for folder in ("services/a", "services/b"):
        pointer = await store.latest(f"{OWNER}/{REPO}/{folder}", "main")
        assert pointer["sha"] == shas["main"] and len(pointer["keys"]) == 1
    assert await store.latest(f"{OWNER}/{REPO}", "main") is None
    assert (await gate(repo, shas, "pr/a-drop"))["conclusion"] == "failure"
    assert await command_runs(services) == 8  # head only: both bases were reused
    [run] = github.state()["check_runs"]
    assert "stored baseline from the push to main" in run["output"]["summary"]


async def test_a_retry_completes_the_same_config_check_runs(github, per_config, redis_url,
                                                            monkeypatch):
    """GitHub rate limits the completion of ``llmgate: services/a``: the job's second try
    completes that same check run, never a second one."""
    monkeypatch.setenv("LLMGATE_GITHUB_MAX_WAIT_S", "0")
    monkeypatch.setattr(gate_check, "BACKOFF_BASE_S", 0.1)
    github.setup({"faults": [{"operation": "checks/update", "status": 429, "times": 1,
                              "headers": {"retry-after": "1"}}]})
    repo, shas = per_config
    assert (await gate(repo, shas, "pr/a-drop"))["conclusion"] == "failure"
    state = github.state()
    runs = runs_by_name(state)  # still one check run per name
    own = runs["llmgate: services/a"]
    assert [(h["method"], h["body"].get("status")) for h in own["history"]] == [
        ("POST", "in_progress"), ("PATCH", "completed")]
    assert (own["conclusion"], runs["llmgate"]["conclusion"]) == ("failure", "failure")
    assert [r["status"] for r in state["requests"] if r.get("fault")] == [429]
    redis = Redis.from_url(redis_url)
    try:
        assert await redis.zcard(RUNS_INDEX) == 0
    finally:
        await redis.aclose()


async def test_accept_on_the_aggregate_check_is_not_blocked_by_the_config_check_runs(
        github, per_config):
    repo, shas = per_config
    head = shas["pr/a-drop"]
    github.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1, "head_sha": head,
                             "base_sha": shas["main"], "author": WRITER}]})
    await gate(repo, shas, "pr/a-drop")
    aggregate = runs_by_name(github.state())["llmgate"]
    payload = {"delivery_id": "a-1", "installation_id": INSTALLATION_ID,
               "repo": {"owner": OWNER, "name": REPO, "clone_url": str(repo)},
               "pr_number": 1, "check_run_id": aggregate["id"], "head_sha": head,
               "accepter": WRITER}
    job_id = f"accept:{OWNER}/{REPO}:{aggregate['id']}:{WRITER}"
    result = await run_burst([("accept_regression", payload, job_id)])
    assert result[job_id] == {"status": "accepted", "head_sha": head}
    runs = runs_by_name(github.state())
    assert runs["llmgate"]["conclusion"] == "success"
    assert runs["llmgate"]["output"]["summary"].startswith(
        f"**Regression accepted** by `{WRITER}`")
    assert "`services/a: echo pass_rate max_drop 0.05`" in runs["llmgate"]["output"]["summary"]
    assert runs["llmgate: services/a"]["conclusion"] == "failure"  # its own verdict stays
