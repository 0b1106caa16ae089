"""Issue 32, items 5 and 6, with every part a real process (tests/e2e/chaos_support.py).

Item 5: a gate whose job went with a wiped Redis (``FLUSHALL``) and whose worker then died
(SIGKILL) is queued again once by the reconciler and concluded with a real verdict; lost a second
time, it is concluded ``timed_out`` with a Re-run; the first reconciler pass on a fresh Redis
does not say that Redis lost its data. Item 6: the scratch folders of a SIGKILLed worker's
targets (``llmgate-target-*``, ``llmgate-view-*``) are removed by the next worker's start-up,
and those of a live worker stay.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.chaos_processes import descendants
from tests.e2e.chaos_repo import build_chaos_repo
from tests.e2e.chaos_support import ChaosFakes, ChaosStack, Worker
from tests.e2e.chaos_tally import Tally
from tests.e2e.ops_support import wait_until
from tests.unit.evals.run.test_targets import pid_alive
from worker.security.scratch import TARGET_PREFIX, VIEW_PREFIX

pytestmark = pytest.mark.slow

#: Seconds by which a lost gate is queued again and concluded (a reconciler pass every 5 s,
#: each decision confirmed a third of the 6 s lease later, then the gate itself).
SETTLE_S = 90.0
#: What the worker logs say (worker/gate/reconcile.py).
LOST_DATA = "Redis lost its data"
FIRST_START = "no llmgate data in it before"
REQUEUED = "again (its job was lost)"


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFakes]:
    """The fake GitHub and the fake provider, shared by the module's stacks."""
    with ChaosFakes(tmp_path_factory.mktemp("chaos-fakes")) as started:
        yield started


def _wipe(stack: ChaosStack) -> None:
    """``FLUSHALL`` the queue's Redis: every key gone, as after a restart without persistence."""
    client = stack.redis.client()
    try:
        client.flushall()
    finally:
        client.close()


def _report(name: str, stack: ChaosStack, counted: Tally) -> None:
    print(f"\n[{name}] {counted.line()}\n[{name}] worker exits: {stack.worker_exits()}")
    for line in stack.log_lines("reconciler", "sweeper", "Traceback")[:16]:
        print(f"[{name}]   {line}")


def _runs(stack: ChaosStack, head_sha: str) -> list[dict[str, object]]:
    return [r for r in stack.github.state()["check_runs"] if r["head_sha"] == head_sha]


def _lose_a_running_gate(stack: ChaosStack) -> None:
    """Wipe Redis while a gate runs its target, then SIGKILL the worker running it."""
    worker, _ = wait_until(stack.worker_running_a_target, 60, "a gate running its target")
    _wipe(stack)
    stack.kill_worker(worker)


def test_a_gate_lost_with_a_wiped_redis_is_queued_again_and_gets_its_verdict(
        tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 1, sleep_s=3)
    with ChaosStack(tmp_path, fakes, workers=2) as stack:
        wait_until(lambda: stack.log_lines(FIRST_START), 30, "the first start logged")
        assert stack.log_lines(LOST_DATA) == []  # a fresh Redis lost nothing
        stack.push(repo, 1)
        _lose_a_running_gate(stack)
        counted = stack.settle(repo.newest(), SETTLE_S)
        _report("wipe, kill", stack, counted)
        assert (counted.lost, counted.stuck, counted.duplicated_checks) == ([], [], {})
        assert counted.conclusions == {"success": 1}, counted.line()  # a verdict, not timed_out
        assert len(stack.log_lines(REQUEUED)) == 1
        assert len(stack.log_lines(LOST_DATA)) == 1  # the wipe, told once
        assert len(stack.log_lines(FIRST_START)) == 1


