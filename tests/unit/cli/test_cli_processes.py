"""``llmgate run`` and its provider processes: none outlives the run, on success and on Ctrl-C;
the decision to start them is shown by ``--verbose`` (worker/evals/llm/pool.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import model_config, write_repo
from worker.cli.main import EXIT_INTERRUPTED, main
from worker.evals.llm import pool as llm_pool
from worker.evals.llm.direct import DIRECT_ENV
from worker.evals.llm.pool import PROCESSES_ENV

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def children() -> set[int]:
    """The process ids of this process's children (every thread's)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        found |= {int(pid) for pid in (task / "children").read_text().split()}
    return found


def serving(pids: set[int]) -> set[int]:
    """Those of ``pids`` that are provider processes (``-m worker.evals.llm.serve``)."""
    found = set()
    for pid in pids:
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"worker.evals.llm.serve" in line:
            found.add(pid)
    return found


def gated_repo(tmp_path: Path, llm: FakeLLMServer) -> Path:
    repo = write_repo(tmp_path, model_config(llm.url, gate="{pass_rate: {min: 0.5}}",
                                             assertions="      - {type: contains, value: echo}\n"),
                      [{"id": "a", "input": "hi"}, {"id": "b", "input": "ho"}])
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


@pytest.fixture
def forced_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """One provider process for any run, however small (on litellm's path: provider processes
    serve no call of the direct client, which the fake server's model would take)."""
    monkeypatch.setenv(PROCESSES_ENV, "1")
    monkeypatch.setenv(DIRECT_ENV, "0")
    monkeypatch.setattr(llm_pool, "MIN_CALLS", 1)


def watch_spawns(monkeypatch: pytest.MonkeyPatch, seen: set[int], interrupt: bool) -> None:
    """Record the provider processes started; with ``interrupt``, press Ctrl-C (SIGINT) as soon
    as the first one is started."""
    real_spawn = llm_pool.ProviderPool._spawn

    async def spawn(pool: llm_pool.ProviderPool) -> None:
        task = asyncio.create_task(real_spawn(pool))
        while not llm_pool._LIVE and not task.done():
            await asyncio.sleep(0)
        seen.update(popen.pid for popen in llm_pool._LIVE)
        if interrupt:
            os.kill(os.getpid(), signal.SIGINT)
        await task

    monkeypatch.setattr(llm_pool.ProviderPool, "_spawn", spawn)


@pytest.mark.slow
def test_no_provider_process_outlives_a_run(llm: FakeLLMServer, tmp_path: Path,
                                            forced_pool: None, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    repo = gated_repo(tmp_path, llm)
    before, seen = children(), set[int]()
    watch_spawns(monkeypatch, seen, interrupt=False)
    assert main(["run", "--repo", str(repo), "--no-cache", "--verbose"]) == 0
    assert len(seen) == 1 and serving(seen) == set()  # started, then gone
    assert children() - before == set() and not llm_pool._LIVE
    err = capsys.readouterr().err
    assert f"llmgate: 1 provider processes: {PROCESSES_ENV} asks for them" in err


@pytest.mark.slow
def test_ctrl_c_during_a_run_reaps_the_provider_processes(
        llm: FakeLLMServer, tmp_path: Path, forced_pool: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo = gated_repo(tmp_path, llm)
    llm.setup({"faults": [{"stall": True, "stall_s": 3, "times": 2}]})  # the run is under way
    before, seen = children(), set[int]()
    watch_spawns(monkeypatch, seen, interrupt=True)
    assert main(["run", "--repo", str(repo), "--no-cache"]) == EXIT_INTERRUPTED
    assert len(seen) == 1 and serving(seen) == set()
    assert children() - before == set() and not llm_pool._LIVE


@pytest.mark.parametrize(("calls", "count", "cpus", "forced", "started"), [
    (200, 2, 2, False, 0),      # the 200-ticket job: 0.6 s saved, 6 s to start two
    (199, 2, 2, True, 0),       # under MIN_CALLS even when asked
    (200, 2, 2, True, 2),       # asked for: from MIN_CALLS on
    (1000, 2, 2, False, 0),     # 3 s saved, 6 s spent
    (2001, 2, 2, False, 2),     # 6.003 s saved > 6 s
    (5000, 0, 1, False, 0),     # one core
    (5000, 4, 4, False, 4),
])
def test_provider_processes_start_only_when_they_pay(
        calls: int, count: int, cpus: int, forced: bool, started: int) -> None:
    assert llm_pool.decide(calls, count, cpus, 3.0, forced)[0] == started


def test_the_decision_gives_its_figures() -> None:
    assert llm_pool.decide(200, 2, 2, 3.0) == (0, (
        "no provider processes: 200 calls x 7 ms of litellm CPU would save ~0.6 s of the run's "
        "core; 2 x 3.0 s to import litellm costs 6.0 s (2 usable cores)"))
