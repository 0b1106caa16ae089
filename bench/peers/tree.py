"""Measure one command as a whole process tree: wall time, CPU, peak memory, what outlives it.

The bench process makes itself a child subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``), so
a process the command leaves behind is re-parented to the bench instead of to init. That is what
makes the CPU figure whole: ``getrusage(RUSAGE_CHILDREN)`` counts a process once it is reaped,
and the bench reaps the command and then every process the command left, after they end. A
process that is still running when the command exits is counted as having outlived it; the bench
waits for it (at most `LINGER_LIMIT_S`, then kills it) and reports how long it lingered.

Memory is the peak of the tree's resident set sizes summed at each sample (psutil, every
`SAMPLE_INTERVAL_S`), not a cgroup's figure: the machine's memory cgroup is not the bench's
own. A sum of RSS counts pages shared between processes (libraries) once per process, and a
peak shorter than the interval can be missed; a child caught between fork and exec (its command
line still its parent's: it shares the parent's pages) is not counted again. The sampler also
sums each process's last sampled CPU time: a lower bound, printed beside the reaped figure.

The bench's own services (the fake provider, redis-server) are not part of any command's tree:
every process that is already this process's child when a command starts is left out. The
sampler costs the bench about 1 ms of CPU per sample (one scan of /proc).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

#: ``PR_SET_CHILD_SUBREAPER`` from <linux/prctl.h>.
PR_SET_CHILD_SUBREAPER = 36
#: Seconds between two samples of the tree's memory and CPU.
SAMPLE_INTERVAL_S = 0.1
#: How long processes left behind by a command may run on before they are killed, seconds.
LINGER_LIMIT_S = 60.0
#: Longest a measured command may run, seconds.
COMMAND_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class TreeRun:
    """One command measured as a process tree.

    Attributes:
        exit_code: the command's exit status (negative: killed by that signal).
        wall_s: seconds from start until the command's own process exited.
        cpu_s: user + system CPU seconds of every process of the tree, reaped
            (``RUSAGE_CHILDREN``), including processes that outlived the command.
        sampled_cpu_s: the sum of each process's last sampled CPU seconds (a lower bound).
        peak_rss_bytes: the highest sum of the tree's resident set sizes at one sample.
        processes: distinct processes the sampler saw in the tree.
        outlived: processes of the tree still running when the command exited.
        linger_s: seconds from the command's exit until its last process ended (0 if none).
        killed: processes killed after `LINGER_LIMIT_S`.
        labels: ``(label, count)`` of the processes seen (see `label`), sorted.
    """

    exit_code: int
    wall_s: float
    cpu_s: float
    sampled_cpu_s: float
    peak_rss_bytes: int
    processes: int
    outlived: int
    linger_s: float
    killed: int
    labels: tuple[tuple[str, int], ...] = ()


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans; return whether it worked
    (False off Linux: the CPU of processes that outlive a command is then not counted)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def descendants(exclude: frozenset[int]) -> list[psutil.Process]:
    """Return this process's descendants (zombies included), less the pids in ``exclude``.

    One scan of /proc (about 1 ms with 100 processes): the bench's services, which are
    excluded, start no processes of their own (redis-server runs without snapshots).
    """
    try:
        return [p for p in psutil.Process().children(recursive=True) if p.pid not in exclude]
    except psutil.Error:
        return []


def label(cmdline: Sequence[str]) -> str:
    """Return a short name of a process from its command line: a Python ``-m`` module's name,
    an interpreter's script (``python3 /venv/bin/llmgate`` is ``llmgate``), else the
    program's file name. (A child seen only between fork and exec is named ``<parent>
    (fork)``.)"""
    if not cmdline:
        return "?"
    if "-m" in cmdline[:-1]:
        return cmdline[cmdline.index("-m") + 1]
    program = Path(cmdline[0]).name
    interpreter = program.startswith(("python", "node")) and len(cmdline) > 1
    return Path(cmdline[1]).name if interpreter and not cmdline[1].startswith("-") else program


def _running(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            continue
    return alive


class _Sampler(threading.Thread):
    """Sample the tree's summed RSS (keeping the peak) and each process's CPU seconds."""

    def __init__(self, exclude: frozenset[int], interval_s: float) -> None:
        super().__init__(daemon=True)
        self.exclude, self.interval_s = exclude, interval_s
        self.done = threading.Event()
        self.peak_rss_bytes = 0
        self.cpu_s: dict[tuple[int, float], float] = {}
        self.labels: dict[tuple[int, float], str] = {}

    def run(self) -> None:
        while True:
            self.sample()
            if self.done.wait(self.interval_s):
                return

    def sample(self) -> None:
        seen: dict[int, tuple[int, int, tuple[str, ...]]] = {}  # pid: (ppid, rss, cmdline)
        keys: dict[int, tuple[int, float]] = {}
        for proc in descendants(self.exclude):
            try:
                with proc.oneshot():
                    seen[proc.pid] = (proc.ppid(), proc.memory_info().rss, tuple(proc.cmdline()))
                    times = proc.cpu_times()
                    keys[proc.pid] = (proc.pid, proc.create_time())
            except psutil.Error:  # gone, or a zombie
                continue
            self.cpu_s[keys[proc.pid]] = times.user + times.system
        total = 0
        for pid, (ppid, rss, cmdline) in seen.items():
            forked = pre_exec_fork(ppid, cmdline, seen)
            total += 0 if forked else rss
            if cmdline:  # the last command line seen wins (none while a process exits)
                self.labels[keys[pid]] = label(cmdline) + (" (fork)" if forked else "")
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)

    def stop(self) -> None:
        self.done.set()
        self.join()


def pre_exec_fork(ppid: int, cmdline: tuple[str, ...],
            seen: dict[int, tuple[int, int, tuple[str, ...]]]) -> bool:
    """Whether a process is its parent's fork that has not exec'd yet (same command line): it
    shares the parent's pages, so its RSS is not added again (a subprocess's moment between
    fork and exec would otherwise count the parent twice)."""
    return ppid in seen and seen[ppid][2] == cmdline


def _reap_rest(exclude: frozenset[int], limit_s: float) -> tuple[float, int]:
    """Reap the processes a command left (re-parented to us) as they end; kill them after
    ``limit_s``. Return (seconds until the last ended, processes killed)."""
    started, killed = time.monotonic(), 0
    while True:
        for child in psutil.Process().children():
            if child.pid not in exclude:
                with contextlib.suppress(ChildProcessError):  # not ours yet, or reaped
                    os.waitpid(child.pid, os.WNOHANG)
        left = descendants(exclude)
        if not left:
            return time.monotonic() - started, killed
        if time.monotonic() - started > limit_s:
            for proc in _running(left):
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGKILL)
                    killed += 1
        time.sleep(0.01)


def _cpu_of(usage: resource.struct_rusage) -> float:
    return float(usage.ru_utime + usage.ru_stime)


def measure(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: IO[bytes],
            interval_s: float = SAMPLE_INTERVAL_S,
            timeout_s: float = COMMAND_TIMEOUT_S) -> TreeRun:
    """Run ``argv`` to its end and measure its whole process tree (see the module docstring).

    Args:
        argv: the command; its stdout and stderr go to ``log``, its stdin is empty.
        cwd: its working directory.
        env: its whole environment.
        log: an open binary file for its output.
        interval_s: seconds between samples.
        timeout_s: longest the command may run, seconds.

    Raises:
        subprocess.TimeoutExpired: the command ran longer than ``timeout_s`` (its process
            group is killed first).
    """
    exclude = frozenset(p.pid for p in psutil.Process().children())  # the bench's services
    before = _cpu_of(resource.getrusage(resource.RUSAGE_CHILDREN))
    sampler = _Sampler(exclude, interval_s)
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    sampler.start()
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        sampler.stop()
        raise
    wall_s = time.perf_counter() - started
    outlived = len(_running(descendants(exclude)))
    linger_s, killed = _reap_rest(exclude, LINGER_LIMIT_S)
    sampler.stop()
    cpu_s = _cpu_of(resource.getrusage(resource.RUSAGE_CHILDREN)) - before
    counts = collections.Counter(sampler.labels.get(key, "?") for key in sampler.cpu_s)
    return TreeRun(code, wall_s, cpu_s, sum(sampler.cpu_s.values()), sampler.peak_rss_bytes,
                   len(sampler.cpu_s), outlived, linger_s if outlived else 0.0, killed,
                   tuple(sorted(counts.items())))
