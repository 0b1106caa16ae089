"""Tests of `worker.security.sandbox`: rlimits, Landlock confinement of real target processes,
paths."""

from __future__ import annotations

import json
import os
import resource
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config import files as repo_files
from worker.evals.run.targets import run_command
from worker.evals.types import CommandTarget, Example, Settings
from worker.security import landlock, sandbox
from worker.security.sandbox import Limits, Policy, Sandbox, SandboxError

PYTHON = shlex.quote(sys.executable)
needs_landlock = pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock here")


@pytest.fixture()
def use_sandbox() -> Iterator[list[Sandbox]]:
    """Let a test install its own sandbox; restore the previous one afterwards."""
    saved = list(sandbox._current)
    yield sandbox._current
    sandbox._current[:] = saved


def _probe(tmp_path: Path, code: str) -> tuple[Path, CommandTarget]:
    """A checkout at tmp_path/checkout whose target runs ``code`` and writes its result."""
    checkout = tmp_path / "worktrees" / "checkout"
    checkout.mkdir(parents=True)
    script = ("import json, sys\nresult = {}\n" + code +
              "\njson.dump({'output': result}, open(sys.argv[2], 'w'))\n")
    (checkout / "probe.py").write_text(script)
    return checkout, CommandTarget(f"{PYTHON} probe.py {{input_file}} {{output_file}}")


async def _run(checkout: Path, target: CommandTarget) -> object:
    out = await run_command(target, Example("1", 1, "x"), checkout, Settings(timeout_s=30))
    assert out.error is None, out.error
    return out.output


def test_limits_from_env_and_errors() -> None:
    limits = Limits.from_env({"LLMGATE_TARGET_CPU_S": "30", "LLMGATE_TARGET_MEMORY_MB": "512",
                              "LLMGATE_TARGET_FILE_MB": "8", "LLMGATE_TARGET_PROCESSES": "64"})
    assert (limits.cpu_s, limits.memory_bytes, limits.file_bytes, limits.processes) == (
        30, 512 << 20, 8 << 20, 64)
    assert Limits.from_env({}) == Limits()
    assert Limits.from_env({"LLMGATE_TARGET_MEMORY_MB": "0"}).memory_bytes == 0
    for name, value in [("LLMGATE_TARGET_CPU_S", "0"), ("LLMGATE_TARGET_MEMORY_MB", "1e3"),
                        ("LLMGATE_TARGET_PROCESSES", "-4")]:
        with pytest.raises(SandboxError, match=name):
            Limits.from_env({name: value})


def test_policy_from_env() -> None:
    policy = Policy.from_env({"PATH": "/opt/tool/bin:/root/.pyenv/shims:/root/bin:relative:"
                                      "/root/.cargo/bin:/home/u/.local/bin:/bin",
                              "REDIS_URL": "redis://10.0.0.5:6390/0",
                              "LLMGATE_SANDBOX_READ_PATHS": "/srv/models:not-absolute"})
    assert policy.mode == "auto"
    assert {"/opt/tool/bin", "/opt/tool", "/root/.pyenv/shims", "/root/.pyenv", "/root/bin",
            "/srv/models", sys.base_prefix} <= set(policy.read_paths)
    assert not {"/root", "/root/.cargo", "/home/u/.local", "/", "relative"} & set(policy.read_paths)
    assert {"/root/.cargo/bin", "/home/u/.local/bin"} <= set(policy.read_paths)
    assert policy.blocked_ports == {6390} and policy.allowed_ports is None
    assert Policy.from_env({"LLMGATE_SANDBOX_TCP_PORTS": "443, 53"}).allowed_ports == {443, 53}
    assert Policy.from_env({}).blocked_ports == {6379}
    with pytest.raises(SandboxError, match="LLMGATE_SANDBOX_TCP_PORTS"):
        Policy.from_env({"LLMGATE_SANDBOX_TCP_PORTS": "443,https"})
    with pytest.raises(SandboxError, match="LLMGATE_SANDBOX must be one of"):
        Policy.from_env({"LLMGATE_SANDBOX": "maybe"})


