"""End target processes with the worker that started them, even a SIGKILLed one.

A target command (and a custom assertion) runs in a session and process group of its own, so
that a timeout kills all of it (``worker/security/process.py``). Without more, a worker that dies
(SIGKILL, the OOM killer) leaves them running, re-parented to PID 1, outside every timeout.
Two layers end them:

1. **Parent-death signal.** `preexec_dying_with_parent` makes the first process of a target
   ask the kernel for SIGKILL when the worker dies (``prctl(PR_SET_PDEATHSIG)``, prctl(2); set
   in the child before ``exec``, then a check that the worker had not died already). The
   worker's git commands get it too, so an orphaned fetch never races the next worker's on a
   mirror. The signal reaches only that first process: what it started itself lives on.
2. **A groups file per worker** (`GroupsFile`): ``<LLMGATE_WORKDIR>/processes/<pid>-<start>.json``
   lists the process groups the worker started and has not yet killed. At start-up a worker
   (a restarted one, or any on the same machine) calls `end_leftovers`: for every file whose
   worker is dead it kills what is left of those groups, then removes the file.

A pid is never taken for another's: a process is killed only when it is still in the recorded
group and session, of our user, and started no earlier than the group's leader did (start time
in clock ticks since boot, field 22 of ``/proc/<pid>/stat``, proc(5)); it is checked through a
pidfd opened before the check (pidfd_open(2)), so it cannot be swapped before the signal. A file
from another boot is stale (removed); one from another PID namespace (a container sharing the
volume) is left alone. Without ``/proc`` (not Linux) nothing is recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.security import landlock

__all__ = ["FOLDER", "GroupsFile", "Leftovers", "current", "end_leftovers", "ended", "install",
           "preexec_dying_with_parent", "start_ticks", "started", "take_over"]

log = logging.getLogger("llmgate.worker")

#: The folder of groups files under ``LLMGATE_WORKDIR``.
FOLDER = "processes"
_PR_SET_PDEATHSIG, _PR_GET_DUMPABLE = 1, 3
_PROC = Path("/proc")
#: Indexes in ``/proc/<pid>/stat`` after the command name: fields 5, 6 and 22 of proc(5).
_PGRP, _SESSION, _START = 2, 3, 19


def preexec_dying_with_parent() -> Callable[[], None]:
    """Return a ``preexec_fn`` that has the child SIGKILLed when this process dies.

    Call it in the parent just before starting the child (it loads libc here, so the forked
    child never runs the dynamic loader). The signal follows the thread that forks (prctl(2));
    the worker starts its children from its event loop's thread, which lives as long as it.
    """
    parent, kill = os.getpid(), int(signal.SIGKILL)
    landlock.prctl(_PR_GET_DUMPABLE)

    def preexec() -> None:
        landlock.prctl(_PR_SET_PDEATHSIG, kill)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), kill)

    return preexec


def _stat(pid: int | str) -> list[str] | None:
    try:
        return (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """Return when process ``pid`` started (clock ticks since boot), or None when it is gone."""
    fields = _stat(pid)
    return None if fields is None else int(fields[_START])


def _read(path: str) -> str:
    try:
        return (Path(path).read_text() if path.startswith("/proc/sys") else os.readlink(path)
                ).strip()
    except OSError:
        return ""


def _machine() -> dict[str, str]:
    """This boot and PID namespace: pids in a file from another mean nothing here."""
    return {"boot_id": _read("/proc/sys/kernel/random/boot_id"),
            "pid_ns": _read("/proc/self/ns/pid")}


class GroupsFile:
    """The process groups this worker started and has not killed yet, kept in a file.

    Each change rewrites the small file atomically (a temporary file, then ``os.replace``), so
    a worker killed at any moment leaves a whole file behind.
    """

    def __init__(self, folder: Path) -> None:
        """Keep the file in ``folder`` (created when missing).

        Raises:
            OSError: the folder cannot be created.
        """
        folder.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        self.owner = {"pid": pid, "start": start_ticks(pid) or 0}
        self.path = folder / f"{pid}-{self.owner['start']}.json"
        self.groups: dict[int, int] = {}
        self._machine = _machine()

    def add(self, pgid: int) -> None:
        """Record the process group ``pgid`` (its leader, pid ``pgid``, has just started)."""
        start = start_ticks(pgid)
        if start is not None:
            self.groups[pgid] = start
            self._write()

    def discard(self, pgid: int) -> None:
        """Forget the process group ``pgid`` (it was killed); remove the file when empty."""
        if self.groups.pop(pgid, None) is None:
            return
        if self.groups:
            self._write()
        else:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _write(self) -> None:
        document = {**self._machine, "owner": self.owner,
                    "groups": {str(k): v for k, v in self.groups.items()}}
        temporary = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # an operator may clean it
            temporary.write_text(json.dumps(document))
            os.replace(temporary, self.path)
        except OSError as err:  # a full disk must not fail the target; the kill still works
            log.warning("cannot record target process groups in %s: %s", self.path, err)


_current: list[GroupsFile] = []


def install(groups: GroupsFile | None) -> None:
    """Make ``groups`` the file `started` and `ended` write (the worker does this at start-up);
    ``None``: record nothing (``llmgate run``, tests)."""
    _current[:] = [] if groups is None else [groups]


def current() -> GroupsFile | None:
    """Return the installed `GroupsFile`, or None."""
    return _current[0] if _current else None


def started(pgid: int) -> None:
    """Record that the process group ``pgid`` was started (no-op without an installed file)."""
    if _current:
        _current[0].add(pgid)


def ended(pgid: int) -> None:
    """Record that the process group ``pgid`` was killed (no-op without an installed file)."""
    if _current:
        _current[0].discard(pgid)


def take_over(workdir: Path) -> Leftovers:
    """At a worker's start-up: end dead workers' leftovers, then record this worker's groups.

    Args:
        workdir: ``LLMGATE_WORKDIR``; the files live in its `FOLDER`.

    Raises:
        OSError: the folder cannot be created.
    """
    folder = workdir / FOLDER
    done = end_leftovers(folder)
    install(GroupsFile(folder))
    return done


@dataclass(frozen=True)
class Leftovers:
    """What `end_leftovers` did: pids killed, and the dead workers whose files it read."""

    killed: tuple[int, ...]
    workers: tuple[int, ...]


def end_leftovers(folder: Path) -> Leftovers:
    """Kill what is left of the process groups of dead workers recorded in ``folder``.

    Reads every ``*.json`` groups file (`GroupsFile`); a file of a live worker (same pid and
    start time) or of another PID namespace is left alone, one of another boot is removed
    unread. Never raises for a missing folder or an unreadable file.
    """
    here, killed, workers = _machine(), [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = _load(path)
        if record is None or record.pid_ns != here["pid_ns"]:
            continue
        if record.boot_id == here["boot_id"]:
            if _alive(record.pid, record.start):
                continue
            killed += _kill_groups(record.groups)
            workers.append(record.pid)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    _remove_torn(folder)
    return Leftovers(tuple(killed), tuple(workers))


@dataclass(frozen=True)
class _Record:
    """One groups file: where it was written, by which worker, and its groups."""

    boot_id: str
    pid_ns: str
    pid: int
    start: int
    groups: dict[int, int]


def _load(path: Path) -> _Record | None:
    """Read a groups file; None when it is unreadable or not one (it is then left alone)."""
    try:
        document = json.loads(path.read_text())
        owner, groups = document["owner"], document["groups"]
        return _Record(str(document["boot_id"]), str(document["pid_ns"]), int(owner["pid"]),
                       int(owner["start"]), {int(k): int(v) for k, v in groups.items()})
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _remove_torn(folder: Path) -> None:
    """Remove the temporary files (``<pid>-<start>.tmp``) dead workers were writing."""
    for path in folder.glob("*.tmp") if folder.is_dir() else []:
        pid, _, start = path.stem.partition("-")
        if pid.isdigit() and start.isdigit() and not _alive(int(pid), int(start)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _alive(pid: int, start: int) -> bool:
    return pid > 0 and start_ticks(pid) == start


def _matches(pid: int, groups: dict[int, int]) -> bool:
    """Is ``pid`` (still) in one of ``groups`` (pgid -> leader's start), ours, not older?"""
    fields = _stat(pid)
    if fields is None or fields[0] == "Z":
        return False
    pgid = int(fields[_PGRP])
    if pgid not in groups or int(fields[_SESSION]) != pgid:
        return False
    try:
        ours = (_PROC / str(pid)).stat().st_uid == os.getuid()
    except OSError:
        return False
    return ours and int(fields[_START]) >= groups[pgid]


def _pids() -> Iterator[int]:
    with contextlib.suppress(OSError):
        for entry in os.scandir(_PROC):
            if entry.name.isdigit():
                yield int(entry.name)


def _kill_groups(groups: dict[int, int]) -> list[int]:
    killed = []
    for pid in _pids():
        if pid != os.getpid() and _matches(pid, groups) and _kill_checked(pid, groups):
            killed.append(pid)
    return killed


def _kill_checked(pid: int, groups: dict[int, int]) -> bool:
    """SIGKILL ``pid`` through a pidfd, checking again once the pidfd pins the process."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfd_open (Linux < 5.3): a plain kill right after the check
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            return True
        return False
    try:
        if not _matches(pid, groups):
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(fd)
