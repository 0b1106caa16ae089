"""The reconciler (issue 14): GitHub's open pull requests and llmgate's check runs decide, not
Redis. A real Redis, the schema-checking fake GitHub (its ``pulls?state=open``,
``/app/installations`` and ``/installation/repositories``) and arq's own queue."""

from __future__ import annotations

import asyncio
import logging
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
    REQUEUE_FAILED_REASON,
    REQUEUED_KEY,
    reconcile,
    reconcile_interval_s,
    start_reconciling,
    stop_reconciling,
)
from worker.gate.registry import RunRegistry, new_entry
from worker.github.client import GitHubClient
from worker.main import worker_settings
from worker.runtime.epoch import EPOCH_FILE, FIRST, KEPT, LOST, EpochWatch
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


def _requeued(number: int, check_run_id: int) -> str:
    return f"{gate_job_id(REF, number, HEADS[number])}:requeued:{check_run_id}"


async def test_a_pass_queues_missing_gates_and_orphans_only(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """#1 lost its queued gate (no check run): queued again. #2's job was lost with its
    registry entry: its gate is queued again, registered to its check run (issue 32). #3's job
    runs (its lease key), #4's check run is registered to a queued job, #5 is concluded: all
    left alone."""
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
    assert counts.as_dict() == {"heads": 5, "live": 2, "concluded": 0, "queued": 2, "errors": 0}
    job = Job(gate_job_id(REF, 1, HEADS[1]), arq)
    assert await job.status() == JobStatus.queued
    [payload] = (await job.info()).args  # type: ignore[union-attr]
    assert {k: payload[k] for k in ("installation_id", "pr_number", "head_sha", "base_sha",
                                    "base_ref", "repo")} == {
        "installation_id": INSTALLATION_ID, "pr_number": 1, "head_sha": HEADS[1],
        "base_sha": BASE_SHA, "base_ref": "main",
        "repo": {"owner": OWNER, "name": REPO, "clone_url": "https://example.test/acme/tiny.git"}}
    assert await arq.get(pr_head_key(REF, 1)) == f"{HEADS[1]}@main".encode()
    again = Job(_requeued(2, orphan), arq)
    assert await again.status() == JobStatus.queued
    [payload] = (await again.info()).args  # type: ignore[union-attr]
    assert (payload["pr_number"], payload["head_sha"]) == (2, HEADS[2])
    entry = await RunRegistry(arq).get(_requeued(2, orphan), 2)
    assert entry is not None and (entry.check_run_id, entry.head_sha) == (orphan, HEADS[2])
    assert await arq.get(f"{REQUEUED_KEY}{orphan}") == _requeued(2, orphan).encode()
    assert [r["status"] for n in (2, 3, 4) for r in _runs(fake_gh, n)] == ["in_progress"] * 3
    assert [(r["id"], r["conclusion"]) for r in _runs(fake_gh, 5)] == [(done, "success")]
    state = fake_gh.state()
    writes = [r["operation"] for r in state["requests"][before:] if r["method"] != "GET"]
    assert writes == [] and state["violations"] == []
    assert running  # its check run id: untouched above


async def test_an_orphan_queued_again_and_lost_again_is_concluded_timed_out(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    """Issue 32: the re-queue is made once. When the re-queued job is lost too (its worker
    stopped on its last try: arq gave it up), the next pass concludes the check run timed_out
    with a Re-run and the reason, and forgets the registry entry (no second write by the
    sweeper); no third job is queued."""
    fake_gh.setup({"pulls": [pull(2, HEADS[2])]})
    orphan = await _check_run(gh, 2)
    assert (await reconcile(arq, gh, lambda _: gh, confirm_s=0)).queued == 1
    await arq.zrem("arq:queue", _requeued(2, orphan))  # given up by arq: neither queued nor run
    again = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (again.concluded, again.queued, again.errors) == (1, 0, [])
    [concluded] = _runs(fake_gh, 2)
    assert (concluded["id"], concluded["status"], concluded["conclusion"]) == (
        orphan, "completed", "timed_out")
    assert concluded["output"]["summary"].startswith(REQUEUE_FAILED_REASON)
    assert concluded["history"][-1]["body"]["actions"][0]["identifier"] == "rerun"
    assert await RunRegistry(arq).run_ids() == []
    assert await arq.zrange("arq:queue", 0, -1) == []


async def test_older_orphans_of_a_head_are_concluded_and_only_the_newest_queued(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis) -> None:
    fake_gh.setup({"pulls": [pull(2, HEADS[2])]})
    older, newest = await _check_run(gh, 2), await _check_run(gh, 2)
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (counts.concluded, counts.queued) == (1, 1)
    assert [(r["id"], r["conclusion"]) for r in _runs(fake_gh, 2)] == [
        (older, "timed_out"), (newest, None)]
    assert [r["output"]["summary"].startswith(ORPHAN_REASON)
            for r in _runs(fake_gh, 2) if r["id"] == older] == [True]
    assert await Job(_requeued(2, newest), arq).status() == JobStatus.queued


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
    assert (await reconcile(arq, gh, lambda _: gh, confirm_s=0)).queued == 1
    again = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (again.concluded, again.queued, again.live) == (0, 0, 1)


async def test_a_wiped_redis_is_told_once_and_a_fresh_one_is_a_first_start(
        arq: ArqRedis, tmp_path: Path) -> None:
    """Issue 32: a fresh Redis is a first start, not a loss; a wipe after an epoch was seen
    is told once, to the process that makes the new epoch; a process that only observed the
    epoch (it lost every tick) knows one was there, and so does a restarted process through
    the file in LLMGATE_WORKDIR."""
    first, other = EpochWatch(tmp_path), EpochWatch()
    assert await first.check(arq) == FIRST
    assert (await first.check(arq), await other.check(arq)) == (KEPT, KEPT)
    await arq.flushdb()
    assert await other.check(arq) == LOST  # it saw the epoch in its check above
    assert await first.check(arq) == KEPT  # the new epoch: only one process is told
    await arq.flushdb()
    observer = EpochWatch()
    assert await EpochWatch().check(arq) == FIRST
    await observer.observe(arq)
    await arq.flushdb()
    assert await observer.check(arq) == LOST
    await arq.flushdb()
    assert (tmp_path / EPOCH_FILE).read_text()
    assert await EpochWatch(tmp_path).check(arq) == LOST  # a restarted worker, same workdir


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
            if await arq.zrange("arq:queue", 0, -1):
                break
            await asyncio.sleep(0.1)
    finally:
        for ctx in workers:
            await stop_reconciling(ctx)
    queued = [q.decode() for q in await arq.zrange("arq:queue", 0, -1)]
    assert [q.startswith(gate_job_id(REF, 2, HEADS[2]) + ":requeued:") for q in queued] == [True]
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
    orphan is queued again all the same and #4's missing gate queued; #2 waits for the next
    pass."""
    fake_gh.setup({"pulls": [pull(n, HEADS[n]) for n in (2, 3, 4)], "faults": [
        {"path": f"/repos/{OWNER}/{REPO}/commits/{HEADS[2]}/check-runs", "status": 502,
         "times": None}]})
    await _check_run(gh, 2)
    orphan = await _check_run(gh, 3)
    counts = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (counts.heads, counts.concluded, counts.queued) == (2, 0, 2)
    assert [f"#{2}" in e and "502" in e for e in counts.errors] == [True]
    assert await Job(_requeued(3, orphan), arq).status() == JobStatus.queued
    assert await Job(gate_job_id(REF, 4, HEADS[4]), arq).status() == JobStatus.queued
    fake_gh.setup({"clear_faults": True})
    assert (await reconcile(arq, gh, lambda _: gh, confirm_s=0)).queued == 1  # #2 now


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


async def test_a_fresh_redis_is_a_first_start_and_a_wipe_is_told_once(
        fake_gh: FakeGitHubServer, gh: GitHubClient, arq: ArqRedis, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 32: the first start on an empty Redis is said at info level, never as "Redis lost
    its data"; a wipe while the workers run is told once, as a warning, by one of them."""
    fake_gh.setup({"pulls": []})
    services = SimpleNamespace(redis=arq, github=lambda _: gh,
                               config=SimpleNamespace(workdir=tmp_path))
    workers = [{"redis": arq, "services": services, CTX_KEY: JobLimits(lease_s=3)}
               for _ in range(2)]
    caplog.set_level("INFO", logger=reconcile_module.__name__)

    def said(text: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if text in r.getMessage()]

    for ctx in workers:
        start_reconciling(ctx, {"LLMGATE_RECONCILE_S": "1"})
    try:
        await asyncio.sleep(1.5)
        assert [r.levelname for r in said("first start on this Redis")] == ["INFO"]
        assert said("lost its data") == []
        await arq.flushdb()
        for _ in range(60):
            if said("lost its data"):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.2)  # a later pass tells nothing more
    finally:
        for ctx in workers:
            await stop_reconciling(ctx)
    assert [r.levelname for r in said("lost its data since it was last seen")] == ["WARNING"]
    assert len(said("first start")) == 1