async def test_rlimits_are_applied_to_the_target(tmp_path: Path, use_sandbox) -> None:
    use_sandbox[:] = [Sandbox(Limits(cpu_s=7, memory_bytes=1 << 30, file_bytes=3 << 20,
                                     processes=99, open_files=77), Policy(mode="off"))]
    checkout, target = _probe(tmp_path, (
        "import resource as r\n"
        "for n in ('CPU', 'AS', 'FSIZE', 'NPROC', 'NOFILE', 'CORE'):\n"
        "    result[n] = list(r.getrlimit(getattr(r, 'RLIMIT_' + n)))\n"))
    limits = await _run(checkout, target)
    assert limits == {"CPU": [7, 12], "AS": [1 << 30, 1 << 30], "FSIZE": [3 << 20, 3 << 20],
                      "NPROC": [99, 99], "NOFILE": [77, 77], "CORE": [0, 0]}


@pytest.mark.parametrize(("limits", "code", "words"), [
    (Limits(memory_bytes=256 << 20), "b = bytearray(600 << 20)", "MemoryError"),
    (Limits(file_bytes=1 << 20), "open('big', 'wb').write(b'x' * (2 << 20))", "File too large"),
    (Limits(cpu_s=1), "while True: pass", "SIGXCPU"),
])
async def test_each_limit_stops_a_greedy_target(tmp_path: Path, use_sandbox, limits: Limits,
                                                code: str, words: str) -> None:
    use_sandbox[:] = [Sandbox(limits, Policy(mode="off"))]
    checkout, target = _probe(tmp_path, code)
    out = await run_command(target, Example("1", 1, "x"), checkout, Settings(timeout_s=20))
    assert out.output is None and out.error is not None
    assert words in out.error


def test_required_mode_fails_without_landlock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    with pytest.raises(SandboxError, match="required"):
        Sandbox(Limits(), Policy(mode="required"))
    assert "can read the worker's files" in Sandbox(Limits(), Policy()).describe()


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    return server


@needs_landlock
async def test_landlock_keeps_target_inside_its_checkout(tmp_path: Path, use_sandbox) -> None:
    blocked, allowed = _listener(), _listener()
    blocked_port, allowed_port = blocked.getsockname()[1], allowed.getsockname()[1]
    shared = tmp_path / "shared.log"
    shared.write_text("")
    policy = Policy.from_env({"PATH": os.environ["PATH"], "REDIS_URL": f"redis://x:{blocked_port}",
                              "LLMGATE_SANDBOX_WRITE_PATHS": str(shared)})
    use_sandbox[:] = [Sandbox(Limits(), policy)]
    other = tmp_path / "worktrees" / "other-checkout"
    other.mkdir(parents=True)
    (other / "base.txt").write_text("base secret")
    key = tmp_path / "app-key.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----")
    checkout, target = _probe(tmp_path, f"""
import os, socket
def attempt(name, fn):
    try:
        result[name] = fn()
    except OSError as exc:
        result[name] = type(exc).__name__
def read(path):
    with open(path) as f:
        return f.read()
def connect(port):
    with socket.create_connection(('127.0.0.1', port), timeout=5):
        return 'connected'
attempt('other_checkout', lambda: read({str(other / "base.txt")!r}))
attempt('list_worktrees', lambda: os.listdir('..'))
attempt('key', lambda: read({str(key)!r}))
attempt('parent_environ', lambda: read('/proc/%d/environ' % os.getppid()))
attempt('write_outside', lambda: open({str(tmp_path / "planted")!r}, 'w').write('x'))
attempt('blocked_port', lambda: connect({blocked_port}))
attempt('allowed_port', lambda: connect({allowed_port}))
attempt('own_file', lambda: read('probe.py')[:6])
attempt('write_own', lambda: open('made-here', 'w').write('ok'))
attempt('home', lambda: open(os.path.join(os.environ['HOME'], 'h'), 'w').write('ok'))
attempt('shared_log', lambda: open({str(shared)!r}, 'a').write('calls'))
attempt('signal_worker', lambda: os.kill(os.getppid(), 0) or 'LEAK')
attempt('capabilities', lambda: read('/proc/self/status').split('CapEff:')[1].split()[0])
""")
    try:
        result = await _run(checkout, target)
    finally:
        blocked.close()
        allowed.close()
    assert result == {
        "other_checkout": "PermissionError", "list_worktrees": "PermissionError",
        "key": "PermissionError", "parent_environ": "PermissionError",
        "write_outside": "PermissionError",
        "blocked_port": "PermissionError" if landlock.abi_version() >= 4 else "connected",
        "allowed_port": "connected", "own_file": "import", "write_own": 2, "home": 2,
        "shared_log": 5, "capabilities": "0000000000000000",
        "signal_worker": "PermissionError" if landlock.abi_version() >= 6 else "LEAK"}
    assert not (tmp_path / "planted").exists()
    assert (checkout / "made-here").read_text() == "ok"


