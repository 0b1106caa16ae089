"""Confine target commands and harden the worker process.

A target command is code from the pull request. Besides the scrubbed environment of
``worker/evals/run/targets.py`` it runs under:

- **resource limits** (``setrlimit``): CPU seconds, address space, size of any file it writes,
  processes of its user, open files, and no core dumps (`Limits`);
- **no capabilities**: the bounding set is emptied, so even under a root worker it is only uid 0;
- **death with the worker**: a parent-death signal, and a file of the process groups started,
  whose leftovers the next worker ends (``worker/security/sandbox_procs.py``);
- a **PID namespace of its own** where the kernel allows it (``worker/security/pidns.py``):
  what it starts dies with it, even in a new session, and it cannot name any process outside
  (no ``kill``, ``prlimit`` or ``setpriority`` of another target or of the worker);
- a **Landlock sandbox** (``worker/security/landlock.py``; Linux 5.13+, no privileges needed): it
  may read and run files only under the system directories, the directories of ``PATH`` and the
  Python installation; read and write only its checkout and its scratch directory (its
  ``HOME``/``TMPDIR``); in a view of a checkout (worker/security/target_view.py) only the view,
  the originals it links to and the scratch directory, and no read rule covers the checkout
  or a hidden file; it cannot open the worker's other checkouts, mirrors or key files, cannot
  read ``/proc/<worker>/environ`` or ``mem`` (Landlock denies ptrace-style access outside the
  sandbox), cannot signal the worker (ABI 6), and cannot connect to the Redis port (ABI 4; or, with
  ``LLMGATE_SANDBOX_TCP_PORTS``, to anything but the listed ports).

The worker itself calls `harden_worker` at start-up: ``PR_SET_DUMPABLE=0`` makes its
``/proc/<pid>/environ``, ``mem`` and ``maps`` owned by root and refuses ptrace to other
processes of the same (non-root) user, so a program the worker started cannot read the App
key or a token from its memory even without Landlock; and no core file is ever written.

Settings (environment, read once): ``LLMGATE_SANDBOX`` ``auto`` (Landlock when the kernel has
it; default), ``required`` (refuse to run targets without it) or ``off``;
``LLMGATE_SANDBOX_READ_PATHS`` extra read-only directories, ``:``-separated;
``LLMGATE_SANDBOX_WRITE_PATHS`` extra writable files or directories (e.g. a shared model cache;
a file must exist when the target starts), ``:``-separated;
``LLMGATE_SANDBOX_TCP_PORTS`` the only TCP ports targets may connect to (default: every port but
the Redis port of ``REDIS_URL``); ``LLMGATE_TARGET_CPU_S``, ``LLMGATE_TARGET_MEMORY_MB``,
``LLMGATE_TARGET_FILE_MB``, ``LLMGATE_TARGET_PROCESSES`` (see `Limits`; both are parsed in
``worker/security/sandbox_policy.py``). Files a config refers to are read by
``worker/evals/config/files.py``.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from worker.security import landlock, pidns, sandbox_procs, target_view
from worker.security.sandbox_policy import Limits, Policy, SandboxError

__all__ = ["Limits", "Policy", "Sandbox", "SandboxError", "apply_limits", "current",
           "drop_capabilities", "harden_worker", "install"]

#: Device files targets may write. Not /dev/shm: other programs' shared memory lives there.
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_PR_CAPBSET_DROP = 24


def apply_limits(triples: list[tuple[int, int, int]]) -> None:
    """Lower the calling process's limits (never above a hard limit it already has)."""
    for which, soft, hard in triples:
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
        resource.setrlimit(which, (min(soft, hard), hard))


