"""`worker.security.process.run_confined`: a command is finished when its process exits.

Issue 31: a command that exited 0 but left a child holding its output pipe was read to the
pipe's end, so it "timed out". Now its output is read for `EXIT_GRACE_S` after it exits, what
still holds the pipe is ended with its process group, and `Finished.note` says so. Real
subprocesses, with and without a PID namespace (worker/security/pidns.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.evals.run.test_targets import EXAMPLE, pid_alive, script
from worker.evals.run.targets import run_command
from worker.evals.types import Settings
from worker.security import pidns, sandbox
from worker.security.process import (
    EXIT_GRACE_S,
    LEFT_OUTSIDE_NOTE,
    LEFT_RUNNING_NOTE,
    Finished,
    TargetFailed,
    build_env,
    run_confined,
)

#: Start a child that writes its host PID to ``child.pid`` and sleeps holding the command's
#: stdout and stderr (``new_session``: in a session of its own), then exit 0 at once.
LEAVE_CHILD = """import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import os, time; "
                  "open('child.tmp', 'w').write(os.readlink('/proc/self')); "
                  "os.replace('child.tmp', 'child.pid'); time.sleep(600)"],
                 start_new_session=sys.argv[1] == "new_session")
while not os.path.exists("child.pid"):
    time.sleep(0.01)
print("answered")
"""
#: Seconds a finished command takes at most here, on a loaded machine (its timeout is 60 s).
SOON_S = 20


@contextlib.contextmanager
def own_sandbox(pid_namespace: bool) -> Iterator[None]:
    """Run targets under the environment's sandbox with or without PID namespaces.

    Raises:
        pytest.skip.Exception: PID namespaces are asked for and this kernel refuses them.
    """
    if pid_namespace and not pidns.available():
        pytest.skip("this kernel gives targets no PID namespace")
    box = sandbox.Sandbox.from_env(os.environ)
    box.pid_namespace = pid_namespace
    sandbox.install(box)
    try:
        yield
    finally:
        sandbox.install(None)
        box.close()


async def leave_child(tmp_path: Path, how: str) -> tuple[Finished, float, int]:
    """Run `LEAVE_CHILD`; return what `run_confined` said, its seconds and the child's pid."""
    (tmp_path / "leave.py").write_text(LEAVE_CHILD)
    started = time.monotonic()
    finished = await run_confined([sys.executable, "leave.py", how], tmp_path,
                                  build_env((), tmp_path), 60, tmp_path)
    return finished, time.monotonic() - started, int((tmp_path / "child.pid").read_text())


def gone(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pid_alive(pid)


async def test_a_child_holding_the_output_is_ended_after_the_grace(tmp_path: Path) -> None:
    with own_sandbox(pid_namespace=False):
        finished, seconds, child = await leave_child(tmp_path, "same_group")
    assert finished == Finished(LEFT_RUNNING_NOTE)
    assert EXIT_GRACE_S <= seconds < SOON_S  # not the 60 s timeout
    assert gone(child)


async def test_a_child_in_a_session_of_its_own_cannot_hold_the_result(tmp_path: Path) -> None:
    """Without a PID namespace nothing llmgate may kill reaches it: the result still comes, and
    the note says what was left."""
    with own_sandbox(pid_namespace=False):
        finished, seconds, child = await leave_child(tmp_path, "new_session")
    try:
        assert finished == Finished(LEFT_OUTSIDE_NOTE)
        assert seconds < SOON_S
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("how", ["same_group", "new_session"])
async def test_a_pid_namespace_ends_it_with_the_command(tmp_path: Path, how: str) -> None:
    with own_sandbox(pid_namespace=True):
        finished, seconds, child = await leave_child(tmp_path, how)
    assert finished == Finished() and seconds < SOON_S  # nothing was left to end
    assert gone(child)


async def test_a_command_that_leaves_nothing_has_no_note(tmp_path: Path) -> None:
    with own_sandbox(pid_namespace=False):
        finished = await run_confined([sys.executable, "-c", "print('hi')"], tmp_path,
                                      build_env((), tmp_path), 60, tmp_path)
    assert finished == Finished()


async def test_a_failing_command_keeps_its_output_tail(tmp_path: Path) -> None:
    with own_sandbox(pid_namespace=False), pytest.raises(TargetFailed) as failed:
        await run_confined([sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"],
                           tmp_path, build_env((), tmp_path), 60, tmp_path)
    assert str(failed.value) == "the command exited with status 4; last output:\nboom"


async def test_the_example_of_such_a_target_carries_the_note(tmp_path: Path) -> None:
    target = script(tmp_path, """
        import subprocess
        json.dump({"output": "done"}, open(out, "w"))
        subprocess.Popen(["sleep", "600"])
    """)
    with own_sandbox(pid_namespace=False):
        out = await run_command(target, EXAMPLE, tmp_path, Settings(60.0, 4, ()))
    assert (out.output, out.error, out.notes) == ("done", None, (LEFT_RUNNING_NOTE,))
