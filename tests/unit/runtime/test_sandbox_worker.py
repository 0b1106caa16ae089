"""The worker's start-up hardening, and git's safety with untrusted heads (no submodules)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_github import generate_app_keypair
from worker.checkout import Checkouts
from worker.runtime.hardening import check_settings
from worker.runtime.settings import SettingsError
from worker.security.secretbox import SecretBox

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("environ", "words"), [
    ({"LLMGATE_SANDBOX": "sometimes"}, "LLMGATE_SANDBOX must be one of"),
    ({"LLMGATE_TARGET_MEMORY_MB": "lots"}, "LLMGATE_TARGET_MEMORY_MB must be a whole number"),
    ({"LLMGATE_ENCRYPTION_KEYS": "my-secret-key"}, "key 1 of LLMGATE_ENCRYPTION_KEYS"),
    # Case from the field (tester, issue 12, H3): head's bot.py connected to the worker's
    # unix-socket Redis and set llmgate:pwned during the run.
    ({"REDIS_URL": "unix:///tmp/t12/r04-redis.sock"}, "REDIS_URL is a unix socket without a "
                                                      "password"),
    ({"REDIS_URL": "redis://localhost:6379/0", "LLMGATE_CACHE_REDIS_URL": "unix:///run/c.sock"},
     "LLMGATE_CACHE_REDIS_URL is a unix socket without a password"),
])
def test_bad_security_settings_stop_the_worker(environ: dict[str, str], words: str) -> None:
    with pytest.raises(SettingsError, match=words) as info:
        check_settings(environ)
    assert "my-secret-key" not in str(info.value)
    assert check_settings({"LLMGATE_ENCRYPTION_KEYS": SecretBox.generate_key()}).policy.mode \
        == "auto"
    for url in ("unix://:pw@/run/redis.sock", "unix:///run/redis.sock?password=pw",
                "redis://localhost:6379/0"):
        assert check_settings({"REDIS_URL": url}).policy.mode == "auto"


def test_harden_redacts_the_app_key_and_env_secrets_from_every_log_line(tmp_path: Path) -> None:
    private_pem, _ = generate_app_keypair()
    key_file = tmp_path / "app.pem"
    key_file.write_text(private_pem)
    code = """
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(message)s")
from worker.runtime.hardening import harden
from worker.runtime.settings import WorkerConfig
config = WorkerConfig.from_env()
harden(config)
line = config.private_key.splitlines()[3]
logging.getLogger("x").warning("key line %s, provider %s", line, "sk-live-abcdef123456")
import ctypes
print("dumpable", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
"""
    env = {"PATH": "/usr/bin:/bin", "GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY_FILE":
           str(key_file), "OPENAI_API_KEY": "sk-live-abcdef123456", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "WARNING key line [redacted], provider [redacted]" in out.stdout
    assert "dumpable 0" in out.stdout and "targets" in out.stdout
    assert "sk-live-abcdef123456" not in out.stdout + out.stderr


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c",
                           "user.email=t@example.com", "-c", "protocol.file.allow=always",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


async def test_submodules_of_an_untrusted_head_are_never_fetched(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    _git(inner, "init", "-q", "-b", "main")
    (inner / "SECRET.txt").write_text("from the submodule\n")
    _git(inner, "add", "-A")
    _git(inner, "commit", "-q", "-m", "inner")
    outer = tmp_path / "outer"
    outer.mkdir()
    _git(outer, "init", "-q", "-b", "main")
    (outer / "README.md").write_text("outer\n")
    _git(outer, "add", "-A")
    _git(outer, "submodule", "add", "-q", inner.as_uri(), "vendor/inner")
    _git(outer, "commit", "-q", "-m", "with a submodule")
    head = _git(outer, "rev-parse", "HEAD")
    checkouts = Checkouts(tmp_path / "work")
    async with checkouts.worktree("acme/outer", outer.as_uri(), head) as path:
        assert (path / ".gitmodules").is_file()
        assert (path / "vendor" / "inner").is_dir()
        assert list((path / "vendor" / "inner").iterdir()) == []  # not cloned, not checked out
    mirror = tmp_path / "work" / "mirrors" / "acme__outer.git"
    assert not (mirror / "modules").exists()  # where git would keep a submodule's objects
