"""A small ctypes binding of Linux Landlock: unprivileged filesystem, TCP and scope sandboxing.

Landlock (Linux 5.13+) lets any process restrict itself and its future children: after
``landlock_restrict_self`` only the accesses its rulesets allow remain, for root too, and they
cannot be undone. It also forbids ptrace-style access to processes outside the sandbox, so a
sandboxed target cannot read ``/proc/<worker>/environ`` or ``/proc/<worker>/mem`` even as
the same user. Source: the kernel's Documentation/userspace-api/landlock.rst and
include/uapi/linux/landlock.h (constants and struct layouts below); syscall numbers 444-446 are
the same on every architecture (they were allocated in the unified syscall table).

ABI versions add rights: 2 ``REFER`` (cross-directory rename/link), 3 ``TRUNCATE``, 4 TCP
``BIND``/``CONNECT`` by port, 5 ``IOCTL_DEV``, 6 scoping of abstract UNIX sockets and
signals. Rulesets are built in the parent (they are plain file descriptors) and applied in the
child between ``fork`` and ``exec`` with `restrict_self`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable
from functools import cache

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
#: Rights that apply to a regular file (the others only make sense on a directory).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
#: Reading and running files, listing directories.
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR


class LandlockError(OSError):
    """A Landlock system call failed (errno and a message naming the step)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def prctl(option: int, arg: int = 0) -> int:
    """Call ``prctl(option, arg, 0, 0, 0)``; return its result (-1 on error, errno set).

    libc is loaded on first use: call this once in the parent before forking (see
    `worker.security.sandbox`), so that the child never runs the dynamic loader.
    """
    return int(_libc().prctl(option, arg, 0, 0, 0))


def unshare(flags: int) -> int:
    """Call ``unshare(flags)`` (unshare(2)); return its result (-1 on error, errno set).

    Like `prctl`, call a libc function once in the parent before forking (worker/security/
    pidns.py uses it in the forked child).
    """
    return int(_libc().unshare(flags))


def _check(result: int, step: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"landlock {step}: {os.strerror(errno)}")
    return result


@cache
def abi_version() -> int:
    """Return the kernel's Landlock ABI version, or 0 when Landlock is missing or disabled."""
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):  # no libc syscall(): not Linux
        return 0
    return max(int(version), 0)


def handled_fs_rights(abi: int) -> int:
    """Return every filesystem right the given ABI knows (all of them are then denied by default).

    Raises:
        ValueError: ``abi`` is below 1.
    """
    if abi < 1:
        raise ValueError(f"Landlock ABI must be >= 1, got {abi}")
    rights = (1 << 13) - 1
    rights |= REFER if abi >= 2 else 0
    rights |= TRUNCATE if abi >= 3 else 0
    return rights | (IOCTL_DEV if abi >= 5 else 0)


def create_ruleset(*, fs: int = 0, net: int = 0, scoped: int = 0) -> int:
    """Create a ruleset that handles (denies unless allowed) ``fs``/``net`` rights and scopes.

    Returns:
        The ruleset's file descriptor (close-on-exec); the caller closes it.

    Raises:
        LandlockError: the kernel refused (e.g. a right or scope unknown to its ABI).
    """
    size = 24 if scoped else (16 if net else 8)
    attr = _RulesetAttr(fs, net, scoped)
    fd = _libc().syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                         ctypes.c_uint32(0))
    return _check(int(fd), "create_ruleset")


def allow_path(ruleset_fd: int, path: str, rights: int) -> bool:
    """Allow ``rights`` on ``path`` and everything beneath it (a file: on that file only).

    Directory-only rights are dropped for a regular file. A path that does not exist is
    skipped.

    Returns:
        True when the rule was added, False when the path does not exist.

    Raises:
        LandlockError: the kernel refused the rule.
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            rights &= FILE_RIGHTS
        attr = _PathBeneathAttr(rights, fd)
        _check(int(_libc().syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset_fd),
                                   ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(attr),
                                   ctypes.c_uint32(0))), f"add_rule({path!r})")
    finally:
        os.close(fd)
    return True


def allow_tcp_ports(ruleset_fd: int, ports: Iterable[int], rights: int = NET_CONNECT_TCP) -> None:
    """Allow ``rights`` (default: connecting) on each TCP port of ``ports``.

    Raises:
        LandlockError: the kernel refused a rule (e.g. no TCP support before ABI 4).
    """
    attr = _NetPortAttr(rights, 0)
    syscall = _libc().syscall
    for port in ports:
        attr.port = port
        _check(int(syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_NET_PORT),
                           ctypes.byref(attr), ctypes.c_uint32(0))), f"add_rule(port {port})")


def no_new_privs() -> None:
    """Set ``no_new_privs``: nothing this process executes can gain privileges (setuid files).

    Raises:
        LandlockError: prctl failed.
    """
    _check(prctl(_PR_SET_NO_NEW_PRIVS, 1), "prctl(PR_SET_NO_NEW_PRIVS)")


def restrict_self(ruleset_fds: Iterable[int]) -> None:
    """Apply each ruleset to the calling thread for good (call it in the child before exec).

    Sets ``no_new_privs`` first, which Landlock requires of a process without CAP_SYS_ADMIN.

    Raises:
        LandlockError: a call failed; the caller must not go on to run the untrusted program.
    """
    no_new_privs()
    for fd in ruleset_fds:
        _check(int(_libc().syscall(_SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0))),
               "restrict_self")
