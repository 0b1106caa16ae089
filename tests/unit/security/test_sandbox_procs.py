"""Target processes end with their worker (`worker.security.sandbox_procs`), with real processes.

A "worker" here is a Python process running `run_command` as the worker does (its groups file
installed by `take_over`); the test SIGKILLs it and then plays the next worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.fake_github import generate_app_keypair
from tests.timing import scaled
from tests.unit.evals.run.test_targets import pid_alive
from worker.security import sandbox, sandbox_procs
from worker.security.sandbox_procs import FOLDER, GroupsFile, end_leftovers, start_ticks

ROOT = Path(__file__).resolve().parents[2]
#: The target: starts a child in its own process group, writes both pids, then sleeps.
TARGET = """import json, os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import os, time; "
                  "open('child.tmp', 'w').write(os.readlink('/proc/self')); "
                  "os.replace('child.tmp', 'child.pid'); time.sleep(60)"])
while not os.path.exists("child.pid"):
    time.sleep(0.01)
# host PIDs (/proc is the host's): inside its PID namespace os.getpid() is the namespace's
json.dump({"target": int(os.readlink("/proc/self")), "child": int(open("child.pid").read())},
          open("pids.tmp", "w"))
os.replace("pids.tmp", "pids.json")
time.sleep(60)
"""
WORKER = """import asyncio, sys
from pathlib import Path
from worker.security import sandbox, sandbox_procs
from worker.evals.run.targets import run_command
from worker.evals.types import CommandTarget, Example, Settings
sandbox_procs.take_over(Path(sys.argv[1]))
target = CommandTarget(f"{sys.executable} target.py")
asyncio.run(run_command(target, Example("e", 1, "x", None, {}), Path(sys.argv[2]),
                        Settings(120.0, 1, ())))
"""


def wait_for(predicate: Callable[[], bool], timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def spawned() -> Iterator[list[int]]:
    """Pids this test started (or had started); any still alive at the end is killed."""
    started: list[int] = []
    yield started
    for pid in started:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_workers_target_dies_at_once_and_its_children_with_the_next_worker(
        tmp_path: Path, spawned: list[int]) -> None:
    checkout, workdir = tmp_path / "checkout", tmp_path / "work"
    checkout.mkdir()
    (checkout / "target.py").write_text(TARGET)
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(workdir), str(checkout)],
                              cwd=ROOT, stderr=subprocess.PIPE)
    spawned.append(worker.pid)
    pids_file = checkout / "pids.json"
    assert wait_for(pids_file.exists), worker.stderr.read() if worker.poll() else "no target"
    pids = json.loads(pids_file.read_text())
    spawned += [pids["target"], pids["child"]]
    [groups_file] = (workdir / FOLDER).glob("*.json")
    group = _pgrp(pids["target"])  # the process the worker started (the target, or the
    assert json.loads(groups_file.read_text())["groups"] == {  # stand-in of its namespace)
        str(group): start_ticks(group)}

    worker.kill()
    worker.wait()
    assert wait_for(lambda: not pid_alive(pids["target"]), 5), "the target outlived its worker"
    if sandbox.current().pid_namespace:  # its namespace ends with it: the child too, at once
        assert wait_for(lambda: not pid_alive(pids["child"]), 5)
        done = end_leftovers(workdir / FOLDER)
        assert done.killed == () and done.workers == (worker.pid,)
    else:
        assert pid_alive(pids["child"])  # the death signal reaches only the first process
        done = end_leftovers(workdir / FOLDER)  # what the next worker does at start-up
        assert done.killed == (pids["child"],) and done.workers == (worker.pid,)
        assert wait_for(lambda: not pid_alive(pids["child"]), 5)
    assert list((workdir / FOLDER).iterdir()) == []


def _pgrp(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def _session(spawned: list[int]) -> int:
    """Start a sleeping process in a session (and group) of its own; return its pid."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    spawned.append(proc.pid)
    assert wait_for(lambda: start_ticks(proc.pid) is not None)
    return proc.pid


