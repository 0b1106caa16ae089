"""Targets in PID namespaces of their own (worker/security/pidns.py): nothing they start
outlives them, and they cannot name any process outside (issue 30: a tester's helper process,
left behind with ``setsid``, lowered base's targets' file-size limit with ``prlimit``)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.security import pidns

pytestmark = pytest.mark.skipif(not pidns.available(),
                                reason="this kernel refuses PID namespaces to this user")


def _run(script: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], preexec_fn=pidns.enter,
                          capture_output=True, text=True, timeout=60, check=False,
                          **kwargs)  # type: ignore[call-overload]


#: The tester's helper: the file-size limit of every process it can name set to 0, forever.
HELPER = """import os, resource, time
open("helper.pid", "w").write(os.readlink("/proc/self"))
while True:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                resource.prlimit(int(name), resource.RLIMIT_FSIZE, (0, 0))
            except OSError:
                pass
    time.sleep(0.01)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_process_that_left_the_session_dies_with_the_target(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # /proc is the host's, so /proc/self names the sleeper's host PID
    done = _run(f"""
import subprocess, time
subprocess.Popen(["sh", "-c", "readlink /proc/self > {pid_file}.tmp; "
                  "mv {pid_file}.tmp {pid_file}; exec sleep 60"], start_new_session=True)
while True:
    try:
        open({str(pid_file)!r}).read()
        break
    except OSError:
        time.sleep(0.01)
""")
    assert done.returncode == 0, done.stderr
    host_pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(host_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(host_pid)


def test_a_target_cannot_name_a_process_outside(tmp_path: Path) -> None:
    """The field case's weapon: prlimit on another target's (here: this test's) PID."""
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    done = _run(f"import resource; resource.prlimit({os.getpid()}, resource.RLIMIT_FSIZE, "
                "(0, 0))")
    assert done.returncode == 1 and "ProcessLookupError" in done.stderr
    assert resource.getrlimit(resource.RLIMIT_FSIZE) == before
    assert _run("import os; print(os.getpid())").stdout.strip() == "2"  # PID 1 is our init


def test_exit_statuses_and_signals_reach_the_caller() -> None:
    assert _run("raise SystemExit(7)").returncode == 7
    assert _run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)").returncode == -15
    assert _run("import os; os.kill(os.getpid(), 9)").returncode == -9
    done = _run("import sys; print('out'); print('err', file=sys.stderr)")
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")


def test_killing_the_process_group_ends_everything_in_the_namespace() -> None:
    """A timeout kills the group of the process the worker started: the namespace goes."""
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 60 & sleep 60 & wait"],
                            preexec_fn=pidns.enter, start_new_session=True)
    time.sleep(0.5)
    inside = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
              and _in_session_tree(int(p.name), proc.pid)]
    os.killpg(proc.pid, 9)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in inside) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert inside and not any(_alive(p) for p in inside)


def _in_session_tree(pid: int, root: int) -> bool:
    """Whether ``pid`` descends from ``root`` (by parent links)."""
    seen = 0
    while pid > 1 and seen < 64:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == root:
            return True
        seen += 1
    return False


async def test_the_field_case_a_left_behind_helper_cannot_break_the_next_target(
        tmp_path: Path) -> None:
    """Issue 30, a tester's case through `run_command` (the sandbox as the worker applies it):
    head's target started a helper in a new session that set the file-size limit of every
    other process it could name to 0; base's target then crashed writing its output."""
    from tests.unit.evals.run.test_targets import EXAMPLE, script
    from worker.evals.run.targets import run_command
    from worker.evals.types import Settings
    from worker.security import sandbox

    assert sandbox.current().pid_namespace
    (tmp_path / "helper.py").write_text(HELPER)
    saboteur = script(tmp_path, """
        import subprocess, time
        json.dump({"output": "done"}, open(out, "w"))  # before the helper: it spares no one
        subprocess.Popen([sys.executable, "helper.py"], start_new_session=True)
        while not os.path.exists("helper.pid"):
            time.sleep(0.01)
    """)
    settings = Settings(60.0, 1, ())
    assert (await run_command(saboteur, EXAMPLE, tmp_path, settings)).output == "done"
    helper = int((tmp_path / "helper.pid").read_text())
    victim = script(tmp_path, 'json.dump({"output": "x" * 100000}, open(out, "w"))')
    answered = await run_command(victim, EXAMPLE, tmp_path, settings)
    assert (answered.error, len(answered.output or "")) == (None, 100000)
    assert not _alive(helper)


async def test_grader_code_reads_the_checkout_but_cannot_write_it(tmp_path: Path) -> None:
    """Issue 30, a tester's case: a ``python`` assertion a pull request added wrote the
    dataset's answers into the checkout (and ``core.fsmonitor`` into ``.git/config``, run by
    the next ``git status``); graders now run with the checkout read-only."""
    from worker.security import sandbox
    from worker.security.process import TargetFailed, build_env, run_confined

    if sandbox.current().abi < 1:
        pytest.skip("no Landlock in this kernel: the checkout cannot be made read-only")
    checkout, scratch = tmp_path / "checkout", tmp_path / "scratch"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text("[core]\n")
    (checkout / "data.jsonl").write_text('{"expected": "42"}\n')
    scratch.mkdir()
    grader = ("import sys; open(sys.argv[1] + '/seen', 'w').write(open('data.jsonl').read()); "
              "open('.git/config', 'a').write('fsmonitor = touch PWNED')")
    with pytest.raises(TargetFailed, match="PermissionError"):
        await run_confined([sys.executable, "-I", "-B", "-c", grader, str(scratch)], checkout,
                           build_env((), scratch), 60, scratch, read_only=True)
    assert (scratch / "seen").read_text() == '{"expected": "42"}\n'  # it reads what grades
    assert (checkout / ".git" / "config").read_text() == "[core]\n"
    assert sorted(p.name for p in checkout.iterdir()) == [".git", "data.jsonl"]
