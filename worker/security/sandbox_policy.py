"""What confines a target command: its resource `Limits` and its sandbox `Policy`.

Both are read once from the worker's environment (see `worker.security.sandbox` for the variables)
and checked strictly: a malformed value raises `SandboxError` naming the variable.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: Always-readable system locations (the rest of /etc and /dev, /root, /home, /srv, /opt, /var
#: are not: no raw disks, no configuration that may hold keys).
SYSTEM_READ_PATHS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys",
    "/dev/random", "/dev/urandom",
    "/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/etc/alternatives", "/etc/resolv.conf",
    "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/passwd",
    "/etc/group", "/etc/localtime", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
    "/etc/mime.types", "/etc/os-release", "/etc/services", "/etc/protocols", "/etc/python3",
    "/run/systemd/resolve",
)
DEFAULT_REDIS_PORT = 6379
MODES = ("auto", "required", "off")
_MIB = 1 << 20


class SandboxError(ValueError):
    """A sandbox setting is malformed, or the sandbox is required but unavailable."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one target process (``setrlimit``; each child of it gets its own).

    Attributes:
        cpu_s: CPU seconds (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL 5 s later. Default 600.
        memory_bytes: address space (RLIMIT_AS), bytes; 0 for no limit. Default 4 GiB
            (V8-based runtimes reserve a lot of address space; lower it for Python-only suites).
        file_bytes: largest file it may write (RLIMIT_FSIZE; SIGXFSZ beyond), bytes. 256 MiB.
        processes: processes of the worker's user (RLIMIT_NPROC; counts every process of that
            user, the worker included; not enforced for root). Default 512.
        open_files: open file descriptors (RLIMIT_NOFILE). Default 1024.
    """

    cpu_s: int = 600
    memory_bytes: int = 4096 * _MIB
    file_bytes: int = 256 * _MIB
    processes: int = 512
    open_files: int = 1024

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Limits:
        """Read ``LLMGATE_TARGET_CPU_S``, ``_MEMORY_MB``, ``_FILE_MB`` and ``_PROCESSES``.

        Raises:
            SandboxError: a value is not a whole number (the variable is named).
        """
        default = cls()
        return cls(
            cpu_s=_whole(environ, "LLMGATE_TARGET_CPU_S", default.cpu_s, minimum=1),
            memory_bytes=_whole(environ, "LLMGATE_TARGET_MEMORY_MB",
                                default.memory_bytes // _MIB, minimum=0) * _MIB,
            file_bytes=_whole(environ, "LLMGATE_TARGET_FILE_MB",
                              default.file_bytes // _MIB, minimum=1) * _MIB,
            processes=_whole(environ, "LLMGATE_TARGET_PROCESSES", default.processes, minimum=1),
        )

    def rlimits(self) -> list[tuple[int, int, int]]:
        """Return ``(resource, soft, hard)`` triples to apply; an address space of 0 is left out."""
        out = [(resource.RLIMIT_CPU, self.cpu_s, self.cpu_s + 5),
               (resource.RLIMIT_FSIZE, self.file_bytes, self.file_bytes),
               (resource.RLIMIT_NPROC, self.processes, self.processes),
               (resource.RLIMIT_NOFILE, self.open_files, self.open_files),
               (resource.RLIMIT_CORE, 0, 0)]
        if self.memory_bytes:
            out.append((resource.RLIMIT_AS, self.memory_bytes, self.memory_bytes))
        return out


def _whole(environ: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < minimum:
        raise SandboxError(f"{name} must be a whole number >= {minimum}, got {raw[:20]!r}")
    return int(raw)


@dataclass(frozen=True)
class Policy:
    """Where targets may read, and which TCP ports they may (not) connect to.

    Attributes:
        mode: ``auto``, ``required`` or ``off`` (``LLMGATE_SANDBOX``).
        read_paths: read-and-execute locations (system, ``PATH``, Python, extra).
        write_paths: extra locations targets may also write (``LLMGATE_SANDBOX_WRITE_PATHS``).
        allowed_ports: the only TCP ports to connect to, or None for all but ``blocked_ports``.
        blocked_ports: ports refused when ``allowed_ports`` is None (the Redis port).
    """

    mode: str = "auto"
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()
    allowed_ports: frozenset[int] | None = None
    blocked_ports: frozenset[int] = field(default_factory=lambda: frozenset({DEFAULT_REDIS_PORT}))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Policy:
        """Build the policy from ``LLMGATE_SANDBOX*``, ``PATH`` and ``REDIS_URL``.

        Raises:
            SandboxError: a malformed mode or port list.
        """
        mode = environ.get("LLMGATE_SANDBOX", "").strip().lower() or "auto"
        if mode not in MODES:
            raise SandboxError(f"LLMGATE_SANDBOX must be one of {', '.join(MODES)}, got {mode!r}")
        extra = environ.get("LLMGATE_SANDBOX_READ_PATHS", "")
        reads = [*SYSTEM_READ_PATHS, *_path_dirs(environ.get("PATH", os.defpath)),
                 sys.prefix, sys.base_prefix, sys.exec_prefix,
                 *(p for p in extra.split(":") if p.startswith("/"))]
        writes = tuple(p for p in environ.get("LLMGATE_SANDBOX_WRITE_PATHS", "").split(":")
                       if p.startswith("/"))
        return cls(mode, tuple(dict.fromkeys(reads)), writes, _ports(environ),
                   frozenset({_redis_port(environ.get("REDIS_URL", ""))}))


def _path_dirs(path_value: str) -> list[str]:
    """PATH directories, plus the installation a ``shims`` or system ``bin`` directory is in.

    ``/root/.pyenv/shims`` brings ``/root/.pyenv`` (its shims run ``libexec/pyenv``);
    ``/opt/tool/bin`` brings ``/opt/tool``. A ``bin`` under a home directory brings nothing
    more (``~/.cargo`` and ``~/.local`` hold credentials); add what such tools need with
    ``LLMGATE_SANDBOX_READ_PATHS``.
    """
    out = []
    for entry in (e.rstrip("/") for e in path_value.split(":")):
        if not entry.startswith("/"):
            continue
        out.append(entry)
        parent, name = os.path.split(entry)
        in_home = parent == "/root" or parent.startswith(("/root/", "/home/"))
        if name == "shims" or (name in ("bin", "sbin") and not in_home and parent != "/"):
            out.append(parent)
    return out


def _ports(environ: Mapping[str, str]) -> frozenset[int] | None:
    raw = environ.get("LLMGATE_SANDBOX_TCP_PORTS", "").strip()
    if not raw:
        return None
    ports = [part.strip() for part in raw.split(",") if part.strip()]
    if not all(p.isascii() and p.isdigit() and 0 < int(p) < 65536 for p in ports):
        raise SandboxError("LLMGATE_SANDBOX_TCP_PORTS must be comma-separated TCP ports, "
                           "e.g. 443,53")
    return frozenset(int(p) for p in ports)


def _redis_port(url: str) -> int:
    try:
        return urlsplit(url).port or DEFAULT_REDIS_PORT
    except ValueError:
        return DEFAULT_REDIS_PORT