class Sandbox:
    """Applies `Limits` and the Landlock `Policy` to target commands (see the module doc)."""

    def __init__(self, limits: Limits, policy: Policy) -> None:
        """Use ``limits`` and ``policy``; Landlock is probed once, here.

        Raises:
            SandboxError: ``policy.mode`` is ``required`` and Landlock is unavailable.
        """
        self.limits = limits
        self.policy = policy
        self.abi = landlock.abi_version() if policy.mode != "off" else 0
        if policy.mode == "required" and self.abi < 1:
            raise SandboxError("LLMGATE_SANDBOX=required but this kernel has no Landlock "
                               "(Linux 5.13+ with landlock in the lsm= boot list)")
        self._net_fd: int | None = None
        #: Whether each target runs in a PID namespace of its own (worker/security/pidns.py).
        self.pid_namespace = policy.mode != "off" and pidns.available()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Sandbox:
        """Build from the environment (see the module doc).

        Raises:
            SandboxError: a malformed setting, or a required sandbox that is unavailable.
        """
        return cls(Limits.from_env(environ), Policy.from_env(environ))

    def describe(self) -> str:
        """Return one line for the start-up log: what confines targets on this machine."""
        if self.abi < 1:
            why = "off" if self.policy.mode == "off" else "no Landlock in this kernel"
            return (f"targets run with rlimits and a scrubbed environment only ({why}): they "
                    "can read the worker's files; run the worker as a dedicated user")
        parts = ["filesystem"] + (["TCP connect"] if self.abi >= 4 else []) \
            + (["signals and abstract sockets"] if self.abi >= 6 else [])
        pids = ("each in a PID namespace of its own" if self.pid_namespace else
                "without PID namespaces (refused here): a process a target starts in a new "
                "session can outlive it")
        return (f"targets are sandboxed with Landlock ABI {self.abi} ({', '.join(parts)}) "
                f"and rlimits, {pids}")

    def readable_by_targets(self, path: Path) -> bool:
        """Return whether a target could read ``path`` (e.g. the App's key file) under Landlock."""
        if self.abi < 1:
            return True
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip("/") + "/")
                   for root in map(os.path.realpath, self.policy.read_paths))

    @contextlib.contextmanager
    def confine(self, cwd: Path, scratch: Path, *,
                read_only: bool = False) -> Iterator[Callable[[], None]]:
        """Yield a ``preexec_fn`` that confines a child to ``cwd`` and ``scratch``.

        ``read_only``: ``cwd`` may only be read (and run), and ``LLMGATE_SANDBOX_WRITE_PATHS``
        is not granted: for grader code (``python`` assertions and metrics) that runs in the
        checkout itself, so that it can neither change what the worker reads next (``.git/
        config``) nor leave files for a target's copy of the checkout (issue 30, a tester's
        case: a head-added assertion wrote the answers where the next target read them).

        Use it for one ``create_subprocess_exec``; the rulesets are closed on exit (the child
        has its own copy once it has started).

        Raises:
            landlock.LandlockError: the kernel refused a rule (reported as a failed start).
        """
        triples = self.limits.rlimits()
        landlock.prctl(_PR_GET_DUMPABLE)  # loads libc here, never in the forked child
        view = target_view.view_of(cwd)
        fs_fd = self._fs_ruleset(cwd, scratch, view, read_only) if self.abi >= 1 else None
        layers = [fd for fd in (self._net_ruleset(), fs_fd) if fd is not None]
        die_with_worker = sandbox_procs.preexec_dying_with_parent()
        own_pids = self.pid_namespace

        def preexec() -> None:
            die_with_worker()
            apply_limits(triples)
            if own_pids:  # before dropping capabilities: a root worker needs CAP_SYS_ADMIN
                pidns.enter()
            drop_capabilities()
            if layers:
                landlock.restrict_self(layers)
            else:
                landlock.no_new_privs()

        try:
            yield preexec
        finally:
            if fs_fd is not None:
                os.close(fs_fd)

    def close(self) -> None:
        """Close the TCP ruleset this sandbox built, if any (it is rebuilt on next use)."""
        if self._net_fd is not None:
            os.close(self._net_fd)
            self._net_fd = None

    def _net_ruleset(self) -> int | None:
        """The TCP (and scope) layer, built once: it is the same for every target."""
        if self._net_fd is not None or self.abi < 4:
            return self._net_fd
        scoped = (landlock.SCOPE_ABSTRACT_UNIX_SOCKET | landlock.SCOPE_SIGNAL) \
            if self.abi >= 6 else 0
        fd = landlock.create_ruleset(net=landlock.NET_CONNECT_TCP, scoped=scoped)
        allowed = self.policy.allowed_ports
        ports = allowed if allowed is not None else \
            (p for p in range(1, 65536) if p not in self.policy.blocked_ports)
        landlock.allow_tcp_ports(fd, ports)  # ~65k rules take about 0.25 s, once per process
        self._net_fd = fd
        return fd

    def _fs_ruleset(self, cwd: Path, scratch: Path, view: target_view.TargetView | None,
                    read_only: bool = False) -> int:
        """The filesystem layer: no read rule covers ``cwd``'s parent (the other checkouts)
        nor, in a view, the checkout it copies or a hidden file; a view's linked entries are
        granted like ``cwd`` (worker/security/target_view.py); ``read_only``: ``cwd`` is only
        read and the extra write paths are not granted."""
        handled = landlock.handled_fs_rights(self.abi)
        fd = landlock.create_ruleset(fs=handled)
        try:
            guarded = [os.path.realpath(cwd.parent),
                       *(str(p) for p in (view.denied if view is not None else ()))]
            for path in self.policy.read_paths:
                real = os.path.realpath(path).rstrip("/")
                if not any(g == real or g.startswith(real + "/") for g in guarded):
                    landlock.allow_path(fd, path, landlock.READ_RIGHTS)
            for path in WRITABLE_DEVICES:
                landlock.allow_path(fd, path, landlock.FILE_RIGHTS & handled & ~landlock.EXECUTE)
            linked = [str(p) for p in (view.linked if view is not None else ())]
            if read_only:
                landlock.allow_path(fd, str(cwd), landlock.READ_RIGHTS)
                landlock.allow_path(fd, str(scratch), handled)
            else:
                for path in (str(cwd), str(scratch), *self.policy.write_paths, *linked):
                    landlock.allow_path(fd, path, handled)
        except BaseException:
            os.close(fd)
            raise
        return fd