def test_a_gate_queued_again_and_lost_again_is_concluded_timed_out_with_a_rerun(
        tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 1, sleep_s=3)
    one_try = {"LLMGATE_JOB_MAX_TRIES": "1"}  # the second kill ends the re-queued run's only try
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=one_try, supervise=True) as stack:
        stack.push(repo, 1)
        _lose_a_running_gate(stack)
        wait_until(lambda: stack.log_lines(REQUEUED), SETTLE_S, "the gate queued again")
        again, _ = wait_until(stack.worker_running_a_target, 60, "the re-queued gate running")
        stack.kill_worker(again)
        counted = stack.settle(repo.newest(), SETTLE_S)
        _report("wipe, kill, kill", stack, counted)
        assert (counted.lost, counted.stuck, counted.duplicated_checks) == ([], [], {})
        assert counted.conclusions == {"timed_out": 1}, counted.line()
        [run] = _runs(stack, repo.heads[(1, 1)])
        history = run["history"]
        assert isinstance(history, list)
        last = history[-1]["body"]
        assert last["conclusion"] == "timed_out"
        assert [a["identifier"] for a in last["actions"]] == ["rerun"]
        assert len(stack.log_lines(REQUEUED)) == 1  # once, never twice
        assert len(stack.log_lines(LOST_DATA)) == 1  # the epoch was made at start-up


def _scratch_of(pid: int) -> set[Path]:
    """The scratch folders a target process uses: its input file's and its view (cwd)."""
    found: set[Path] = set()
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return found
    for arg in (a.decode(errors="replace") for a in args):
        if TARGET_PREFIX in arg:
            found.add(Path(arg).parent)
    for folder in (cwd, *cwd.parents):
        if folder.name.startswith(VIEW_PREFIX):
            found.add(folder)
    return found


def _targets(stack: ChaosStack) -> dict[str, set[int]]:
    """Each live worker slot's target processes (those using a scratch folder)."""
    return {w.name: {p for p in descendants(w.proc.pid) if _scratch_of(p)}
            for w in stack.live_workers()}


def _sleeping_targets(stack: ChaosStack) -> dict[str, tuple[set[int], set[Path]]] | None:
    """Each worker slot's target processes that have run for a second (the head's sleeping
    ones, not the base's quick ones) and their scratch folders, once both slots have some with
    an input file and a view."""
    first = _targets(stack)
    time.sleep(1.0)
    busy = {}
    for name, pids in _targets(stack).items():
        still = pids & first.get(name, set())
        folders = set().union(*(_scratch_of(p) for p in still))
        if not any(f.name.startswith(TARGET_PREFIX) for f in folders) or not any(
                f.name.startswith(VIEW_PREFIX) for f in folders):
            return None
        busy[name] = (still, folders)
    return busy if len(busy) == 2 else None


def _restarted(worker: Worker) -> bool:
    return bool(worker.history) and worker.proc.poll() is None


def test_a_killed_workers_scratch_folders_are_removed_by_the_next_worker(
        tmp_path: Path, fakes: ChaosFakes) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    repo = build_chaos_repo(tmp_path / "repo", 2, sleep_s=45, timeout_s=90)
    env = {"LLMGATE_MAX_JOBS": "1", "TMPDIR": str(tmp)}
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=env, supervise=True) as stack:
        for pr in (1, 2):
            stack.push(repo, pr)
        busy = wait_until(lambda: _sleeping_targets(stack), 90, "both workers running a target")
        victim, survivor = stack.workers
        dead, live = busy[victim.name][1], busy[survivor.name][1]
        assert all(f.is_dir() for f in dead | live)
        stack.kill_worker(victim)
        wait_until(lambda: _restarted(victim), 30, "the killed worker restarted")
        stack.wait_ready(victim)  # its start-up is over
        print(f"\n[scratch] dead worker's: {sorted(f.name for f in dead)}; live worker's: "
              f"{sorted(f.name for f in live)}; left: {sorted(p.name for p in tmp.iterdir())}")
        assert [f for f in dead if os.path.lexists(f)] == []
        assert all(pid_alive(p) for p in busy[survivor.name][0])  # still in use, and kept:
        assert all(f.is_dir() for f in live)
        assert stack.log_lines("scratch folder(s) that dead processes left")
