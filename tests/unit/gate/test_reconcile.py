"""The reconciler (issue 14): GitHub's open pull requests and llmgate's check runs decide, not
Redis. A real Redis, the schema-checking fake GitHub (its ``pulls?state=open``,
``/app/installations`` and ``/installation/repositories``) and arq's own queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import in_progress_key_prefix
from arq.jobs import Job, JobStatus

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import runs_support
from tests.unit.runs_support import BASE_SHA, pull
from tests.unit.runtime.test_worker_settings import good_env
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO
from worker.contract import RepoRef, gate_job_id, pr_head_key
from worker.gate import reconcile as reconcile_module
from worker.gate.reconcile import (
    ORPHAN_REASON,
    reconcile,
    reconcile_interval_s,
    start_reconciling,
    stop_reconciling,
)
from worker.gate.registry import RunRegistry, new_entry
from worker.github.client import GitHubClient
from worker.main import worker_settings
from worker.runtime.epoch import check_epoch
from worker.runtime.lease import CTX_KEY, JobLimits
from worker.runtime.settings import SettingsError

fake_gh, gh = runs_support.fake_gh, runs_support.gh
REF = RepoRef(owner=OWNER, name=REPO, clone_url="https://example.test/acme/tiny.git")
HEADS = {n: f"{n:x}" * 40 for n in (1, 2, 3, 4, 5)}


@pytest.fixture()
async def arq(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    await pool.flushdb()
    yield pool
    await pool.aclose()


def test_the_period_comes_from_the_environment(tmp_path: Path) -> None:
    assert reconcile_interval_s({}) == 300
    assert [reconcile_interval_s({"LLMGATE_RECONCILE_S": v}) for v in ("5", " 30 ", "600")] == [
        5, 30, 600]
    for bad in ("0", "7", "90", "7200", "soon", "-5"):
        with pytest.raises(SettingsError, match="^LLMGATE_RECONCILE_S must divide 60"):
            reconcile_interval_s({"LLMGATE_RECONCILE_S": bad})
    with pytest.raises(SettingsError, match="LLMGATE_RECONCILE_S"):
        worker_settings(good_env(tmp_path) | {"LLMGATE_RECONCILE_S": "7"})  # refused at start


async def _check_run(gh: GitHubClient, number: int, *, completed: bool = False) -> int:
    check_run_id = await gh.create_check_run(
        OWNER, REPO, HEADS[number], output={"title": "llmgate: running", "summary": "..."},
        external_id=f"pr:{number}")
    if completed:
        await gh.update_check_run(OWNER, REPO, check_run_id,
                                  {"status": "completed", "conclusion": "success"})
    return check_run_id


def _runs(fake_gh: FakeGitHubServer, number: int) -> list[dict[str, Any]]:
    return [r for r in fake_gh.state()["check_runs"] if r["head_sha"] == HEADS[number]]


async def test_a_pass_queues_missing_gates_and_concludes_orphans_only(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """#1 lost its queued gate (no check run): queued again. #2's job was lost with its
    registry entry: its check run is concluded timed_out with a Re-run. #3's job runs (its
    lease key), #4's check run is registered to a queued job, #5 is concluded: all left alone."""
    fake_gh.setup({"pulls": [pull(n, HEADS[n]) for n in HEADS] + [
        pull(9, "9" * 40, state="closed")]})
    orphan, running, queued_own = [await _check_run(gh, n) for n in (2, 3, 4)]
    done = await _check_run(gh, 5, completed=True)
    await arq.set(in_progress_key_prefix + gate_job_id(REF, 3, HEADS[3]) + ":rerun:1", b"1")
    await arq.enqueue_job("gate_pull_request", {}, _job_id="rerun:acme/tiny:comment:4")
    await RunRegistry(arq).put(new_entry("rerun:acme/tiny:comment:4", queued_own,
                                         INSTALLATION_ID, OWNER, REPO, 4, HEADS[4], 1))
    before = len(fake_gh.state()["requests"])
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert counts.as_dict() == {"heads": 5, "live": 2, "concluded": 1, "queued": 1, "errors": 0}
    job = Job(gate_job_id(REF, 1, HEADS[1]), arq)
    assert await job.status() == JobStatus.queued
    [payload] = (await job.info()).args  # type: ignore[union-attr]
    assert {k: payload[k] for k in ("installation_id", "pr_number", "head_sha", "base_sha",
                                    "base_ref", "repo")} == {
        "installation_id": INSTALLATION_ID, "pr_number": 1, "head_sha": HEADS[1],
        "base_sha": BASE_SHA, "base_ref": "main",
        "repo": {"owner": OWNER, "name": REPO, "clone_url": "https://example.test/acme/tiny.git"}}
    assert await arq.get(pr_head_key(REF, 1)) == f"{HEADS[1]}@main".encode()
    [concluded] = _runs(fake_gh, 2)
    assert (concluded["id"], concluded["status"], concluded["conclusion"]) == (
        orphan, "completed", "timed_out")
    assert concluded["output"]["summary"].startswith(ORPHAN_REASON)
    assert concluded["history"][-1]["body"]["actions"][0]["identifier"] == "rerun"
    assert [r["status"] for n in (3, 4) for r in _runs(fake_gh, n)] == ["in_progress"] * 2
    assert [(r["id"], r["conclusion"]) for r in _runs(fake_gh, 5)] == [(done, "success")]
    state = fake_gh.state()
    writes = [r["operation"] for r in state["requests"][before:] if r["method"] != "GET"]
    assert writes == ["checks/update"] and state["violations"] == []
    assert running  # its check run id: untouched above


