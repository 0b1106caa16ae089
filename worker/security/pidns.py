"""Run a target as PID 1 of a PID namespace of its own, so nothing it starts outlives it.

A target runs in its own session and process group, killed after it exits or times out
(worker/security/process.py). A process it starts can leave both (``setsid``) and live on: a
tester's pull request left such a helper behind that lowered the file-size limit of base's
target processes with ``prlimit`` (its run, the next push's, any pull request's on that worker),
so base's examples crashed and a regression passed (issue 30). In a PID namespace
(pid_namespaces(7)):

- when the namespace's first process (the target) ends, the kernel SIGKILLs every process left
  in it, whatever session or group it moved to: nothing outlives the example;
- a process addresses other processes by PIDs of its own namespace, so ``kill``, ``prlimit``,
  ``setpriority`` or ``ptrace`` cannot name any process outside it (they fail with ``ESRCH``):
  a target cannot reach another target, base's or a concurrent one, nor the worker.

`enter` is called in the forked child before ``exec`` (a ``preexec_fn``). It unshares a PID
namespace (with a user namespace when the worker is not root: ``CLONE_NEWUSER`` needs no
privilege where unprivileged user namespaces are allowed; the worker's uid and gid are mapped
to themselves) and forks an init of ours (PID 1), which forks the target (PID 2, with the usual
signal rules) and reaps orphans until it ends. The process the worker started, the init and
the target each get SIGKILL when their parent dies (``PR_SET_PDEATHSIG``), so a timeout that
kills the process group, or a worker that dies, still ends all of it; the process the worker
started holds no descriptor and exits as the target did (the same status, or the same signal).

`available` says once per process whether the kernel allows it (a real start of ``true`` through
`enter`); where it does not (no user namespaces for a non-root worker, a seccomp profile that
refuses ``unshare``), targets run as before and `worker.security.sandbox.Sandbox.describe`
says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess

from worker.security import landlock

#: clone(2) flags.
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
_PR_SET_PDEATHSIG, _PR_GET_DUMPABLE = 1, 3
_MAX_FD = 1 << 16


def _flags() -> int:
    return CLONE_NEWPID | (0 if os.geteuid() == 0 else CLONE_NEWUSER)


def enter() -> None:
    """In a forked child before ``exec``: continue as the target of a new PID namespace.

    The calling process unshares the namespace and forks its first process (PID 1, an init of
    ours that reaps orphans), which forks the target (PID 2: it keeps the usual signal rules,
    which PID 1 does not have). Only the target returns. The init waits for the target, sends its
    wait status to the caller through a pipe and exits, which kills whatever is left in the
    namespace; the caller exits as the target did (the same status, or the same signal).

    Raises:
        OSError: ``unshare``, ``pipe`` or ``fork`` failed (the target must not start).
    """
    flags = _flags()
    uid, gid = os.getuid(), os.getgid()
    if landlock.unshare(flags) != 0:
        raise OSError("unshare(CLONE_NEWPID) failed")
    if flags & CLONE_NEWUSER:
        _map_ids(uid, gid)
    read, write = os.pipe()
    waiter = os.getpid()
    init = os.fork()
    if init:
        _stand_in(init, read)
    _die_with(waiter)
    os.close(read)
    init_pid = os.getpid()
    target = os.fork()
    if target:
        _reap_until(target, write)
    _die_with(init_pid)
    os.close(write)


def _die_with(parent: int) -> None:
    """Have the calling process SIGKILLed when ``parent`` (its parent) dies."""
    landlock.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _map_ids(uid: int, gid: int) -> None:
    """Map the worker's uid and gid to themselves in the new user namespace
    (user_namespaces(7): ``setgroups`` must be denied before an unprivileged ``gid_map``)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _keep_only(fd: int) -> None:
    os.closerange(0, fd)
    os.closerange(fd + 1, _MAX_FD)


def _reap_until(target: int, write: int) -> None:
    """PID 1: reap every child until the target ends, send its wait status, exit (never
    returns; the kernel then kills the rest of the namespace)."""
    _keep_only(write)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == target:
            os.write(write, str(status).encode())
            os._exit(0)


def _stand_in(init: int, read: int) -> None:
    """The process the worker started: wait for the namespace's init, exit as the target did
    (never returns). Without a status from the init (it was killed), die by SIGKILL."""
    _keep_only(read)
    raw = os.read(read, 32)  # the init's message, or end of file when it died first
    # Not waiting for the init to be reaped: a PID namespace's teardown takes milliseconds
    # (an RCU grace period) that the target's caller need not wait for; the init dies with
    # this process (its parent-death signal) if it has not exited already.
    del init
    status = int(raw) if raw.isdigit() else None
    if status is None or os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status) if status is not None else int(signal.SIGKILL)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those cannot be caught anyway
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


@functools.cache
def available() -> bool:
    """Whether targets can run in PID namespaces here (a real start of ``true``, once)."""
    true = shutil.which("true")
    if true is None or not os.path.exists("/proc/self/ns/pid"):
        return False
    landlock.prctl(_PR_GET_DUMPABLE)  # loads libc here, never in the forked child
    try:
        done = subprocess.run([true], preexec_fn=enter, capture_output=True,  # noqa: PLW1509
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