def _dead_worker() -> tuple[int, int]:
    """The pid and start time of a worker that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    start = start_ticks(proc.pid)
    proc.wait()
    assert start is not None
    return proc.pid, start


def _write(folder: Path, name: str, owner: tuple[int, int], groups: dict[int, int],
           **machine: str) -> Path:
    mine = sandbox_procs._machine()
    document = {**mine, **machine, "owner": {"pid": owner[0], "start": owner[1]},
                "groups": {str(k): v for k, v in groups.items()}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(document))
    return path


def test_only_processes_still_in_a_recorded_group_are_killed(
        tmp_path: Path, spawned: list[int]) -> None:
    leftover, reused, alone = _session(spawned), _session(spawned), _session(spawned)
    folder = tmp_path / FOLDER
    _write(folder, "dead.json", _dead_worker(), {
        leftover: start_ticks(leftover) or 0,
        # the same pid as a recorded group, but started after the record: another process
        reused: (start_ticks(reused) or 0) + 1000})
    done = end_leftovers(folder)
    assert done.killed == (leftover,)
    assert wait_for(lambda: not pid_alive(leftover), 5)
    assert pid_alive(reused) and pid_alive(alone)


def test_live_workers_other_namespaces_and_other_boots_are_left_alone(
        tmp_path: Path, spawned: list[int]) -> None:
    target = _session(spawned)
    groups = {target: start_ticks(target) or 0}
    folder = tmp_path / FOLDER
    me = (os.getpid(), start_ticks(os.getpid()) or 0)
    live = _write(folder, "live.json", me, groups)
    other_ns = _write(folder, "ns.json", _dead_worker(), groups, pid_ns="pid:[1]")
    other_boot = _write(folder, "boot.json", _dead_worker(), groups, boot_id="another-boot")
    torn = folder / "not-json.json"
    torn.write_text("{")
    assert end_leftovers(folder).killed == ()
    assert pid_alive(target)
    assert live.exists() and other_ns.exists() and torn.exists()
    assert not other_boot.exists()  # nothing of another boot runs now


def test_the_groups_file_holds_exactly_the_groups_not_yet_killed(
        tmp_path: Path, spawned: list[int]) -> None:
    first, second = _session(spawned), _session(spawned)
    groups = GroupsFile(tmp_path)
    groups.add(first)
    groups.add(second)
    recorded = json.loads(groups.path.read_text())
    assert recorded["groups"] == {str(first): start_ticks(first), str(second): start_ticks(second)}
    assert recorded["owner"] == {"pid": os.getpid(), "start": start_ticks(os.getpid())}
    groups.discard(first)
    assert json.loads(groups.path.read_text())["groups"] == {str(second): start_ticks(second)}
    groups.discard(second)
    assert not groups.path.exists()


def test_a_child_of_a_parent_already_gone_kills_itself(tmp_path: Path) -> None:
    """The death signal is asked for in the child; one whose parent died first ends itself."""
    code = textwrap.dedent("""
        import os, subprocess, sys
        from worker.security import sandbox, sandbox_procs
        preexec = sandbox_procs.preexec_dying_with_parent()
        if os.fork() == 0:  # a process that is not the parent preexec was made for
            proc = subprocess.Popen(["true"], preexec_fn=preexec)
            os._exit(-proc.wait())
        print(os.waitstatus_to_exitcode(os.wait()[1]))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == str(int(signal.SIGKILL)), out.stderr


def test_a_starting_worker_ends_what_a_dead_one_left(tmp_path: Path, spawned: list[int]) -> None:
    """The worker's start-up (`worker.runtime.hardening.harden`) ends the leftovers and says so."""
    leftover = _session(spawned)
    workdir = tmp_path / "work"
    _write(workdir / FOLDER, "dead.json", _dead_worker(), {leftover: start_ticks(leftover) or 0})
    private_pem, _ = generate_app_keypair()
    key_file = tmp_path / "app.pem"
    key_file.write_text(private_pem)
    code = textwrap.dedent("""
        import logging, sys
        logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
        from worker.runtime.hardening import harden
        from worker.runtime.settings import WorkerConfig
        harden(WorkerConfig.from_env())
    """)
    env = {"PATH": os.environ["PATH"], "GITHUB_APP_ID": "1", "HOME": str(tmp_path),
           "GITHUB_APP_PRIVATE_KEY_FILE": str(key_file), "LLMGATE_WORKDIR": str(workdir)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert wait_for(lambda: not pid_alive(leftover), 5)
    assert "ended 1 target process(es) left running by dead worker(s)" in out.stdout
    assert [p.name for p in (workdir / FOLDER).iterdir()] == []  # its own file: no group yet