_current: list[Sandbox] = []
_from_env: dict[tuple[str, ...], Sandbox] = {}
_SETTING_GROUPS = ("SANDBOX", "TARGET")  # LLMGATE_SANDBOX*, LLMGATE_TARGET_*


def current() -> Sandbox:
    """Return the process's sandbox: the one `install` set, else one built from ``os.environ``.

    Without `install` (``llmgate run``, tests) the sandbox follows the environment: it is built
    again when a sandbox setting, ``PATH`` or ``REDIS_URL`` changes.

    Raises:
        SandboxError: the environment's sandbox settings are malformed.
    """
    if _current:
        return _current[0]
    key = tuple(f"{k}={v}" for k, v in sorted(os.environ.items())
                if k.split("_")[:2][-1] in _SETTING_GROUPS and k.startswith("LLMGATE")
                or k in ("PATH", "REDIS_URL"))
    if key not in _from_env:
        fresh = Sandbox.from_env(os.environ)
        for old in _from_env.values():
            old.close()
        _from_env.clear()
        _from_env[key] = fresh
    return _from_env[key]


def install(sandbox: Sandbox | None) -> None:
    """Make ``sandbox`` the one `current` returns (the worker does this at start-up).

    ``None`` goes back to following the environment.
    """
    _current[:] = [] if sandbox is None else [sandbox]


def drop_capabilities() -> None:
    """Empty the capability bounding set, so a program run by root next has no capabilities.

    After ``exec`` root keeps uid 0 but loses e.g. CAP_SYS_PTRACE (so Landlock's ptrace rule
    then also protects ``/proc/<worker>/environ``), CAP_DAC_OVERRIDE and CAP_SYS_RAWIO
    (capabilities(7), "Capability bounding set"). Without CAP_SETPCAP (not root) this does
    nothing: such a process has no capabilities to lose.
    """
    for capability in range(64):
        if landlock.prctl(_PR_CAPBSET_DROP, capability) != 0:
            return  # EINVAL past the last capability, or EPERM without CAP_SETPCAP


def harden_worker() -> bool:
    """Make this process non-dumpable and forbid core files; return whether prctl succeeded.

    ``PR_SET_DUMPABLE=0`` (prctl(2)): ``/proc/<pid>/`` files such as ``environ`` and ``mem``
    become owned by root and ptrace by other non-root processes of the user is refused. It does
    not stop root; Landlock does that for targets.
    """
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        return landlock.prctl(_PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False