async def test_a_job_whose_lease_comes_back_during_the_wait_keeps_its_check_run(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """A wipe took the lease key of a running job; it takes the key back within a third of
    its lease (worker/runtime/lease.py), inside the reconciler's confirmation wait."""
    fake_gh.setup({"pulls": [pull(2, HEADS[2])]})
    await _check_run(gh, 2)

    async def lease_back() -> None:
        await asyncio.sleep(0.1)
        await arq.set(in_progress_key_prefix + gate_job_id(REF, 2, HEADS[2]), b"1")

    task = asyncio.create_task(lease_back())
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0.5)
    await task
    assert (counts.concluded, counts.live) == (0, 1)
    assert [r["status"] for r in _runs(fake_gh, 2)] == ["in_progress"]


async def test_a_second_pass_changes_nothing(fake_gh: FakeGitHubServer, gh: GitHubClient,
                                             arq: ArqRedis) -> None:
    fake_gh.setup({"pulls": [pull(2, HEADS[2])]})
    await _check_run(gh, 2)
    assert (await reconcile(arq, gh, lambda _: gh, confirm_s=0)).concluded == 1
    again = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (again.concluded, again.queued) == (0, 0)


async def test_a_wiped_redis_is_told_once(arq: ArqRedis) -> None:
    assert await check_epoch(arq) is True  # a new Redis: told once, harmlessly
    assert await check_epoch(arq) is False
    await arq.flushdb()
    assert await check_epoch(arq) is True
    assert await check_epoch(arq) is False