@needs_landlock
def test_key_file_exposure_is_detected(tmp_path: Path) -> None:
    box = Sandbox(Limits(), Policy(read_paths=(str(tmp_path / "tools"),)))
    assert box.readable_by_targets(tmp_path / "tools" / "key.pem")
    assert not box.readable_by_targets(tmp_path / "secrets" / "key.pem")
    assert "Landlock ABI" in box.describe()


def test_harden_worker_makes_the_process_undumpable() -> None:
    code = ("import ctypes, resource\nfrom worker.security.sandbox import harden_worker\n"
            "ok = harden_worker()\nlibc = ctypes.CDLL(None)\n"
            "print(ok, libc.prctl(3, 0, 0, 0, 0), resource.getrlimit(resource.RLIMIT_CORE))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "True 0 (0, 0)"


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "ok.jsonl").write_text('{"input": 1}\n')
    (tmp_path / "outside.txt").write_text("secret")
    return root


@pytest.mark.parametrize(("rel_path", "words"), [
    ("/etc/passwd", "must be relative"),
    ("../outside.txt", "outside the repository"),
    ("evals/../../outside.txt", "outside the repository"),
    ("evals/link-out", "outside the repository"),
    ("evals/dir-link/outside.txt", "outside the repository"),
    ("evals/missing.jsonl", "file not found"),
    ("evals", "not a regular file"),
    ("evals/fifo", "not a regular file"),
])
def test_repository_paths_that_escape_or_are_wrong(tmp_path: Path, rel_path: str,
                                                   words: str) -> None:
    root = _repo(tmp_path)
    (root / "evals" / "link-out").symlink_to(tmp_path / "outside.txt")
    (root / "evals" / "dir-link").symlink_to(tmp_path)
    os.mkfifo(root / "evals" / "fifo")
    with pytest.raises(ConfigError, match=words) as info:
        repo_files.read_repo_file(root, rel_path, 1000)
    assert info.value.path == rel_path and "secret" not in str(info.value)


def test_symlink_inside_and_size_cap(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "alias.jsonl").symlink_to(root / "evals" / "ok.jsonl")
    assert repo_files.read_repo_file(root, "alias.jsonl", 1000) == b'{"input": 1}\n'
    expected = (root / "evals" / "ok.jsonl").resolve()
    assert repo_files.repo_path(root, "evals/./ok.jsonl") == expected
    with pytest.raises(ConfigError, match=r"larger than 5 bytes \(13 bytes\)"):
        repo_files.read_repo_file(root, "evals/ok.jsonl", 5)


def test_apply_limits_never_raises_a_hard_limit() -> None:
    code = ("import resource\nfrom worker.security.sandbox import apply_limits\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (50, 60))\n"
            "apply_limits([(resource.RLIMIT_NOFILE, 500, 500)])\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "(60, 60)"
    assert resource.getrlimit(resource.RLIMIT_CORE) != (-2, -2)  # the test process is untouched


def test_landlock_handled_rights_by_abi() -> None:
    assert landlock.handled_fs_rights(1) == (1 << 13) - 1
    assert landlock.handled_fs_rights(3) == (1 << 15) - 1
    assert landlock.handled_fs_rights(5) == (1 << 16) - 1
    with pytest.raises(ValueError, match=">= 1"):
        landlock.handled_fs_rights(0)
    assert json.dumps(landlock.abi_version()) .isdigit()
