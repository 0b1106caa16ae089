"""Private scratch folders in the temporary directory, named after the process that owns them.

A target's scratch folder (``llmgate-target-...``: its input and output files, its HOME and
TMPDIR; worker/evals/run/targets.py) and a target's view of its checkout (``llmgate-view-...``,
`worker.security.target_view`) are removed by their process when done with; a process killed
mid-run (SIGKILL, the OOM killer) leaves them in the temporary directory. So `make` names each
folder after its owner, ``<prefix><pid>-<start>-<pid namespace>-<random>`` (``start``: clock
ticks since boot, field 22 of ``/proc/<pid>/stat``, proc(5); the PID namespace's inode number,
from ``/proc/self/ns/pid``), and `remove_stale`, called by a worker at start-up
(`worker.runtime.hardening`) and before a process's first view, removes the folders whose owner
is gone.

A folder is removed only when all of these hold: its name has one of the prefixes and names an
owner; it is a directory, not a symbolic link (never followed); it belongs to this process's
user; its owner was in this PID namespace and no process with its pid and start time runs now (a
pid taken by another process since does not keep it). A folder of a live process (another
worker on the same machine, ``llmgate run``), of another PID namespace (a container sharing the
folder) or of an unknown owner stays. Folders named by an older llmgate (``llmgate-view-<pid>-
<random>``: the pid only) are removed when no process has that pid; an older
``llmgate-target-<random>`` names no owner and stays.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from worker.checkout import remove_tree
from worker.security.sandbox_procs import start_ticks

#: Prefixes of the scratch folders: a target's (input, output, HOME, TMPDIR) and a view's.
TARGET_PREFIX = "llmgate-target-"
VIEW_PREFIX = "llmgate-view-"
PREFIXES = (TARGET_PREFIX, VIEW_PREFIX)


@dataclass(frozen=True)
class Owner:
    """The process a folder's name names: ``start`` and ``pid_ns`` are None in old names."""

    pid: int
    start: int | None = None
    pid_ns: int | None = None


def _pid_ns() -> int:
    """The inode number of this process's PID namespace (0 when ``/proc`` does not say)."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return 0
    digits = link.rpartition("[")[2].rstrip("]")
    return int(digits) if digits.isdigit() else 0


def owner_tag() -> str:
    """Return ``<pid>-<start>-<pid namespace>-``, this process's part of a folder's name."""
    pid = os.getpid()
    return f"{pid}-{start_ticks(pid) or 0}-{_pid_ns()}-"


def make(prefix: str) -> Path:
    """Create a private (mode 0700) scratch folder ``<tmp>/<prefix><owner tag><random>``.

    Raises:
        OSError: the temporary directory cannot be written.
    """
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}"))


def owner_of(name: str, prefixes: Iterable[str] = PREFIXES) -> Owner | None:
    """Return the owner a folder's ``name`` names, or None (not ours, or no owner named)."""
    for prefix in prefixes:
        if name.startswith(prefix):
            parts = name[len(prefix):].split("-", 3)
            if len(parts) == 4 and all(p.isdigit() for p in parts[:3]):
                return Owner(int(parts[0]), int(parts[1]), int(parts[2]))
            if len(parts) == 2 and parts[0].isdigit() and prefix == VIEW_PREFIX:
                return Owner(int(parts[0]))  # an older view's name: the pid only
    return None


def owner_alive(owner: Owner) -> bool:
    """Return whether ``owner`` may still run (True whenever that cannot be ruled out)."""
    if owner.pid <= 0:
        return True
    if owner.start is not None and start_ticks(os.getpid()) is not None:
        if owner.pid_ns != _pid_ns():
            return True  # another PID namespace: its pids mean nothing here
        return start_ticks(owner.pid) == owner.start
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def remove_stale(prefixes: Iterable[str] = PREFIXES, folder: Path | None = None) -> list[Path]:
    """Remove the scratch folders of dead owners (see the module doc) from ``folder`` (the
    temporary directory when None); return those removed. Never raises."""
    chosen = tuple(prefixes)
    root = Path(tempfile.gettempdir()) if folder is None else folder
    removed = []
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            owner = owner_of(entry.name, chosen)
            if owner is None or not _ours(entry) or owner_alive(owner):
                continue
            path = Path(entry.path)
            remove_tree(path)
            if not os.path.lexists(path):
                removed.append(path)
    return removed


def _ours(entry: os.DirEntry[str]) -> bool:
    """A directory (not a symbolic link to one) of this process's user."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
