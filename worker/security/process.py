"""Run one confined command: a scrubbed environment, the sandbox, a time limit, a capped log.

Command targets (worker/evals/run/targets.py), batch targets (worker/evals/run/batch.py) and
custom Python assertions (worker/evals/score/custom.py) all run code from the pull request
through `run_confined`. The command sees only the environment `build_env` makes (PATH,
LANG/LC_ALL, HOME and TMPDIR set to its scratch directory, and the names a config allows that
are not llmgate's own: `is_allowed_env_name`); it runs in its own session under
`worker.security.sandbox` (rlimits, Landlock), and its whole process group is killed on
timeout and after exit. Of its stdout and stderr only the last `MAX_LOG_BYTES` are kept, for
the error text.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import re
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

from worker.security import sandbox, sandbox_procs, target_view

#: How much of the command's stdout/stderr (the tail) is kept for the error text, bytes.
MAX_LOG_BYTES = 4096
#: Worker variables a target never sees, whatever ``settings.env`` says: the App's key and id,
#: the Redis URL and llmgate's own settings (see worker/runtime/settings.py).
FORBIDDEN_ENV_PREFIXES = ("GITHUB_", "LLMGATE_", "REDIS_", "ARQ_")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TargetFailed(Exception):
    """The invocation failed; the message is the error text for the report."""


def is_allowed_env_name(name: str) -> bool:
    """Return whether a config may pass the environment variable ``name`` to its targets."""
    return bool(_ENV_NAME.match(name)) and not name.upper().startswith(FORBIDDEN_ENV_PREFIXES)


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
                       scratch: Path, *, read_only: bool = False) -> None:
    """Run ``argv`` in ``cwd`` confined by the sandbox, and wait for it (at most ``timeout_s``).

    Args:
        argv: the command and its arguments (never a shell).
        cwd: the directory it runs in (a checkout, or a view of one without the eval data:
            worker/security/target_view.py).
        env: its whole environment (see `build_env`).
        timeout_s: wall-clock limit, seconds.
        scratch: the directory it may write besides ``cwd`` (see `worker.security.sandbox`).
        read_only: ``cwd`` may only be read: ``scratch`` is all it may write (grader code
            run in the checkout itself, `worker.security.sandbox.Sandbox.confine`).

    Raises:
        TargetFailed: it could not start (or the sandbox could not be applied), timed out
            (its processes are killed), was killed by a signal or exited non-zero; the message
            ends with the last `MAX_LOG_BYTES` of its output.
    """
    try:
        box = sandbox.current()
    except sandbox.SandboxError as exc:  # a malformed LLMGATE_SANDBOX* setting (CLI use)
        raise TargetFailed(f"cannot start {argv[0]!r}: {exc}") from None
    try:
        with box.confine(cwd, scratch, read_only=read_only) as preexec:  # rlimits + Landlock
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True, preexec_fn=preexec,
            )
    except OSError as exc:
        raise TargetFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    except subprocess.SubprocessError:  # the sandbox could not be set up in the child
        raise TargetFailed(f"cannot start {argv[0]!r}: the sandbox could not be applied") \
            from None
    sandbox_procs.started(proc.pid)  # its group is ended by a next worker if this one dies
    try:
        log = await asyncio.wait_for(_tail_and_wait(proc), timeout_s)
    except TimeoutError:
        _kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        message = f"timed out after {timeout_s:g} s (its processes were killed)"
        raise TargetFailed(message) from None
    finally:
        _kill_group(proc.pid)  # children left behind by a command that exited
    if proc.returncode:
        how = (f"was killed by signal {signal.Signals(-proc.returncode).name}"
               if proc.returncode < 0 else f"exited with status {proc.returncode}")
        tail = log.decode("utf-8", "replace").strip()
        raise TargetFailed(f"the command {how}{hidden_hint(cwd, tail)}"
                           + (f"; last output:\n{tail}" if tail else ""))


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


async def _tail_and_wait(proc: asyncio.subprocess.Process) -> bytes:
    """Read the command's output to EOF keeping the last `MAX_LOG_BYTES`, then wait for it."""
    tail = b""
    if proc.stdout is not None:
        while chunk := await proc.stdout.read(65536):
            tail = (tail + chunk)[-MAX_LOG_BYTES:]
    await proc.wait()
    return tail


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    sandbox_procs.ended(pgid)
