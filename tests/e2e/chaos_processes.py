"""The processes under a chaos test: a restartable ``redis-server``, and reading ``/proc``.

`RedisProcess` keeps its port and folder across restarts, so clients (the web process, the
workers) see an outage and then the same address again; with AOF off it comes back empty.
`descendants`, `parent_of` and `ChaosStack.processes_under` (by working directory) find a
worker's target processes and where they went after the worker died.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import free_port, wait_for_port
from worker.security.target_view import VIEW_PREFIX


@dataclass(frozen=True)
class RedisOptions:
    """How a ``redis-server`` of the stack runs.

    Attributes:
        appendonly: AOF persistence (``appendfsync everysec``); off: nothing survives a restart.
        maxmemory: e.g. ``"4mb"``; None for no limit.
        policy: ``maxmemory-policy`` (``noeviction``, ``volatile-lru``, ``allkeys-lru``, ...).
        config_disabled: rename ``CONFIG`` away, as managed Redis services do.
    """

    appendonly: bool = False
    maxmemory: str | None = None
    policy: str = "noeviction"
    config_disabled: bool = False


class RedisProcess:
    """One ``redis-server`` on a fixed loopback port, so it can be restarted in place."""

    def __init__(self, workdir: Path, name: str, options: RedisOptions) -> None:
        self.workdir, self.name, self.options = workdir / name, name, options
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts: list[tuple[float, float]] = []  # (down at, up at), Unix seconds

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (same port, same folder) and wait until it accepts connections."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        o = self.options
        cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--dir", str(self.workdir), "--appendonly", "yes" if o.appendonly else "no",
               "--appendfsync", "everysec", "--maxmemory-policy", o.policy]
        if o.maxmemory:
            cmd += ["--maxmemory", o.maxmemory]
        if o.config_disabled:
            cmd += ["--rename-command", "CONFIG", ""]
        log = (self.workdir.parent / f"{self.name}.log").open("ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(self.port)

    def stop(self, hard: bool = False) -> None:
        """SIGTERM (a clean shutdown: AOF flushed) or SIGKILL the server; wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        self.proc.wait(timeout=30)

    def restart(self, down_s: float = 1.0, hard: bool = False) -> None:
        """Stop the server, keep it down ``down_s`` seconds, start it again on the same port."""
        down = time.time()
        self.stop(hard)
        time.sleep(down_s)
        self.start()
        self.restarts.append((down, time.time()))

    def client(self) -> Any:
        """A synchronous ``redis.Redis`` client on it (the caller closes it)."""
        import redis

        return redis.Redis(port=self.port, socket_timeout=5)


def pids() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def cwd_inside(pid: int, folder: Path) -> bool:
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return cwd == folder or folder in cwd.parents


def in_target_view(pid: int) -> bool:
    """Whether the working directory of ``pid`` is a target's copy of its checkout
    (``$TMPDIR/llmgate-view-*/...``: worker/security/target_view.py)."""
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return any(part.startswith(VIEW_PREFIX) for part in cwd.parts)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    """Pids of every live descendant of process ``pid``."""
    parents = {child: int(fields[1]) for child in pids() if (fields := _stat(child))}
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [c for c, p in parents.items() if p == current]
        found += kids
        frontier += kids
    return found


def parent_of(pid: int) -> int | None:
    """The parent pid of process ``pid``, or None when it is gone."""
    fields = _stat(pid)
    return None if fields is None else int(fields[1])