async def test_each_worker_runs_passes_on_its_own_without_a_job_slot(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """A task of the worker process, not an arq job: it needs no free slot (every slot may run
    a long gate), and two workers make one pass per tick (the tick's key)."""
    fake_gh.setup({"pulls": [pull(2, HEADS[2])]})
    await _check_run(gh, 2)
    services = SimpleNamespace(redis=arq, github=lambda _: gh)
    workers = [{"redis": arq, "services": services, CTX_KEY: JobLimits(lease_s=3)}
               for _ in range(2)]
    for ctx in workers:
        start_reconciling(ctx, {"LLMGATE_RECONCILE_S": "1"})
    try:
        for _ in range(100):
            if [r["status"] for r in _runs(fake_gh, 2)] == ["completed"]:
                break
            await asyncio.sleep(0.1)
    finally:
        for ctx in workers:
            await stop_reconciling(ctx)
    assert [r["conclusion"] for r in _runs(fake_gh, 2)] == ["timed_out"]
    listings = [r for r in fake_gh.state()["requests"] if r["operation"] == "pulls/list"]
    assert 1 <= len(listings) <= 4  # one pass per tick (at most four ticks went by)


async def test_a_job_that_finishes_or_starts_during_the_wait_is_left_its_check_run(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """The soak's case: #2's job concluded its check run `success` while the pass waited to
    confirm (its job gone from Redis by then), and #3's gate opened its check run meanwhile.
    The pass looks at GitHub again: no `timed_out` over the success, no second gate for #3."""
    fake_gh.setup({"pulls": [pull(n, HEADS[n]) for n in (2, 3)]})
    finishing = await _check_run(gh, 2)

    async def meanwhile() -> None:
        await asyncio.sleep(0.1)
        await gh.update_check_run(OWNER, REPO, finishing,
                                  {"status": "completed", "conclusion": "success"})
        await _check_run(gh, 3)

    task = asyncio.create_task(meanwhile())
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0.5)
    await task
    assert (counts.concluded, counts.queued, counts.errors) == (0, 0, [])
    assert [(r["id"], r["conclusion"]) for r in _runs(fake_gh, 2)] == [(finishing, "success")]
    assert len(_runs(fake_gh, 3)) == 1
    assert await Job(gate_job_id(REF, 3, HEADS[3]), arq).status() == JobStatus.not_found


async def test_a_refused_listing_skips_its_head_not_the_pass(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """GitHub keeps failing the check-run listing of #2 (every retry of the client): #3's
    orphan is concluded all the same and #4's missing gate queued; #2 waits for the next pass."""
    fake_gh.setup({"pulls": [pull(n, HEADS[n]) for n in (2, 3, 4)], "faults": [
        {"path": f"/repos/{OWNER}/{REPO}/commits/{HEADS[2]}/check-runs", "status": 502,
         "times": None}]})
    await _check_run(gh, 2)
    orphan = await _check_run(gh, 3)
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (counts.heads, counts.concluded, counts.queued) == (2, 1, 1)
    assert [f"#{2}" in e and "502" in e for e in counts.errors] == [True]
    assert [(r["id"], r["conclusion"]) for r in _runs(fake_gh, 3)] == [(orphan, "timed_out")]
    assert await Job(gate_job_id(REF, 4, HEADS[4]), arq).status() == JobStatus.queued
    fake_gh.setup({"clear_faults": True})
    assert (await reconcile(arq, gh, lambda _: gh, confirm_s=0)).concluded == 1  # #2 now


async def test_a_gate_queued_meanwhile_under_the_heads_id_is_not_queued_twice(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A delivery queued #4's gate after the pass's last look at Redis: arq refuses the id,
    and the pass must not queue a second gate under another id (two check runs on one head)."""
    fake_gh.setup({"pulls": [pull(4, HEADS[4])]})
    real, looks = reconcile_module._jobs_alive, []

    async def late_delivery(redis: Any) -> tuple[set[str], set[int]]:
        seen = await real(redis)
        looks.append(1)
        if len(looks) == 2:  # the delivery comes right after the pass's last look
            await arq.enqueue_job("gate_pull_request", {}, _job_id=gate_job_id(REF, 4, HEADS[4]))
        return seen

    monkeypatch.setattr(reconcile_module, "_jobs_alive", late_delivery)
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    queued = await arq.zrange("arq:queue", 0, -1)
    assert (counts.queued, [q.decode() for q in queued]) == (0, [gate_job_id(REF, 4, HEADS[4])])
