"""Run one confined command: a scrubbed environment, the sandbox, a time limit, a capped log.

Command targets (worker/evals/run/targets.py), batch targets (worker/evals/run/batch.py) and
custom Python assertions (worker/evals/score/custom.py) all run code from the pull request
through `run_confined`. The command sees only the environment `build_env` makes (PATH,
LANG/LC_ALL, HOME and TMPDIR set to its scratch directory, and the names a config allows that
are not llmgate's own: worker/security/env_names.py:is_allowed_env_name); it runs in its own
session under `worker.security.sandbox` (rlimits, Landlock), and its whole process group is
killed on timeout and after exit. Of its stdout and stderr only the last `MAX_LOG_BYTES` are
kept, for the error text.

A command is finished when its process exits, not when the last process holding its output
pipe does (issue 31: a target that exited 0 but left ``sleep 600 &`` behind, holding its
stdout, was reported "timed out" on every example). Its output is read for `EXIT_GRACE_S` more;
whatever still holds the pipe then is ended with the process group, and the run says so
(`Finished.note`, `LEFT_RUNNING_NOTE`). In a PID namespace of its own
(worker/security/pidns.py) the kernel ends such processes the moment the command exits: the
pipe closes at once and there is nothing to end or to note.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from worker.security import sandbox, sandbox_procs, target_view
from worker.security.env_names import is_allowed_env_name

#: How much of the command's stdout/stderr (the tail) is kept for the error text, bytes.
MAX_LOG_BYTES = 4096
#: How long a command's output is still read after its process exits, seconds: output its
#: last writes left in the pipe arrives within it. Processes the command left behind that still
#: hold the pipe after it are ended with the command's process group (and waited for as long
#: again); a command's result never waits for them until its timeout.
EXIT_GRACE_S = 1.0
#: The note of a command that exited while processes it started still held its output.
LEFT_RUNNING_NOTE = "the target left processes running after it exited; they were ended"
#: The same, when one of them had left the command's process group (a new session, without a
#: PID namespace) and could not be ended by it.
LEFT_OUTSIDE_NOTE = ("the target left processes running after it exited; those of its process "
                     "group were ended, and one that left the group still held its output")


class TargetFailed(Exception):
    """The invocation failed; the message is the error text for the report."""


@dataclass(frozen=True)
class Finished:
    """How a command that succeeded (exited 0 in time) ended.

    Attributes:
        note: "" when nothing it started outlived it, else why its run has a note
            (`LEFT_RUNNING_NOTE`, `LEFT_OUTSIDE_NOTE`).
    """

    note: str = ""


def build_env(names: Iterable[str], home: Path) -> dict[str, str]:
    """Return the whole environment of a target: nothing of the worker's beyond the allowed.

    Args:
        names: environment variable names the config asks for (``settings.env``); each is
            copied when set and not one of llmgate's own (`is_allowed_env_name`).
        home: the command's scratch directory, its HOME and TMPDIR.

    PATH and LANG (default ``C.UTF-8``) and LC_ALL come from the worker;
    ``PYTHONDONTWRITEBYTECODE=1`` keeps a Python target from writing ``__pycache__/`` into the
    checkout (with ``llmgate run`` on the working tree, the user's own files).
    """
    env = {name: os.environ[name] for name in names
           if name in os.environ and is_allowed_env_name(name)}
    env["PATH"] = os.environ.get("PATH", os.defpath)
    env["LANG"] = os.environ.get("LANG", "C.UTF-8")
    if "LC_ALL" in os.environ:
        env["LC_ALL"] = os.environ["LC_ALL"]
    env["HOME"] = env["TMPDIR"] = str(home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


async def run_confined(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float,
                       scratch: Path, *, read_only: bool = False) -> Finished:
    """Run ``argv`` in ``cwd`` confined by the sandbox, and wait for it (at most ``timeout_s``).

    It is finished when its process exits (module doc): processes it leaves behind holding its
    output are ended `EXIT_GRACE_S` after that, and the result says so.

    Args:
        argv: the command and its arguments (never a shell).
        cwd: the directory it runs in (a checkout, or a view of one without the eval data:
            worker/security/target_view.py).
        env: its whole environment (see `build_env`).
        timeout_s: wall-clock limit, seconds.
        scratch: the directory it may write besides ``cwd`` (see `worker.security.sandbox`).
        read_only: ``cwd`` may only be read: ``scratch`` is all it may write (grader code
            run in the checkout itself, `worker.security.sandbox.Sandbox.confine`).

    Returns:
        `Finished`, with a note when it left processes behind.

    Raises:
        TargetFailed: it could not start (or the sandbox could not be applied), timed out
            (its processes are killed), was killed by a signal or exited non-zero; the message
            ends with the last `MAX_LOG_BYTES` of its output.
    """
    try:
        box = sandbox.current()
    except sandbox.SandboxError as exc:  # a malformed LLMGATE_SANDBOX* setting (CLI use)
        raise TargetFailed(f"cannot start {argv[0]!r}: {exc}") from None
    read_fd, write_fd = os.pipe()  # our own pipe: proc.wait() returns when the process exits
    try:
        proc = await _start(box, argv, cwd, env, scratch, read_only, write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    sandbox_procs.started(proc.pid)  # its group is ended by a next worker if this one dies
    try:
        tail, pipe = await _read_pipe(read_fd)
    except BaseException:
        _kill_group(proc.pid)
        raise
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            message = f"timed out after {timeout_s:g} s (its processes were killed)"
            raise TargetFailed(message) from None
        finished = await _end_leftovers(proc.pid, tail)
    finally:
        _kill_group(proc.pid)  # children left behind by a command that exited
        pipe.close()
    if proc.returncode:
        how = (f"was killed by signal {signal.Signals(-proc.returncode).name}"
               if proc.returncode < 0 else f"exited with status {proc.returncode}")
        text = tail.data.decode("utf-8", "replace").strip()
        raise TargetFailed(f"the command {how}{hidden_hint(cwd, text)}"
                           + (f"; last output:\n{text}" if text else ""))
    return finished


async def _start(box: sandbox.Sandbox, argv: list[str], cwd: Path, env: dict[str, str],
                 scratch: Path, read_only: bool, output_fd: int) -> asyncio.subprocess.Process:
    """Start ``argv`` confined, in a session of its own, writing stdout and stderr to
    ``output_fd``.

    Raises:
        TargetFailed: it could not start, or the sandbox could not be applied in the child.
    """
    try:
        with box.confine(cwd, scratch, read_only=read_only) as preexec:  # rlimits + Landlock
            return await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=output_fd, stderr=output_fd, start_new_session=True,
                preexec_fn=preexec,
            )
    except OSError as exc:
        raise TargetFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    except subprocess.SubprocessError:  # the sandbox could not be set up in the child
        raise TargetFailed(f"cannot start {argv[0]!r}: the sandbox could not be applied") \
            from None


async def _end_leftovers(pgid: int, tail: _Tail) -> Finished:
    """After the command exited: read its output for `EXIT_GRACE_S`; if something still holds
    the pipe then, kill the process group and wait as long again for the pipe to close."""
    if await _closes(tail, EXIT_GRACE_S):
        return Finished()
    _kill_group(pgid)
    if await _closes(tail, EXIT_GRACE_S):
        return Finished(LEFT_RUNNING_NOTE)
    return Finished(LEFT_OUTSIDE_NOTE)


async def _closes(tail: _Tail, within_s: float) -> bool:
    """Whether the output pipe reaches end of file within ``within_s`` seconds."""
    done, _ = await asyncio.wait({tail.closed}, timeout=within_s)
    return bool(done)


def hidden_hint(cwd: Path, output: str) -> str:
    """Return why a command that names a hidden file could not read it, or "".

    ``cwd`` is where it ran: in a view of the checkout (worker/security/target_view.py), a
    failing command whose ``output`` names a file the view leaves out (its path or file name)
    gets the reason, so the author of a target that reads, say, a judge's labels learns why.
    """
    view = target_view.view_of(cwd)
    named = [rel for rel in (view.hidden if view is not None else ())
             if rel in output or posixpath.basename(rel) in output]
    if not named:
        return ""
    return (f" (it names {', '.join(named[:3])}: eval data that grades targets, which llmgate "
            "leaves out of the copy of the checkout they run in; see docs/security-model.md)")


class _Tail(asyncio.Protocol):
    """The command's output pipe: keeps its last `MAX_LOG_BYTES` in ``data``; ``closed`` is
    done at end of file (every process holding the write end has closed it or ended)."""

    def __init__(self) -> None:
        self.data = b""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data = (self.data + data)[-MAX_LOG_BYTES:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _read_pipe(read_fd: int) -> tuple[_Tail, asyncio.ReadTransport]:
    """Start reading ``read_fd`` (the read end of the command's output pipe, then owned by the
    returned transport: close it when done)."""
    tail = _Tail()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: tail, pipe)
    except BaseException:
        pipe.close()
        raise
    return tail, transport


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    sandbox_procs.ended(pgid)
