"""Two tries of one gate at once (issue 32, item 3), every part a real process.

A worker running a gate is paused (SIGSTOP) beyond its job lease (3 s): the other worker starts
the job's next try and concludes the gate; then the paused worker is resumed (SIGCONT). The
fenced lease (worker/runtime/fence.py) must make the resumed try stop without one more write to
GitHub: the check run stays as the try holding the lease concluded it (not reopened), there is
one check run and one sticky comment, and the resumed worker's log says why it stopped.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.chaos_repo import build_chaos_repo
from tests.e2e.chaos_support import ChaosFakes, ChaosStack, Worker
from tests.e2e.chaos_tally import MUTATING
from tests.e2e.ops_support import wait_until
from tests.unit.evals.run.test_targets import pid_alive as alive

pytestmark = pytest.mark.slow

#: A short lease, so a pause of a few seconds outlives it; one job per worker.
FENCE_ENV = {"LLMGATE_JOB_LEASE_S": "3", "LLMGATE_MAX_JOBS": "1"}
#: Seconds the head's target sleeps per example: the gate surely runs when it is paused.
TARGET_SLEEP_S = 3


@pytest.fixture(scope="module")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFakes]:
    """The fake GitHub and the fake provider, shared by the module's stacks."""
    with ChaosFakes(tmp_path_factory.mktemp("fence-fakes")) as started:
        yield started


def _sleeping_target(stack: ChaosStack) -> Worker | None:
    """The worker whose target has run for half a second (the head's sleeping one), if any."""
    found = stack.worker_running_a_target()
    if found is None:
        return None
    time.sleep(0.5)
    worker, pids = found
    return worker if any(alive(pid) for pid in pids) else None


def _job_ended(log: Path, offset: int) -> bool:
    """Whether arq logged the end of a job (done ``←`` or failed ``!``) after byte ``offset``."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return any(mark in line for line in text.splitlines() for mark in (" ← ", " ! "))


def test_a_paused_try_writes_nothing_once_another_try_took_its_lease(
        tmp_path: Path, fakes: ChaosFakes) -> None:
    repo = build_chaos_repo(tmp_path / "repo", 1, sleep_s=TARGET_SLEEP_S)
    head = repo.heads[(1, 1)]
    with ChaosStack(tmp_path, fakes, workers=2, worker_env=FENCE_ENV) as stack:
        stack.push(repo, 1)
        paused = wait_until(lambda: _sleeping_target(stack), 60, "a gate running its target")
        log = tmp_path / f"{paused.name}.log"
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            stack.wait_concluded(head, 90)  # the other worker's try, past the lapsed lease
            time.sleep(1.0)  # its last requests (the sticky comment is written before)
            before = stack.github.state()
            offset, resumed_at = log.stat().st_size, time.time()
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: _job_ended(log, offset), 60, "the resumed try ended")
        time.sleep(1.0)
        after = stack.github.state()
        resumed_log = log.read_bytes()[offset:].decode(errors="replace")
        stood_down = [line for line in resumed_log.splitlines() if "lease" in line]
        print(f"\n[fence] resumed worker's lease lines: {stood_down}")
        counted = stack.tally(repo.newest())
        # once the resumed worker's flush shows its lease_lost try, the conclusions count only
        # the try that published (the stale try counted its verdict too, from the fresh user)
        metrics = wait_until(lambda: _metrics(stack), 60, "the lease_lost try in /metrics")

    late = [(r["method"], r["path"]) for r in after["requests"]
            if r["method"] in MUTATING and r["auth"] != "jwt" and r["at"] >= resumed_at]
    assert late == []  # not one write of the resumed try reached GitHub
    assert after["check_runs"] == before["check_runs"]  # as the holder concluded it
    assert [(r["head_sha"], r["status"]) for r in after["check_runs"]] == [(head, "completed")]
    assert (counted.lost, counted.duplicated_checks, counted.duplicated_comments,
            counted.stuck) == ([], {}, {}, []), counted.line()
    assert after["comments"] == before["comments"] and len(after["comments"]) == 1
    assert any("stopped, its lease lost: taken by another worker" in line
               for line in stood_down), resumed_log[-3000:]
    assert metrics["conclusions"] == 1.0, metrics


def _metrics(stack: ChaosStack) -> dict[str, float] | None:
    """The web process's /metrics: gate conclusions and lease_lost tries summed over workers,
    once a lease_lost try shows; else None."""
    text = httpx.get(f"{stack.web_url}/metrics", timeout=10).text
    sums = {"conclusions": 0.0, "lease_lost": 0.0}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("llmgate_gate_conclusions_total{"):
            sums["conclusions"] += float(value)
        elif name.startswith("llmgate_jobs_total{") and 'outcome="lease_lost"' in name:
            sums["lease_lost"] += float(value)
    return sums if sums["lease_lost"] >= 1 else None
